/* The device plugin: kubelet-facing handlers and the Allocate matching. */
#ifndef GPUSLICE_DP_PLUGIN_H
#define GPUSLICE_DP_PLUGIN_H

#include <pthread.h>

#include "assign_sig.h"
#include "inventory.h"
#include "placement.h"
#include "podcache.h"

struct gs_plugin {
    struct gs_inventory *inv;
    struct gs_podcache *pods; /* NULL: no API server (Allocate fails closed) */
    struct kube_client *kc;
    char node[256];
    char resource[128];
    int replicas;                    /* per GPU */
    char lib_host[512];              /* libgpuslice.so on the host */
    char lib_container[512];         /* ... and where the container sees it */
    char preload_host[512];          /* file mounted as /etc/ld.so.preload */
    char state_root[512];            /* per-allocation state dirs on the host */
    char podres_socket[512];         /* kubelet's pod-resources API (PreStartContainer) */
    int cdi;                         /* answer with CDI device names */
    char power_exp[8];               /* GPUSLICE_POWER_EXPONENT to pin; "": the default */
    char share_yield_us[8];          /* GPUSLICE_SHARE_YIELD_US to pin; "": the default */
    const struct gs_sig_key *sigkey; /* NULL: assignments are not signed */
    int test_allocate_delay_ms;      /* test hook: sleep inside Allocate */
    pthread_mutex_t lock;
};

/* A snapshot of what the decisions need to know about this node. */
void gs_plugin_view(struct gs_plugin *p, struct gs_node_view *v);

/* gs_rpc_handlers callbacks (ud = struct gs_plugin *). */
int gs_plugin_unary(void *ud, const char *method, const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen,
                    char *msg, size_t msglen);
unsigned gs_plugin_generation(void *ud);
int gs_plugin_list(void *ud, uint8_t **out, size_t *outlen);

#endif
