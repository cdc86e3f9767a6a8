/* See curl_buf.h. */
#include "curl_buf.h"

#include <stdlib.h>
#include <string.h>

int gs_curl_buf_add(struct gs_curl_buf *b, const char *p, size_t n)
{
    if (n > GS_CURL_BUF_MAX || b->len + n + 1 > GS_CURL_BUF_MAX) {
        b->overflow = 1;
        return -1;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

size_t gs_curl_buf_write(char *p, size_t size, size_t n, void *ud)
{
    return gs_curl_buf_add(ud, p, size * n) == 0 ? size * n : 0;
}

char *gs_curl_buf_take(struct gs_curl_buf *b)
{
    char *d = b->data ? b->data : strdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

void gs_curl_buf_free(struct gs_curl_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
