/* libmicrohttpd glue: thread pool, bounded bodies and connections, optional
 * TLS 1.2+ and mutual TLS (GnuTLS, libmicrohttpd's TLS library). */
#include "httpd.h"

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

struct gs_httpd {
    struct MHD_Daemon *d;
    gs_httpd_handler h;
    void *ud;
    char *cert, *key, *ca;
    int port;
    size_t buffered; /* bytes held by all bodies being received */
};

struct body {
    struct gs_httpd *owner;
    char *buf;
    size_t len, cap;
    size_t charged; /* bytes of owner->buffered that are ours */
    int too_big, no_room;
};

static int take_budget(struct gs_httpd *s, size_t n)
{
    size_t cur = __atomic_load_n(&s->buffered, __ATOMIC_RELAXED);
    do {
        if (cur + n > GS_HTTPD_MAX_BUFFERED)
            return 0;
    } while (!__atomic_compare_exchange_n(&s->buffered, &cur, cur + n, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return 1;
}

static void give_budget(struct gs_httpd *s, size_t n)
{
    __atomic_sub_fetch(&s->buffered, n, __ATOMIC_RELAXED);
}

static char *slurp(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s", path);
        return NULL;
    }
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (!buf || n == 0) {
        free(buf);
        snprintf(err, errlen, "cannot read %s", path);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

static enum MHD_Result reply(struct MHD_Connection *c, int status, char *text, const char *ctype)
{
    size_t n = text ? strlen(text) : 0;
    struct MHD_Response *r = MHD_create_response_from_buffer(n, text ? text : (char *)"",
                                                             text ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype ? ctype : "application/json");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

/* A connection's client certificate verdict, taken once per connection. */
enum { PEER_UNCHECKED, PEER_OK, PEER_REFUSED };

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    (void)cls;
    (void)c;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = calloc(1, sizeof(int));
    } else {
        free(*socket_context);
        *socket_context = NULL;
    }
}

/* Whether the client presented a certificate that verifies against the
 * client CA (chain, validity, purpose clientAuth). */
static int peer_ok(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *sc = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    int *verdict = sc ? sc->socket_context : NULL;
    if (verdict && *verdict != PEER_UNCHECKED)
        return *verdict == PEER_OK;
    const union MHD_ConnectionInfo *ti = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    gnutls_session_t tls = ti ? (gnutls_session_t)ti->tls_session : NULL;
    gnutls_typed_vdata_st purpose = { GNUTLS_DT_KEY_PURPOSE_OID, (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0 };
    unsigned status = 0;
    int ok = tls && gnutls_certificate_verify_peers(tls, &purpose, 1, &status) == 0 && status == 0;
    if (verdict)
        *verdict = ok ? PEER_OK : PEER_REFUSED;
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **con_cls)
{
    struct gs_httpd *s = cls;
    struct body *b = *con_cls;
    if (!b) {
        if (s->ca && !peer_ok(c))
            return reply(c, 403,
                         strdup("{\"Error\":\"a client certificate issued by the client CA "
                                "(--client-ca) is required\"}"),
                         NULL);
        /* Refuse an oversized body from its declared length, before any of
         * it is read. */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > GS_HTTPD_MAX_BODY)
            return reply(c, 413, strdup("{\"Error\":\"request body larger than 4 MiB\"}"), NULL);
        if (!(b = calloc(1, sizeof *b)))
            return MHD_NO;
        b->owner = s;
        *con_cls = b;
        return MHD_YES;
    }
    if (*data_size) {
        if (!b->too_big) {
            if (b->len + *data_size > GS_HTTPD_MAX_BODY) {
                b->too_big = 1;
            } else if (!take_budget(s, *data_size)) {
                b->no_room = 1;
                b->too_big = 1;
            } else {
                if (b->len + *data_size + 1 > b->cap) {
                    size_t cap = (b->len + *data_size + 1) * 2;
                    char *nb = realloc(b->buf, cap);
                    if (!nb) {
                        give_budget(s, *data_size);
                        return MHD_NO;
                    }
                    b->buf = nb;
                    b->cap = cap;
                }
                memcpy(b->buf + b->len, data, *data_size);
                b->len += *data_size;
                b->charged += *data_size;
                b->buf[b->len] = '\0';
            }
        }
        *data_size = 0;
        return MHD_YES;
    }
    if (b->no_room)
        return reply(c, 503, strdup("{\"Error\":\"too many large requests at once; retry\"}"), NULL);
    if (b->too_big)
        return reply(c, 413, strdup("{\"Error\":\"request body larger than 4 MiB\"}"), NULL);
    char *out = NULL;
    const char *ctype = NULL;
    int st = s->h(s->ud, method, url, b->buf ? b->buf : "", b->len, &out, &ctype);
    return reply(c, st, out, ctype);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    struct body *b = *con_cls;
    if (b) {
        give_budget(b->owner, b->charged);
        free(b->buf);
        free(b);
    }
    *con_cls = NULL;
}

struct gs_httpd *gs_httpd_start(const char *addr, int port, const char *cert, const char *key, int threads,
                                gs_httpd_handler h, void *ud, char *err, size_t errlen)
{
    const struct gs_httpd_tls tls = { cert, key, NULL };
    return gs_httpd_start_tls(addr, port, &tls, threads, h, ud, err, errlen);
}

struct gs_httpd *gs_httpd_start_tls(const char *addr, int port, const struct gs_httpd_tls *t, int threads,
                                    gs_httpd_handler h, void *ud, char *err, size_t errlen)
{
    const struct gs_httpd_opts o = { *t, threads, 0, 0 };
    return gs_httpd_start_opts(addr, port, &o, h, ud, err, errlen);
}

struct gs_httpd *gs_httpd_start_opts(const char *addr, int port, const struct gs_httpd_opts *o, gs_httpd_handler h,
                                     void *ud, char *err, size_t errlen)
{
    const struct gs_httpd_tls *t = &o->tls;
    const char *cert = t->cert, *key = t->key;
    const unsigned max_conn = o->max_connections ? o->max_connections : GS_HTTPD_MAX_CONNECTIONS;
    const unsigned per_client = o->max_per_client ? o->max_per_client : GS_HTTPD_MAX_PER_CLIENT;
    const int threads = o->threads;
    if (per_client > max_conn) {
        snprintf(err, errlen, "%u connections per client is more than the %u connections in all", per_client, max_conn);
        return NULL;
    }
    struct gs_httpd *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->h = h;
    s->ud = ud;
    /* Room for GS_HTTPD_MAX_CONNECTIONS: a soft descriptor limit of 1024
     * would let ~1,000 slow clients lock everyone else out. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (cert || key) {
        if (!cert || !key || !(s->cert = slurp(cert, err, errlen)) || !(s->key = slurp(key, err, errlen))) {
            if (!cert || !key)
                snprintf(err, errlen, "TLS needs both a certificate and a key");
            gs_httpd_stop(s);
            return NULL;
        }
        flags |= MHD_USE_TLS;
    }
    if (t->client_ca && (!s->cert || !(s->ca = slurp(t->client_ca, err, errlen)))) {
        if (!s->cert)
            snprintf(err, errlen, "a client CA needs TLS (a certificate and a key)");
        gs_httpd_stop(s);
        return NULL;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (addr && inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "bad listen address %s (IPv4 expected)", addr);
        gs_httpd_stop(s);
        return NULL;
    }
    if (!addr)
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
    /* The array ends at its first MHD_OPTION_END: plain HTTP has none of
     * these, and the client CA, optional, comes last. */
    struct MHD_OptionItem tls[] = { { s->cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, s->cert },
                                    { MHD_OPTION_HTTPS_MEM_KEY, 0, s->key },
                                    /* TLS 1.2 and 1.3 only. */
                                    { MHD_OPTION_HTTPS_PRIORITIES, 0,
                                      (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2" },
                                    /* With a trust list, libmicrohttpd asks each client for a
         * certificate; peer_ok decides. */
                                    { s->ca ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0, s->ca },
                                    { MHD_OPTION_END, 0, NULL } };
    s->d = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(threads > 0 ? threads : 1), MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)GS_HTTPD_IDLE_SECONDS, MHD_OPTION_CONNECTION_LIMIT, max_conn, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        per_client, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024), MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s:%d%s", addr ? addr : "0.0.0.0", port, s->cert ? " (TLS)" : "");
        gs_httpd_stop(s);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : port;
    return s;
}

int gs_httpd_port(const struct gs_httpd *s)
{
    return s->port;
}

void gs_httpd_stop(struct gs_httpd *s)
{
    if (!s)
        return;
    if (s->d)
        MHD_stop_daemon(s->d);
    free(s->cert);
    free(s->key);
    free(s->ca);
    free(s);
}
