/*
 * A small gRPC server and client on gRPC's C core, for the device-plugin
 * API: unary calls and one server-streaming method. Each call runs on its
 * own thread with its own completion queue, so a slow Allocate never holds
 * up ListAndWatch or another Allocate.
 */
#ifndef GPUSLICE_DP_GRPC_SERVER_H
#define GPUSLICE_DP_GRPC_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct gs_rpc_server;

struct gs_rpc_handlers {
    void *ud;
    /* Unary call: decode in, answer with *out (malloc'd) or fail. Returns a
     * gRPC status code (0 = OK); on failure msg says why. */
    int (*unary)(void *ud, const char *method, const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen,
                 char *msg, size_t msglen);
    /* The streaming method's name, its current generation (a new message is
     * sent whenever it changes) and the message for it. */
    const char *stream_method;
    unsigned (*stream_generation)(void *ud);
    int (*stream_message)(void *ud, uint8_t **out, size_t *outlen);
};

/* Listens on the unix socket path (removed first if it exists). */
struct gs_rpc_server *gs_rpc_server_start(const char *socket_path, const struct gs_rpc_handlers *h, char *err,
                                          size_t errlen);
/* Cancels every call, waits for the call threads and frees the server. */
void gs_rpc_server_stop(struct gs_rpc_server *s);
/* Number of open streams (for tests and logs). */
int gs_rpc_server_streams(struct gs_rpc_server *s);

/* One unary client call on a unix socket. Returns the gRPC status (0 OK),
 * or -1 when the call could not be made; *out gets the answer. */
int gs_rpc_call(const char *socket_path, const char *method, const uint8_t *in, size_t inlen, uint8_t **out,
                size_t *outlen, int timeout_ms, char *err, size_t errlen);

void gs_rpc_global_init(void);

#endif
