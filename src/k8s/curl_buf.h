/* A growing response buffer for libcurl, bounded: the one the API client
 * and `gpuslice inspect` collect bodies in. Always NUL-terminated once
 * anything was added. */
#ifndef GPUSLICE_CURL_BUF_H
#define GPUSLICE_CURL_BUF_H

#include <stddef.h>

#define GS_CURL_BUF_MAX (64u << 20) /* refuse bodies above 64 MiB */

struct gs_curl_buf {
    char *data;
    size_t len, cap;
    int overflow; /* a body above GS_CURL_BUF_MAX was refused */
};

/* Appends n bytes. 0, or -1 (overflow or out of memory). */
int gs_curl_buf_add(struct gs_curl_buf *b, const char *p, size_t n);

/* A CURLOPT_WRITEFUNCTION; CURLOPT_WRITEDATA is the struct gs_curl_buf. */
size_t gs_curl_buf_write(char *p, size_t size, size_t n, void *ud);

/* Hands the data over (an empty string when nothing came; NULL only when
 * out of memory) and leaves b empty. */
char *gs_curl_buf_take(struct gs_curl_buf *b);

void gs_curl_buf_free(struct gs_curl_buf *b);

#endif
