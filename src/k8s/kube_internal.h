/* Private to src/k8s: the client's configuration. */
#ifndef GPUSLICE_KUBE_INTERNAL_H
#define GPUSLICE_KUBE_INTERNAL_H

#include <stddef.h>

/* Bytes a kubeconfig gave inline (decoded base64), handed to libcurl from
 * memory: no temporary file holds a private key. */
struct kube_blob {
    unsigned char *data;
    size_t len;
};

struct kube_client {
    char *base;                           /* https://host:port, no trailing slash */
    char *token;                          /* static bearer token, or NULL */
    char *token_file;                     /* re-read on every request (bound tokens rotate), or NULL */
    char *ca_file;                        /* CA bundle path, or NULL ... */
    struct kube_blob ca_data;             /* ... or inline; neither: the system store */
    char *cert_file, *key_file;           /* client certificate and key (PEM), as files ... */
    struct kube_blob cert_data, key_data; /* ... or inline */
    int insecure;                         /* skip TLS verification (kubeconfig opt-in only) */
    int attempts;
    int backoff_ms;
    long timeout_ms;
};

struct kube_client *kube_client_alloc(const char *base, char *err, size_t errlen);

/* A kubeconfig's text (len bytes, YAML or JSON): the current context's
 * client (kube_kubeconfig.c). dir: the file's directory, for relative
 * paths; origin names the file in errors. NULL with err set. */
#define KUBE_KUBECONFIG_MAX_BYTES (1 << 20)
struct kube_client *kube_client_from_kubeconfig(const char *text, size_t len, const char *dir, const char *origin,
                                                char *err, size_t errlen);

/* Whether tok can be sent as a bearer token (one header line). */
int kube_token_ok(const char *tok);

/* Whether this libcurl takes kc's TLS settings (inline CA, certificate and
 * key need its in-memory options): 0, or -1 with err set. */
int kube_tls_check(const struct kube_client *kc, char *err, size_t errlen);
void kube_global_init(void);

#endif
