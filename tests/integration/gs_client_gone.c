/*
 * gs_client's gone command: a stream or context destroyed while another
 * thread's launches may still be tracked by the compute limiter.
 *
 *   gone WHAT N   a worker thread launches the current function N times on
 *                 a new stream, not waiting for them; then the main thread destroys WHAT: "stream"
 *                 that stream, "ctx" the context it ran in (one cuCtxCreate
 *                 made), "release" or "reset" device 0's primary context
 *                 (released from the one retain "init" made, or reset;
 *                 retained again after); then the worker launches N times
 *                 on the primary context's default stream and waits for it.
 *                 "exit": the worker launches N times in a context of
 *                 cuCtxCreate's and exits without waiting, and the main
 *                 thread destroys that context 20 ms later, while the
 *                 worker's exit may still end its windows.
 *                 rc: the first failure.
 */
#include "gs_client_contexts.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct gone_api {
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*release)(CUdevice);
    CUresult (*reset)(CUdevice);
    CUresult (*create)(CUcontext *, CUctxCreateParams *, unsigned int, CUdevice); /* CUDA 13's: _v4 */
    CUresult (*destroy)(CUcontext);
    CUresult (*set)(CUcontext);
    CUresult (*stream_create)(CUstream *, unsigned int);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*sync)(CUstream);
    gs_launch_fn launch;
};

/* The worker's two halves, one step apart: step 0 launch, 1 gone, 2 done. */
struct gone {
    const struct gone_api *api;
    CUcontext first, then;
    unsigned n;
    int exits; /* "exit": the worker ends after its first launches */
    CUstream s;
    int step;
    CUresult rc;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

static void to_step(struct gone *g, int step)
{
    pthread_mutex_lock(&g->lock);
    g->step = step;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

static void wait_step(struct gone *g, int step)
{
    pthread_mutex_lock(&g->lock);
    while (g->step < step)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static void *worker(void *arg)
{
    struct gone *g = arg;
    const struct gone_api *a = g->api;
    CUfunction f = gs_client_func();
    CUresult rc = a->set(g->first);
    if (!rc)
        rc = a->stream_create(&g->s, 0);
    for (unsigned i = 0; i < g->n && !rc; i++)
        rc = a->launch(f, 1, 1, 1, 32, 1, 1, 0, g->s, NULL, NULL);
    g->rc = rc;
    to_step(g, 1);
    if (g->exits)
        return NULL;
    wait_step(g, 2);
    /* the default stream: a new one could take the destroyed one's handle */
    rc = g->rc ? g->rc : a->set(g->then);
    for (unsigned i = 0; i < g->n && !rc; i++)
        rc = a->launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    if (!rc)
        rc = a->sync(NULL);
    g->rc = rc;
    return NULL;
}

/* Destroys what the worker launched on (g->s, or its context g->first). */
static CUresult destroy(const char *what, struct gone *g)
{
    const struct gone_api *a = g->api;
    if (!strcmp(what, "stream"))
        return a->stream_destroy(g->s);
    if (!strcmp(what, "ctx"))
        return a->destroy(g->first);
    if (!strcmp(what, "exit")) {
        usleep(20 * 1000);
        return a->destroy(g->first);
    }
    CUresult rc = !strcmp(what, "release") ? a->release(0) : a->reset(0);
    return rc ? rc : a->retain(&g->then, 0);
}

static CUresult gone(const char *what, unsigned n, gs_entry_fn entry)
{
    struct gone_api a = {
        .retain = (CUresult(*)(CUcontext *, CUdevice))entry("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 0),
        .release = (CUresult(*)(CUdevice))entry("cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 0),
        .reset = (CUresult(*)(CUdevice))entry("cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", 0),
        .create = (CUresult(*)(CUcontext *, CUctxCreateParams *, unsigned int, CUdevice))entry("cuCtxCreate",
                                                                                               "cuCtxCreate_v4", 0),
        .destroy = (CUresult(*)(CUcontext))entry("cuCtxDestroy", "cuCtxDestroy_v2", 0),
        .set = (CUresult(*)(CUcontext))entry("cuCtxSetCurrent", "cuCtxSetCurrent", 0),
        .stream_create = (CUresult(*)(CUstream *, unsigned int))entry("cuStreamCreate", "cuStreamCreate", 0),
        .stream_destroy = (CUresult(*)(CUstream))entry("cuStreamDestroy", "cuStreamDestroy_v2", 0),
        .sync = (CUresult(*)(CUstream))entry("cuStreamSynchronize", "cuStreamSynchronize", 0),
        .launch = (gs_launch_fn)entry("cuLaunchKernel", "cuLaunchKernel", 0),
    };
    if (!a.retain || !a.release || !a.reset || !a.create || !a.destroy || !a.set || !a.stream_create ||
        !a.stream_destroy || !a.sync || !a.launch || !gs_client_func())
        return CUDA_ERROR_NOT_FOUND;
    struct gone g = { .api = &a, .n = n, .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
    CUresult rc = a.retain(&g.first, 0); /* "init"'s retain stays the only one: released below */
    if (!rc)
        rc = a.release(0);
    g.then = g.first;
    g.exits = !strcmp(what, "exit");
    if (!rc && (!strcmp(what, "ctx") || g.exits))
        rc = a.create(&g.first, NULL, 0, 0);
    pthread_t t;
    if (rc || pthread_create(&t, NULL, worker, &g) != 0)
        return rc ? rc : CUDA_ERROR_OUT_OF_MEMORY;
    wait_step(&g, 1);
    rc = g.rc ? g.rc : destroy(what, &g);
    if (rc)
        g.rc = rc;
    to_step(&g, 2);
    pthread_join(t, NULL);
    return g.rc;
}

int gs_client_gone(int argc, char **argv, CUresult *rc, gs_entry_fn entry)
{
    if (strcmp(argv[0], "gone") || argc < 3)
        return 0;
    *rc = gone(argv[1], (unsigned)strtoul(argv[2], NULL, 0), entry);
    return 1;
}
