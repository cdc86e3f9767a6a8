/* A small JSON-over-HTTP(S) server on libmicrohttpd, shared by the extender
 * and the admission webhook: bodies are collected (bounded), handed to one
 * handler, and its answer is sent. */
#ifndef GPUSLICE_HTTPD_H
#define GPUSLICE_HTTPD_H

#include <stddef.h>

#define GS_HTTPD_MAX_BODY (64u << 20)

/* Returns the HTTP status and sets *out (malloc'd) and *ctype (static). */
typedef int (*gs_httpd_handler)(void *ud, const char *method, const char *url, const char *body,
                                size_t len, char **out, const char **ctype);

struct gs_httpd;

/* addr NULL = all interfaces; port 0 = pick one (see gs_httpd_port).
 * cert/key: PEM file paths for TLS, or NULL for plain HTTP. */
struct gs_httpd *gs_httpd_start(const char *addr, int port, const char *cert, const char *key,
                                int threads, gs_httpd_handler h, void *ud, char *err,
                                size_t errlen);
int gs_httpd_port(const struct gs_httpd *s);
void gs_httpd_stop(struct gs_httpd *s);

#endif
