/* A small JSON-over-HTTP(S) server on libmicrohttpd, shared by the extender
 * and the admission webhook: bodies are collected (bounded), handed to one
 * handler, and its answer is sent. */
#ifndef GPUSLICE_HTTPD_H
#define GPUSLICE_HTTPD_H

#include <stddef.h>

/* Limits sized to real bodies: an ExtenderArgs for 5,000 nodes with
 * nodeCacheCapable (names only) is ~0.3 MiB plus the pod, and a pod is at
 * most ~1.5 MiB (etcd's object limit), so an AdmissionReview (object and
 * oldObject) stays under 4 MiB. Bodies above the limit are refused with 413
 * from their Content-Length, before anything is buffered. All connections
 * together buffer at most GS_HTTPD_MAX_BUFFERED; past it, 503. */
#define GS_HTTPD_MAX_BODY (4u << 20)
#define GS_HTTPD_MAX_BUFFERED (32u << 20)
/* Connections: many more than a slow-client flood can hold open from one
 * process's file descriptors, each dropped after GS_HTTPD_IDLE_SECONDS
 * without progress. */
#define GS_HTTPD_MAX_CONNECTIONS 8192
#define GS_HTTPD_IDLE_SECONDS 10
/* Connections from one client address: a flood from one address (a pod
 * trickling a byte every 2 s into thousands of TLS handshakes) holds at most
 * this many, leaving the rest to the API server, kubelet's probes and
 * Prometheus. Well above what one API server or kube-scheduler opens to a
 * webhook or an extender (one per request in flight). */
#define GS_HTTPD_MAX_PER_CLIENT 1024

/* Returns the HTTP status and sets *out (malloc'd) and *ctype (static). */
typedef int (*gs_httpd_handler)(void *ud, const char *method, const char *url, const char *body, size_t len, char **out,
                                const char **ctype);

struct gs_httpd;

/* addr NULL = all interfaces; port 0 = pick one (see gs_httpd_port).
 * cert/key: PEM file paths for TLS, or NULL for plain HTTP. */
struct gs_httpd *gs_httpd_start(const char *addr, int port, const char *cert, const char *key, int threads,
                                gs_httpd_handler h, void *ud, char *err, size_t errlen);

/* TLS settings: cert/key as above; client_ca (PEM file, needs cert/key):
 * mutual TLS, where every request must come over a connection whose client
 * certificate chains to client_ca, is valid now and is meant for TLS
 * client authentication (extended key usage clientAuth); any other request
 * is answered 403 before its body is read or the handler runs. */
struct gs_httpd_tls {
    const char *cert, *key, *client_ca;
};
struct gs_httpd *gs_httpd_start_tls(const char *addr, int port, const struct gs_httpd_tls *tls, int threads,
                                    gs_httpd_handler h, void *ud, char *err, size_t errlen);

/* Everything a server can be started with: TLS as above, worker threads, and
 * connection bounds (0 = GS_HTTPD_MAX_CONNECTIONS, GS_HTTPD_MAX_PER_CLIENT);
 * per_client may not exceed connections. */
struct gs_httpd_opts {
    struct gs_httpd_tls tls;
    int threads;
    unsigned max_connections, max_per_client;
};
struct gs_httpd *gs_httpd_start_opts(const char *addr, int port, const struct gs_httpd_opts *o, gs_httpd_handler h,
                                     void *ud, char *err, size_t errlen);
int gs_httpd_port(const struct gs_httpd *s);
void gs_httpd_stop(struct gs_httpd *s);

#endif
