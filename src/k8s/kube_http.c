/* Requests with retries, and watch streams, on libcurl. */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "curl_buf.h"
#include "kube_client.h"
#include "kube_internal.h"
#include "text_escape.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void global_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void kube_global_init(void)
{
    pthread_once(&g_once, global_init_once);
}

int kube_token_ok(const char *tok)
{
    /* a bearer token is one header line: no space, control byte or 8-bit byte */
    for (const char *p = tok; *p; p++)
        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
            return 0;
    return *tok != '\0';
}

static int token_copy(const char *from, char **tok, char *err, size_t errlen)
{
    if ((*tok = strdup(from)))
        return 0;
    snprintf(err, errlen, "out of memory");
    return -1;
}

/* The bearer token into *tok (NULL: none configured). A token file is read
 * at every request, as bound service-account tokens rotate; one that cannot
 * be read, or holds no token, is an error naming it, not a request without
 * credentials that the API server answers 401. 0, or -1 with err set. */
static int read_token(const struct kube_client *kc, char **tok, char *err, size_t errlen)
{
    *tok = NULL;
    if (kc->token)
        return token_copy(kc->token, tok, err, errlen);
    if (!kc->token_file)
        return 0;
    FILE *f = fopen(kc->token_file, "r");
    if (!f) {
        snprintf(err, errlen, "token file %s: %s", kc->token_file, strerror(errno));
        return -1;
    }
    char buf[16384];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (n == sizeof buf) {
        snprintf(err, errlen, "token file %s: larger than %zu bytes", kc->token_file, sizeof buf - 1);
        return -1;
    }
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    if (!kube_token_ok(buf)) {
        snprintf(err, errlen, "token file %s: %s", kc->token_file,
                 n ? "holds a space or a control byte, which a header cannot carry" : "empty");
        return -1;
    }
    int rc = token_copy(buf, tok, err, errlen);
    explicit_bzero(buf, sizeof buf);
    return rc;
}

/* Sets kc's TLS options on c: NULL, or the first that libcurl refused. */
static const char *set_tls(CURL *c, const struct kube_client *kc)
{
    struct curl_blob ca = { kc->ca_data.data, kc->ca_data.len, CURL_BLOB_COPY };
    struct curl_blob cert = { kc->cert_data.data, kc->cert_data.len, CURL_BLOB_COPY };
    struct curl_blob key = { kc->key_data.data, kc->key_data.len, CURL_BLOB_COPY };
    if (kc->ca_file && curl_easy_setopt(c, CURLOPT_CAINFO, kc->ca_file) != CURLE_OK)
        return "a CA file";
    if (kc->ca_data.data && curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca) != CURLE_OK)
        return "an inline CA (certificate-authority-data)";
    if (kc->cert_file && curl_easy_setopt(c, CURLOPT_SSLCERT, kc->cert_file) != CURLE_OK)
        return "a client certificate file";
    if (kc->cert_data.data && curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert) != CURLE_OK)
        return "an inline client certificate (client-certificate-data)";
    if (kc->key_file && curl_easy_setopt(c, CURLOPT_SSLKEY, kc->key_file) != CURLE_OK)
        return "a client key file";
    if (kc->key_data.data && curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key) != CURLE_OK)
        return "an inline client key (client-key-data)";
    if (kc->insecure && (curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L) != CURLE_OK ||
                         curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L) != CURLE_OK))
        return "insecure-skip-tls-verify";
    return NULL;
}

int kube_tls_check(const struct kube_client *kc, char *err, size_t errlen)
{
    kube_global_init();
    CURL *c = curl_easy_init();
    const char *refused = c ? set_tls(c, kc) : "any request (cannot make a handle)";
    if (c)
        curl_easy_cleanup(c);
    if (refused)
        snprintf(err, errlen, "libcurl %s does not take %s", curl_version_info(CURLVERSION_NOW)->version, refused);
    return refused ? -1 : 0;
}

/* A handle for one request, or NULL with err set. */
static CURL *make_handle(struct kube_client *kc, const char *method, const char *path, struct curl_slist **hdrs,
                         const char *content_type, char *err, size_t errlen)
{
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    size_t ulen = strlen(kc->base) + strlen(path) + 1;
    char *url = malloc(ulen);
    if (!url) {
        curl_easy_cleanup(c);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(url, ulen, "%s%s", kc->base, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    free(url); /* libcurl copies the URL */
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    const char *refused = set_tls(c, kc); /* kube_tls_check said at set-up why */
    if (refused) {
        curl_easy_cleanup(c);
        snprintf(err, errlen, "libcurl does not take %s", refused);
        return NULL;
    }
    *hdrs = curl_slist_append(*hdrs, "Accept: application/json");
    if (content_type) {
        char h[128];
        snprintf(h, sizeof h, "Content-Type: %s", content_type);
        *hdrs = curl_slist_append(*hdrs, h);
    }
    char *tok;
    if (read_token(kc, &tok, err, errlen) != 0) {
        curl_easy_cleanup(c); /* the caller frees *hdrs */
        return NULL;
    }
    if (tok) {
        size_t hl = strlen(tok) + 32;
        char *h = malloc(hl);
        if (h) {
            snprintf(h, hl, "Authorization: Bearer %s", tok);
            *hdrs = curl_slist_append(*hdrs, h);
            explicit_bzero(h, hl);
            free(h);
        }
        explicit_bzero(tok, strlen(tok));
        free(tok);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
    return c;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int kube_request(struct kube_client *kc, const char *method, const char *path, const char *content_type,
                 const char *data, char **body, char *err, size_t errlen)
{
    long backoff = kc->backoff_ms;
    int status = -1;
    if (body)
        *body = NULL;
    for (int attempt = 1; attempt <= kc->attempts; attempt++) {
        struct curl_slist *hdrs = NULL;
        struct gs_curl_buf b = { 0 };
        char why[300];
        CURLcode rc = CURLE_OK;
        long code = 0;
        CURL *c = make_handle(kc, method, path, &hdrs, content_type, why, sizeof why);
        int made = c != NULL;
        if (made) {
            curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, kc->timeout_ms);
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, gs_curl_buf_write);
            curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
            if (data) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, data);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(data));
            }
            rc = curl_easy_perform(c);
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
            curl_easy_cleanup(c);
        }
        curl_slist_free_all(hdrs);
        int retry;
        if (!made) {
            /* tried again, as a transport failure is: a projected token
             * file may appear after the process started */
            snprintf(err, errlen, "%s %s: %s", method, path, why);
            status = -1;
            retry = 1;
        } else if (rc != CURLE_OK) {
            snprintf(err, errlen, "%s %s: %s%s", method, path, curl_easy_strerror(rc),
                     b.overflow ? " (body above 64 MiB)" : "");
            status = -1;
            retry = !b.overflow;
        } else {
            status = (int)code;
            retry = status == 429 || status >= 500;
            if (retry)
                snprintf(err, errlen, "%s %s: HTTP %d", method, path, status);
        }
        if (!retry || attempt == kc->attempts) {
            if (status >= 0 && body)
                *body = gs_curl_buf_take(&b);
            gs_curl_buf_free(&b);
            if (retry)
                kube_log(KUBE_LOG_ERROR, "kube: %s (gave up after %d attempts)", err, attempt);
            return status;
        }
        gs_curl_buf_free(&b);
        kube_log(KUBE_LOG_WARN, "kube: %s; retry %d/%d in %ld ms", err, attempt, kc->attempts - 1, backoff);
        sleep_ms(backoff);
        backoff = backoff * 2 > 5000 ? 5000 : backoff * 2;
    }
    return status;
}

int kube_get_json(struct kube_client *kc, const char *path, json_t **out, char *err, size_t errlen)
{
    char *body = NULL;
    *out = NULL;
    int st = kube_request(kc, "GET", path, NULL, NULL, &body, err, errlen);
    if (st >= 200 && st < 300) {
        json_error_t je;
        char s[GS_ESCAPE_BUF];
        *out = json_loads(body, 0, &je);
        if (!*out) {
            snprintf(err, errlen, "GET %s: body is not JSON: %s (line %d)", path, gs_escape_shown(s, je.text), je.line);
            st = -2;
        }
    } else if (st >= 0) {
        char s[GS_ESCAPE_BUF];
        snprintf(err, errlen, "GET %s: HTTP %d: %s", path, st, gs_escape_shown(s, body));
    }
    free(body);
    return st;
}

int kube_merge_patch(struct kube_client *kc, const char *path, json_t *patch, json_t **out, char *err, size_t errlen)
{
    char *data = json_dumps(patch, JSON_COMPACT);
    char *body = NULL;
    if (out)
        *out = NULL;
    if (!data) {
        snprintf(err, errlen, "PATCH %s: cannot encode the patch", path);
        return -1;
    }
    int st = kube_request(kc, "PATCH", path, "application/merge-patch+json", data, &body, err, errlen);
    free(data);
    if (st >= 200 && st < 300) {
        if (out) {
            json_error_t je;
            char s[GS_ESCAPE_BUF];
            *out = json_loads(body, 0, &je);
            if (!*out) {
                snprintf(err, errlen, "PATCH %s: answer is not JSON: %s", path, gs_escape_shown(s, je.text));
                st = -2;
            }
        }
    } else if (st >= 0) {
        char s[GS_ESCAPE_BUF];
        snprintf(err, errlen, "PATCH %s: HTTP %d: %s", path, st, gs_escape_shown(s, body));
    }
    free(body);
    return st;
}

/* ---- watch ---- */
struct watch_ctx {
    struct gs_curl_buf line;
    kube_watch_cb cb;
    void *ud;
    volatile int *stop;
    int cb_rc;
    int bad_lines;
};

static int watch_line(struct watch_ctx *w, const char *s, size_t n)
{
    json_error_t je;
    json_t *ev = json_loadb(s, n, 0, &je);
    if (!ev) {
        char shown[GS_ESCAPE_BUF];
        if (w->bad_lines++ < 3)
            kube_log(KUBE_LOG_WARN, "kube: watch: skipping an event that is not JSON: %s",
                     gs_escape_shown(shown, je.text));
        return 0;
    }
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    int rc = 0;
    if (!type || !json_is_object(obj))
        kube_log(KUBE_LOG_WARN, "kube: watch: skipping an event without type/object");
    else
        rc = w->cb(type, obj, w->ud);
    json_decref(ev);
    return rc;
}

static size_t on_watch(char *p, size_t size, size_t n, void *ud)
{
    struct watch_ctx *w = ud;
    size_t total = size * n;
    if (gs_curl_buf_add(&w->line, p, total) != 0)
        return 0;
    char *start = w->line.data;
    char *nl;
    while ((nl = memchr(start, '\n', w->line.len - (size_t)(start - w->line.data))) != NULL) {
        if (nl > start) {
            int rc = watch_line(w, start, (size_t)(nl - start));
            if (rc) {
                w->cb_rc = rc;
                return 0;
            }
        }
        start = nl + 1;
    }
    size_t rest = w->line.len - (size_t)(start - w->line.data);
    memmove(w->line.data, start, rest);
    w->line.len = rest;
    w->line.data[rest] = '\0';
    return total;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    const struct watch_ctx *w = ud;
    return (w->stop && *w->stop) ? 1 : 0;
}

int kube_watch(struct kube_client *kc, const char *path, kube_watch_cb cb, void *ud, volatile int *stop, char *err,
               size_t errlen)
{
    struct curl_slist *hdrs = NULL;
    char why[300];
    CURL *c = make_handle(kc, "GET", path, &hdrs, NULL, why, sizeof why);
    if (!c) {
        curl_slist_free_all(hdrs);
        snprintf(err, errlen, "watch %s: %s", path, why);
        return -1;
    }
    struct watch_ctx w = { .cb = cb, .ud = ud, .stop = stop };
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_watch);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &w);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &w);
    /* A silent stream is normal; a dead connection is found by keepalive. */
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    gs_curl_buf_free(&w.line);
    if (w.cb_rc)
        return w.cb_rc;
    if (stop && *stop)
        return 0;
    if (rc != CURLE_OK) {
        snprintf(err, errlen, "watch %s: %s", path, curl_easy_strerror(rc));
        return -1;
    }
    if (code != 200) {
        snprintf(err, errlen, "watch %s: HTTP %ld", path, code);
        return (int)code;
    }
    return 0;
}

char *kube_urlencode(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1);
    if (!out)
        return NULL;
    char *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
            *p == '_' || *p == '.' || *p == '~') {
            *o++ = (char)*p;
        } else {
            snprintf(o, 4, "%%%02X", *p);
            o += 3;
        }
    }
    *o = '\0';
    return out;
}
