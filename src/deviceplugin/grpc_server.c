/* gRPC C-core plumbing for the device plugin (see grpc_server.h). */
#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grpc_server.h"
#include "kube_client.h"

struct gs_rpc_server {
    grpc_server *server;
    grpc_completion_queue *notify;
    struct gs_rpc_handlers h;
    pthread_t acceptor;
    pthread_mutex_t lock;
    pthread_cond_t idle;
    int active_calls;
    int streams;
    volatile int stopping;
    int tag_shutdown;
    int shutdown_seen;
    char path[256];
};

struct rpc_call {
    struct gs_rpc_server *s;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
    grpc_completion_queue *cq;
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void init_once(void)
{
    grpc_init();
}
void gs_rpc_global_init(void)
{
    pthread_once(&g_once, init_once);
}

static gpr_timespec in_ms(long ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

static grpc_byte_buffer *to_bb(const uint8_t *p, size_t n)
{
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)p, n);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

/* Copies a byte buffer out (malloc'd; a 1-byte allocation for empty). */
static uint8_t *from_bb(grpc_byte_buffer *bb, size_t *n)
{
    grpc_byte_buffer_reader r;
    *n = 0;
    if (!bb || !grpc_byte_buffer_reader_init(&r, bb))
        return NULL;
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    *n = GRPC_SLICE_LENGTH(s);
    uint8_t *out = malloc(*n ? *n : 1);
    if (out && *n)
        memcpy(out, GRPC_SLICE_START_PTR(s), *n);
    grpc_slice_unref(s);
    return out;
}

/* Waits on a call's own queue for tag. Returns the event's success. */
static int wait_tag(grpc_completion_queue *cq, void *tag)
{
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            return 0;
        if (ev.type == GRPC_OP_COMPLETE && ev.tag == tag)
            return ev.success;
    }
}

static void op_init(grpc_op *op, grpc_op_type t)
{
    memset(op, 0, sizeof *op);
    op->op = t;
}

static void finish_call(struct rpc_call *c)
{
    struct gs_rpc_server *s = c->s;
    grpc_call_unref(c->call);
    grpc_completion_queue_shutdown(c->cq);
    while (grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(c->cq);
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->md);
    free(c);
    pthread_mutex_lock(&s->lock);
    if (--s->active_calls == 0)
        pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
}

static void send_status(struct rpc_call *c, int code, const char *msg, grpc_byte_buffer *reply)
{
    grpc_op ops[3];
    int n = 0;
    int cancelled = 0;
    grpc_slice details = grpc_slice_from_copied_string(msg ? msg : "");
    if (reply) {
        op_init(&ops[n], GRPC_OP_SEND_MESSAGE);
        ops[n++].data.send_message.send_message = reply;
    }
    op_init(&ops[n], GRPC_OP_SEND_STATUS_FROM_SERVER);
    ops[n].data.send_status_from_server.status = (grpc_status_code)code;
    ops[n++].data.send_status_from_server.status_details = &details;
    op_init(&ops[n], GRPC_OP_RECV_CLOSE_ON_SERVER);
    ops[n++].data.recv_close_on_server.cancelled = &cancelled;
    static int tag_end;
    if (grpc_call_start_batch(c->call, ops, (size_t)n, &tag_end, NULL) == GRPC_CALL_OK)
        wait_tag(c->cq, &tag_end);
    grpc_slice_unref(details);
}

static void run_stream(struct rpc_call *c)
{
    struct gs_rpc_server *s = c->s;
    static int tag_close, tag_send;
    int cancelled = 0, closed = 0, in_flight = 0;
    grpc_byte_buffer *bb = NULL;
    grpc_op op;
    op_init(&op, GRPC_OP_RECV_CLOSE_ON_SERVER);
    op.data.recv_close_on_server.cancelled = &cancelled;
    if (grpc_call_start_batch(c->call, &op, 1, &tag_close, NULL) != GRPC_CALL_OK)
        return;
    pthread_mutex_lock(&s->lock);
    s->streams++;
    pthread_mutex_unlock(&s->lock);
    unsigned sent_gen = 0;
    int first = 1;
    while (!closed) {
        if (!in_flight && !s->stopping) {
            unsigned gen = s->h.stream_generation(s->h.ud);
            if (first || gen != sent_gen) {
                uint8_t *msg = NULL;
                size_t len = 0;
                if (s->h.stream_message(s->h.ud, &msg, &len) == 0) {
                    bb = to_bb(msg, len);
                    free(msg);
                    op_init(&op, GRPC_OP_SEND_MESSAGE);
                    op.data.send_message.send_message = bb;
                    if (grpc_call_start_batch(c->call, &op, 1, &tag_send, NULL) == GRPC_CALL_OK) {
                        in_flight = 1;
                        sent_gen = gen;
                        first = 0;
                    } else {
                        grpc_byte_buffer_destroy(bb);
                        bb = NULL;
                    }
                }
            }
        }
        grpc_event ev = grpc_completion_queue_next(c->cq, in_ms(100), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        if (ev.tag == &tag_close) {
            closed = 1;
        } else if (ev.tag == &tag_send) {
            in_flight = 0;
            grpc_byte_buffer_destroy(bb);
            bb = NULL;
            if (!ev.success)
                break;
        }
    }
    while (in_flight || !closed) { /* let the outstanding ops finish */
        grpc_event ev = grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.tag == &tag_send) {
            in_flight = 0;
            grpc_byte_buffer_destroy(bb);
            bb = NULL;
        } else if (ev.tag == &tag_close) {
            closed = 1;
        }
        if (!closed && !in_flight)
            grpc_call_cancel(c->call, NULL);
    }
    pthread_mutex_lock(&s->lock);
    s->streams--;
    pthread_mutex_unlock(&s->lock);
}

static void *call_main(void *arg)
{
    struct rpc_call *c = arg;
    struct gs_rpc_server *s = c->s;
    char method[128];
    size_t ml = GRPC_SLICE_LENGTH(c->details.method);
    if (ml >= sizeof method)
        ml = sizeof method - 1;
    memcpy(method, GRPC_SLICE_START_PTR(c->details.method), ml);
    method[ml] = '\0';

    grpc_op ops[2];
    grpc_byte_buffer *req = NULL;
    static int tag_start;
    op_init(&ops[0], GRPC_OP_SEND_INITIAL_METADATA);
    op_init(&ops[1], GRPC_OP_RECV_MESSAGE);
    ops[1].data.recv_message.recv_message = &req;
    if (grpc_call_start_batch(c->call, ops, 2, &tag_start, NULL) != GRPC_CALL_OK || !wait_tag(c->cq, &tag_start)) {
        grpc_byte_buffer_destroy(req);
        finish_call(c);
        return NULL;
    }
    size_t inlen = 0;
    uint8_t *in = from_bb(req, &inlen);
    grpc_byte_buffer_destroy(req);
    if (!in) {
        send_status(c, GRPC_STATUS_INVALID_ARGUMENT, "no request message", NULL);
    } else if (s->h.stream_method && strcmp(method, s->h.stream_method) == 0) {
        run_stream(c);
    } else {
        uint8_t *out = NULL;
        size_t outlen = 0;
        char msg[1024] = "";
        int code = s->h.unary(s->h.ud, method, in, inlen, &out, &outlen, msg, sizeof msg);
        if (code == 0) {
            grpc_byte_buffer *bb = to_bb(out, outlen);
            send_status(c, 0, "", bb);
            grpc_byte_buffer_destroy(bb);
        } else {
            kube_log(KUBE_LOG_WARN, "%s: %s", method, msg);
            send_status(c, code, msg, NULL);
        }
        free(out);
    }
    free(in);
    finish_call(c);
    return NULL;
}

static void *acceptor_main(void *arg)
{
    struct gs_rpc_server *s = arg;
    for (;;) {
        struct rpc_call *c = calloc(1, sizeof *c);
        if (!c)
            break;
        c->s = s;
        grpc_call_details_init(&c->details);
        grpc_metadata_array_init(&c->md);
        c->cq = grpc_completion_queue_create_for_next(NULL);
        grpc_call_error e = grpc_server_request_call(s->server, &c->call, &c->details, &c->md, c->cq, s->notify, c);
        grpc_event ev = { 0 };
        while (e == GRPC_CALL_OK) {
            ev = grpc_completion_queue_next(s->notify, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
            if (ev.type == GRPC_OP_COMPLETE && ev.tag == &s->tag_shutdown) {
                s->shutdown_seen = 1;
                continue;
            }
            break;
        }
        if (e != GRPC_CALL_OK || ev.type != GRPC_OP_COMPLETE || !ev.success || ev.tag != c) {
            grpc_completion_queue_shutdown(c->cq);
            while (grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
                   GRPC_QUEUE_SHUTDOWN) {
            }
            grpc_completion_queue_destroy(c->cq);
            grpc_call_details_destroy(&c->details);
            grpc_metadata_array_destroy(&c->md);
            free(c);
            break; /* the server is shutting down */
        }
        pthread_mutex_lock(&s->lock);
        s->active_calls++;
        pthread_mutex_unlock(&s->lock);
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, call_main, c) != 0) {
            grpc_call_cancel(c->call, NULL);
            finish_call(c);
        }
        pthread_attr_destroy(&a);
    }
    return NULL;
}

struct gs_rpc_server *gs_rpc_server_start(const char *socket_path, const struct gs_rpc_handlers *h, char *err,
                                          size_t errlen)
{
    gs_rpc_global_init();
    struct gs_rpc_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->h = *h;
    snprintf(s->path, sizeof s->path, "%s", socket_path);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->idle, NULL);
    unlink(socket_path);
    s->server = grpc_server_create(NULL, NULL);
    s->notify = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(s->server, s->notify, NULL);
    char addr[300];
    snprintf(addr, sizeof addr, "unix:%s", socket_path);
    grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(s->server, addr, cr);
    grpc_server_credentials_release(cr);
    if (port == 0) {
        snprintf(err, errlen, "cannot listen on %s", socket_path);
        grpc_server_destroy(s->server);
        grpc_completion_queue_shutdown(s->notify);
        while (grpc_completion_queue_next(s->notify, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN) {
        }
        grpc_completion_queue_destroy(s->notify);
        free(s);
        return NULL;
    }
    grpc_server_start(s->server);
    if (pthread_create(&s->acceptor, NULL, acceptor_main, s) != 0) {
        snprintf(err, errlen, "cannot start a thread");
        s->acceptor = 0;
        gs_rpc_server_stop(s);
        return NULL;
    }
    return s;
}

void gs_rpc_server_stop(struct gs_rpc_server *s)
{
    if (!s)
        return;
    s->stopping = 1;
    grpc_server_shutdown_and_notify(s->server, s->notify, &s->tag_shutdown);
    grpc_server_cancel_all_calls(s->server);
    if (s->acceptor)
        pthread_join(s->acceptor, NULL);
    /* The acceptor stopped at the first failed request; wait for the
     * shutdown tag on the notification queue. */
    while (!s->shutdown_seen) {
        grpc_event ev = grpc_completion_queue_next(s->notify, in_ms(5000), NULL);
        if (ev.type != GRPC_OP_COMPLETE || ev.tag == &s->tag_shutdown)
            break;
    }
    pthread_mutex_lock(&s->lock);
    while (s->active_calls > 0)
        pthread_cond_wait(&s->idle, &s->lock);
    pthread_mutex_unlock(&s->lock);
    grpc_server_destroy(s->server);
    grpc_completion_queue_shutdown(s->notify);
    while (grpc_completion_queue_next(s->notify, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(s->notify);
    unlink(s->path);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->idle);
    free(s);
}

int gs_rpc_server_streams(struct gs_rpc_server *s)
{
    pthread_mutex_lock(&s->lock);
    int n = s->streams;
    pthread_mutex_unlock(&s->lock);
    return n;
}

int gs_rpc_call(const char *socket_path, const char *method, const uint8_t *in, size_t inlen, uint8_t **out,
                size_t *outlen, int timeout_ms, char *err, size_t errlen)
{
    gs_rpc_global_init();
    char addr[300];
    snprintf(addr, sizeof addr, "unix:%s", socket_path);
    grpc_channel_credentials *cr = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(addr, cr, NULL);
    grpc_channel_credentials_release(cr);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_slice m = grpc_slice_from_copied_string(method);
    grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL, in_ms(timeout_ms), NULL);
    grpc_slice_unref(m);
    grpc_byte_buffer *req = to_bb(in, inlen), *resp = NULL;
    grpc_metadata_array initial, trailing;
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6];
    op_init(&ops[0], GRPC_OP_SEND_INITIAL_METADATA);
    op_init(&ops[1], GRPC_OP_SEND_MESSAGE);
    ops[1].data.send_message.send_message = req;
    op_init(&ops[2], GRPC_OP_SEND_CLOSE_FROM_CLIENT);
    op_init(&ops[3], GRPC_OP_RECV_INITIAL_METADATA);
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
    op_init(&ops[4], GRPC_OP_RECV_MESSAGE);
    ops[4].data.recv_message.recv_message = &resp;
    op_init(&ops[5], GRPC_OP_RECV_STATUS_ON_CLIENT);
    ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
    ops[5].data.recv_status_on_client.status = &status;
    ops[5].data.recv_status_on_client.status_details = &details;
    static int tag;
    int rc = -1;
    if (grpc_call_start_batch(call, ops, 6, &tag, NULL) == GRPC_CALL_OK && wait_tag(cq, &tag)) {
        rc = (int)status;
        if (status == GRPC_STATUS_OK && out) {
            *out = from_bb(resp, outlen);
        } else if (status != GRPC_STATUS_OK) {
            snprintf(err, errlen, "%s on %s: status %d: %.*s", method, socket_path, (int)status,
                     (int)GRPC_SLICE_LENGTH(details), (const char *)GRPC_SLICE_START_PTR(details));
        }
    } else {
        snprintf(err, errlen, "%s on %s: call failed", method, socket_path);
    }
    grpc_byte_buffer_destroy(req);
    grpc_byte_buffer_destroy(resp);
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    grpc_call_unref(call);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
    grpc_channel_destroy(ch);
    return rc;
}
