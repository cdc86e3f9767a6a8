/*
 * A small Kubernetes API client on libcurl + jansson, shared by the node
 * agent and the scheduler extender.
 *
 * - Configuration: in-cluster (service-account token + CA +
 *   KUBERNETES_SERVICE_HOST/PORT), a kubeconfig file (tokens and client
 *   certificates), or a plain base URL (development and tests).
 * - Requests retry transport errors, 429 and 5xx with exponential backoff;
 *   4xx answers (409 Conflict included) are returned to the caller at once.
 * - Every retry and every failure is logged on one line naming the method,
 *   the path and the status.
 * - Thread-safe: each call uses its own curl handle.
 */
#ifndef GPUSLICE_KUBE_CLIENT_H
#define GPUSLICE_KUBE_CLIENT_H

#include <jansson.h>
#include <stddef.h>

struct kube_client;

/* Reads the pod's service account from dir (NULL: the standard
 * /var/run/secrets/kubernetes.io/serviceaccount) and the API server address
 * from KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT. */
struct kube_client *kube_client_new_incluster(const char *dir, char *err, size_t errlen);
/* Reads a kubeconfig (YAML or JSON, at most 1 MiB): the current context's
 * cluster (server, certificate-authority or -data,
 * insecure-skip-tls-verify) and user (token or tokenFile,
 * client-certificate and client-key or their -data), relative paths from
 * the file's directory. Exec plugins, auth providers and basic
 * authentication are refused (err says which). */
struct kube_client *kube_client_new_kubeconfig(const char *path, char *err, size_t errlen);
/* A base URL such as http://127.0.0.1:8080, with an optional bearer token. */
struct kube_client *kube_client_new_url(const char *base_url, const char *token, char *err, size_t errlen);
/* Picks one: url if given, else kubeconfig if given, else $KUBECONFIG if set,
 * else in-cluster. */
struct kube_client *kube_client_new_auto(const char *url, const char *kubeconfig, char *err, size_t errlen);
void kube_client_free(struct kube_client *kc);

/* One request. Returns the HTTP status, or -1 after the last transport
 * failure (err says why). *body gets the response body (malloc'd,
 * NUL-terminated) when body is non-NULL, even for error statuses. */
int kube_request(struct kube_client *kc, const char *method, const char *path, const char *content_type,
                 const char *data, char **body, char *err, size_t errlen);

/* GET path and parse the JSON body. Returns the status (-1 transport, -2
 * body not JSON); *out is set only for 2xx. */
int kube_get_json(struct kube_client *kc, const char *path, json_t **out, char *err, size_t errlen);

/* JSON merge patch (RFC 7386). Put metadata.resourceVersion in the patch to
 * make it conditional: the server answers 409 when it moved on. Returns the
 * status; *out gets the updated object on 2xx if out is non-NULL. */
int kube_merge_patch(struct kube_client *kc, const char *path, json_t *patch, json_t **out, char *err, size_t errlen);

/* Writes annotations on the object at path by a merge patch conditional on
 * its resourceVersion, and on 409 re-reads the object and decides again,
 * at most attempts times: the one retry discipline of the extender and the
 * node agent. build(cur, attempt, ud, rv, why, whylen) returns the
 * annotations to write (a new reference: name -> string, or null to
 * remove), or NULL with why to give up. cur is the object as last read:
 * the caller's cur on attempt 0 (NULL when the caller decides from its own
 * cache), the re-read object after each conflict (a failed re-read uses
 * up an attempt and is tried again). rv comes preset to cur's
 * resourceVersion; build may set another (from its cache).
 * Returns the status of the last patch (2xx: *out gets the updated object
 * when out is non-NULL), or one of the KUBE_RETRY_* below; err says why. */
/* Room for a resourceVersion being written back and its NUL: an opaque
 * token, in practice etcd's revision in decimal (20 digits at most). */
#define KUBE_RV_MAX 64
typedef json_t *(*kube_annotate_fn)(json_t *cur, int attempt, void *ud, char rv[KUBE_RV_MAX], char *why, size_t whylen);
#define KUBE_RETRY_CONFLICTS 409 /* every attempt conflicted */
#define KUBE_RETRY_GAVE_UP (-2)  /* build returned NULL */
#define KUBE_RETRY_REREAD (-3)   /* the re-read after a conflict failed */
int kube_annotate_retry(struct kube_client *kc, const char *path, json_t *cur, int attempts, kube_annotate_fn build,
                        void *ud, json_t **out, char *err, size_t errlen);

/* Streams a watch: GET path (which must already carry ?watch=1 etc.) and
 * calls cb(type, object) for each event line. Returns when the server ends
 * the stream (0), cb returns non-zero (that value), *stop becomes non-zero
 * (0), or on failure (-1, or the HTTP status if not 200). Not retried: the
 * caller re-lists and re-watches. */
typedef int (*kube_watch_cb)(const char *type, json_t *object, void *ud);
int kube_watch(struct kube_client *kc, const char *path, kube_watch_cb cb, void *ud, volatile int *stop, char *err,
               size_t errlen);

/* Exponential backoff with jitter for re-list and re-watch: each wait is
 * drawn uniformly from [d/2, d], d doubling from base_ms up to max_ms; the
 * caller resets it after a healthy run (KUBE_WATCH_HEALTHY), so an API
 * server that closes every watch at once sees a few requests a minute,
 * not thousands. */
struct kube_backoff {
    long base_ms, max_ms, cur_ms;
    unsigned int seed;
};
/* A watch run was healthy when it delivered an event or lasted 5 s. */
#define KUBE_WATCH_HEALTHY(events, ms) ((events) > 0 || (ms) >= 5000)
void kube_backoff_init(struct kube_backoff *b, long base_ms, long max_ms);
void kube_backoff_reset(struct kube_backoff *b);
/* The next wait in ms (and doubles d). */
long kube_backoff_next(struct kube_backoff *b);
/* Sleeps the next wait, returning early once *stop is set (stop may be NULL). */
void kube_backoff_wait(struct kube_backoff *b, volatile int *stop);
long kube_monotonic_ms(void);

/* Percent-encodes s for use in a query string. Returns a malloc'd string. */
char *kube_urlencode(const char *s);

/* Room for a pod's metadata.uid and its NUL: the API server gives a
 * 36-character UUID; a longer one is refused, never cut short (a cut uid
 * could name another pod). */
#define KUBE_POD_UID_MAX 64

/* Logging shared by the k8s client and the node agent: one line on stderr,
 * "gpuslice-node-agent: <level>: ..."; lines above the current level are
 * dropped. */
enum kube_log_level { KUBE_LOG_ERROR = 0, KUBE_LOG_WARN, KUBE_LOG_INFO, KUBE_LOG_DEBUG };
/* The level named s ("error", "warn", "info" or "debug"), or -1. */
int kube_log_level_parse(const char *s);
void kube_log_set_level(int level);
void kube_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kube_log_set_prefix(const char *prefix);

#endif
