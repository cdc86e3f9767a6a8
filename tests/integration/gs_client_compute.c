/*
 * gs_client's compute commands (see gs_client.c for the protocol):
 *   kernel US [nccl]     current function = one that runs US microseconds per launch
 *                        (the simulated driver's "sleep_us:US"; nccl: its
 *                        "ncclKernel_sleep_us:US", named as NCCL's kernels are);
 *                        reports the function's handle (func=0x...)
 *   libkernel US [nccl]  the same from a library (cuLibraryLoadData, cuLibraryGetKernel:
 *                        the kernel, cast, is the current function)
 *   unload [thread]      unload the library (cuLibraryUnload) or else the module
 *                        (cuModuleUnload), from a thread of its own with `thread`:
 *                        the next `kernel` loads another, whose function may get
 *                        the old one's handle
 *   kernels N US         N functions of their own ("sleep_us:US:kI"), each launched
 *                        once, then a synchronisation (after `kernel`, which loads
 *                        the module): a program of many kernels
 *   graph N              current graph = N launches of the current function
 *                        (gpusliceSimGraphCreate: the sim has no graph-building API)
 *   run PATH SECS [WARM] [DEPTH]
 *                        launch through PATH (kernel, kernelptsz, ex, exptsz, coop,
 *                        coopptsz, graph, graphptsz) for SECS seconds, DEPTH launches
 *                        between stream synchronisations (default 8); reports
 *                        launches and the wall time after the first WARM seconds
 *   threads N            N times, one after the other: a new thread launches the
 *                        current function once, waits for it and exits; reports
 *                        the wall time, the work's share of it, and whether the
 *                        program can still create an event (event_rc)
 *   park                 a new thread launches the current function once, waits for
 *                        it, then sits idle until the process exits, its window open
 *   idle SECS            sleep (a tenant that stops launching)
 *   hostwait SECS        a tenant whose queue waits for its host: cuStreamWaitValue32
 *                        on the stream for a flag, then launches of the current
 *                        function for SECS seconds, all queued behind the wait; only
 *                        then does it write the flag and synchronise. Reports the
 *                        launches and the wall time
 *   hostfunc SECS [VNAME]
 *                        the same with a host function (cuLaunchHostFunc) that waits
 *                        for the flag, as one waiting for the program's next step;
 *                        VNAME: the exported name a dlsym lookup takes
 *   hostfunc2 SECS [VNAME]
 *                        the same through the ABI with a sync mode
 *                        (cuLaunchHostFunc_v2; the sim's from CUDA 13.1)
 *   hostnode             instantiate a graph holding a host node (cuGraphAddNode),
 *                        which is never launched; reports its rc
 *   burst N THINK_US SECS
 *                        a light tenant: N launches of the current function, a
 *                        stream synchronisation, THINK_US of sleep, for SECS;
 *                        reports bursts and the mean and worst time from a
 *                        burst's first launch to its synchronisation's return
 *   capture N GAP_US [MODE] [BG]
 *                        capture N launches of the current function on a new
 *                        non-blocking stream (cuStreamBeginCapture_v2, MODE 0
 *                        global (default), 1 thread-local, 2 relaxed), GAP_US
 *                        apart; the captured graph becomes the current graph
 *                        (N launches). BG=1: meanwhile another thread launches
 *                        on a stream of its own, without synchronising.
 *                        Reports the first failing launch's result, EndCapture's,
 *                        and the background launches; rc is the first failure.
 *   tp US COLL_US RANKS STEPS [WARM] [GROUP] [GRAPH]
 *                        a tensor-parallel rank: STEPS times a kernel of US
 *                        microseconds, a collective of COLL_US of its own work
 *                        that waits for RANKS ranks (the simulated driver's
 *                        "ncclDevKernel_AllReduce_sim:COLL_US:RANKS:GROUP", group 0
 *                        by default) and a
 *                        stream synchronisation; reports the steps after the
 *                        first WARM, their wall time, the longest step and the
 *                        99th percentile step.
 *                        GRAPH=1: the kernel and the collective are captured
 *                        once into a CUDA graph on a stream of their own, and
 *                        each step launches the graph (a CUDA-graph decoder)
 */
#define _GNU_SOURCE
#include "gs_client_compute.h"
#include "gs_client_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

static CUfunction func;
static CUmodule module;
static CUlibrary library;
static CUgraphExec graph;
static unsigned long long func_us;
static unsigned graph_n;

typedef CUresult (*launch_ex_t)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*coop_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                           void **);
typedef CUresult (*graph_t)(CUgraphExec, CUstream);

static CUresult launch_once(const char *path, void *fn)
{
    if (!strcmp(path, "kernel") || !strcmp(path, "kernelptsz"))
        return ((gs_launch_fn)fn)(func, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    if (!strcmp(path, "ex") || !strcmp(path, "exptsz")) {
        CUlaunchConfig cfg = {
            .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32, .blockDimY = 1, .blockDimZ = 1
        };
        return ((launch_ex_t)fn)(&cfg, func, NULL, NULL);
    }
    if (!strcmp(path, "coop") || !strcmp(path, "coopptsz"))
        return ((coop_t)fn)(func, 1, 1, 1, 32, 1, 1, 0, NULL, NULL);
    return ((graph_t)fn)(graph, NULL);
}

struct bg {
    CUresult (*set_ctx)(CUcontext);
    CUcontext ctx;
    gs_launch_fn launch;
    CUstream s;
    volatile int stop;
    unsigned long long n;
    CUresult rc;
};

static void *bg_main(void *arg)
{
    struct bg *b = arg;
    b->rc = b->set_ctx(b->ctx);
    while (!b->stop && b->rc == CUDA_SUCCESS) {
        b->rc = b->launch(func, 1, 1, 1, 32, 1, 1, 0, b->s, NULL, NULL);
        b->n++;
    }
    return NULL;
}

int gs_capture_api_of(gs_entry_fn entry, struct gs_capture_api *api)
{
    api->stream_create = (CUresult(*)(CUstream *, unsigned))entry("cuStreamCreate", "cuStreamCreate", 0);
    api->begin = (CUresult(*)(CUstream, int))entry(NULL, "cuStreamBeginCapture_v2", 0);
    api->end = (CUresult(*)(CUstream, void **))entry(NULL, "cuStreamEndCapture", 0);
    api->instantiate =
        (CUresult(*)(CUgraphExec *, void *, unsigned long long))entry(NULL, "cuGraphInstantiateWithFlags", 0);
    api->launch = (gs_launch_fn)entry("cuLaunchKernel", "cuLaunchKernel", 0);
    return api->stream_create && api->begin && api->end && api->instantiate && api->launch ? 0 : -1;
}

int gs_module_api_of(gs_entry_fn entry, struct gs_module_api *api)
{
    api->load = (CUresult(*)(CUmodule *, const void *))entry("cuModuleLoadData", "cuModuleLoadData", 0);
    api->get =
        (CUresult(*)(CUfunction *, CUmodule, const char *))entry("cuModuleGetFunction", "cuModuleGetFunction", 0);
    api->launch = (gs_launch_fn)entry("cuLaunchKernel", "cuLaunchKernel", 0);
    api->sync = (CUresult(*)(CUstream))entry("cuStreamSynchronize", "cuStreamSynchronize", 0);
    return api->load && api->get && api->launch && api->sync ? 0 : -1;
}

static CUresult capture(gs_entry_fn entry, unsigned n, unsigned gap_us, int mode, int with_bg)
{
    struct gs_capture_api api;
    CUresult (*sync)(CUstream) = (CUresult(*)(CUstream))entry("cuStreamSynchronize", "cuStreamSynchronize", 0);
    CUstream s = NULL, bs = NULL;
    if (gs_capture_api_of(entry, &api) != 0 || !sync || !func)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = api.stream_create(&s, 1);
    if (!rc && with_bg)
        rc = api.stream_create(&bs, 1);
    if (rc)
        return rc;
    struct bg b = { .launch = api.launch, .s = bs };
    CUresult (*get_ctx)(CUcontext *) = (CUresult(*)(CUcontext *))entry(NULL, "cuCtxGetCurrent", 0);
    b.set_ctx = (CUresult(*)(CUcontext))entry(NULL, "cuCtxSetCurrent", 0);
    if (with_bg && (!get_ctx || !b.set_ctx || get_ctx(&b.ctx) != CUDA_SUCCESS))
        return CUDA_ERROR_NOT_FOUND;
    pthread_t th;
    int started = with_bg && pthread_create(&th, NULL, bg_main, &b) == 0;
    if (started)
        usleep(20000); /* the other thread is launching (and windows closing) when the capture begins */
    CUresult brc = api.begin(s, mode), lrc = CUDA_SUCCESS, erc = CUDA_ERROR_UNKNOWN;
    for (unsigned i = 0; i < n && !brc && !lrc; i++) {
        lrc = api.launch(func, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
        if (gap_us)
            usleep(gap_us);
    }
    void *g = NULL;
    if (!brc)
        erc = api.end(s, &g);
    if (started) {
        b.stop = 1;
        pthread_join(th, NULL);
    }
    printf("begin_rc=%d launch_rc=%d end_rc=%d bg_launches=%llu bg_rc=%d ", (int)brc, (int)lrc, (int)erc, b.n,
           (int)b.rc);
    rc = brc ? brc : lrc ? lrc : erc ? erc : b.rc;
    if (!rc && g) {
        rc = api.instantiate(&graph, g, 0);
        graph_n = n;
    }
    if (!rc && bs)
        rc = sync(bs);
    return rc;
}

/* One TP step (work, then coll) captured into an executable graph on a
 * new stream *s. */
static CUresult tp_graph(gs_entry_fn entry, CUfunction work, CUfunction coll, CUstream *s, CUgraphExec *out)
{
    struct gs_capture_api api;
    if (gs_capture_api_of(entry, &api) != 0)
        return CUDA_ERROR_NOT_FOUND;
    void *g = NULL;
    CUresult rc = api.stream_create(s, 1);
    if (!rc)
        rc = api.begin(*s, 0);
    if (!rc)
        rc = api.launch(work, 1, 1, 1, 32, 1, 1, 0, *s, NULL, NULL);
    if (!rc)
        rc = api.launch(coll, 8, 1, 1, 32, 1, 1, 0, *s, NULL, NULL);
    CUresult erc = api.end(*s, &g);
    if (!rc)
        rc = erc;
    return rc ? rc : api.instantiate(out, g, 0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The "tp" command: see the top of this file. */
static CUresult tp_steps(gs_entry_fn entry, unsigned long long us, unsigned long long coll_us, unsigned ranks,
                         unsigned long long steps, unsigned long long warm, unsigned group, int as_graph)
{
    struct gs_module_api api;
    CUfunction work = NULL, coll = NULL;
    char name[96];
    CUresult rc = gs_module_api_of(entry, &api) == 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
    if (!rc && !module)
        rc = api.load(&module, "image");
    snprintf(name, sizeof name, "sleep_us:%llu", us);
    if (!rc)
        rc = api.get(&work, module, name);
    snprintf(name, sizeof name, "ncclDevKernel_AllReduce_sim:%llu:%u:%u", coll_us, ranks, group);
    if (!rc)
        rc = api.get(&coll, module, name);
    CUstream gs = NULL;
    CUgraphExec step = NULL;
    graph_t glaunch = as_graph ? (graph_t)entry(NULL, "cuGraphLaunch", 0) : NULL;
    if (!rc && as_graph)
        rc = glaunch ? tp_graph(entry, work, coll, &gs, &step) : CUDA_ERROR_NOT_FOUND;
    double t0 = 0;
    double *took = steps > warm ? calloc(steps - warm, sizeof *took) : NULL;
    if (!rc && steps > warm && !took)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    unsigned long long k = 0, n = 0;
    for (; k < steps && !rc; k++) {
        if (k == warm)
            t0 = gs_now_s();
        double s0 = gs_now_s();
        if (as_graph) {
            rc = glaunch(step, gs);
        } else {
            rc = api.launch(work, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
            if (!rc)
                rc = api.launch(coll, 8, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        }
        if (!rc)
            rc = api.sync(gs);
        if (k >= warm)
            took[n++] = gs_now_s() - s0;
    }
    double el = t0 > 0 ? gs_now_s() - t0 : 0;
    /* the 99th percentile as well as the longest: one step a loaded
     * machine's scheduler delays is no step the limiter stood still */
    if (n)
        qsort(took, n, sizeof *took, cmp_double);
    double longest = n ? took[n - 1] : 0, p99 = n ? took[n * 99 / 100] : 0;
    free(took);
    printf("steps=%llu counted=%llu elapsed_us=%llu longest_us=%llu p99_us=%llu ", k, k > warm ? k - warm : 0,
           (unsigned long long)(el * 1e6), (unsigned long long)(longest * 1e6), (unsigned long long)(p99 * 1e6));
    return rc;
}

/* One launch of func and a wait, in a thread of its own (threads). */
struct one_launch {
    CUresult (*set_ctx)(CUcontext);
    CUcontext ctx;
    gs_launch_fn launch;
    CUresult (*sync)(CUstream);
    CUresult rc;
};

static void *launch_in_thread(void *arg)
{
    struct one_launch *o = arg;
    o->rc = o->set_ctx(o->ctx);
    if (!o->rc)
        o->rc = o->launch(func, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    if (!o->rc)
        o->rc = o->sync(NULL);
    return NULL;
}

static CUresult thread_per_launch(gs_entry_fn entry, unsigned n)
{
    struct one_launch o = { .set_ctx = (CUresult(*)(CUcontext))entry(NULL, "cuCtxSetCurrent", 0),
                            .launch = (gs_launch_fn)entry("cuLaunchKernel", "cuLaunchKernel", 0),
                            .sync = (CUresult(*)(CUstream))entry("cuStreamSynchronize", "cuStreamSynchronize", 0) };
    CUresult (*get_ctx)(CUcontext *) = (CUresult(*)(CUcontext *))entry(NULL, "cuCtxGetCurrent", 0);
    if (!o.set_ctx || !o.launch || !o.sync || !get_ctx || !func || get_ctx(&o.ctx) != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_FOUND;
    double t0 = gs_now_s();
    for (unsigned i = 0; i < n && !o.rc; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, launch_in_thread, &o) != 0)
            return CUDA_ERROR_OPERATING_SYSTEM;
        pthread_join(t, NULL);
    }
    double el = gs_now_s() - t0;
    unsigned long long work = (unsigned long long)n * func_us;
    /* whether the program can still make an event of its own */
    CUresult (*create)(CUevent *, unsigned) = (CUresult(*)(CUevent *, unsigned))entry(NULL, "cuEventCreate", 0);
    CUresult (*destroy)(CUevent) = (CUresult(*)(CUevent))entry(NULL, "cuEventDestroy_v2", 0);
    CUevent ev = NULL;
    CUresult event_rc = create && destroy ? create(&ev, 0) : CUDA_ERROR_NOT_FOUND;
    if (event_rc == CUDA_SUCCESS)
        destroy(ev);
    printf("elapsed_us=%llu work_us=%llu ratio_ppm=%llu event_rc=%d ", (unsigned long long)(el * 1e6), work,
           el > 0 ? (unsigned long long)((double)work / (el * 1e6) * 1e6) : 0ULL, (int)event_rc);
    return o.rc;
}

/* A thread that launches once, waits for it, then sits idle for the rest
 * of the process without launching again (park): its last window stays
 * open, as a PyTorch training process's autograd thread leaves one between
 * steps and for good once the process stops stepping. */
static struct one_launch parked;
static int parked_done;

static void *launch_and_park(void *arg)
{
    launch_in_thread(arg);
    __atomic_store_n(&parked_done, 1, __ATOMIC_RELEASE);
    for (;;)
        pause();
    return NULL;
}

static CUresult park_a_thread(gs_entry_fn entry)
{
    CUresult (*get_ctx)(CUcontext *) = (CUresult(*)(CUcontext *))entry(NULL, "cuCtxGetCurrent", 0);
    parked =
        (struct one_launch){ .set_ctx = (CUresult(*)(CUcontext))entry(NULL, "cuCtxSetCurrent", 0),
                             .launch = (gs_launch_fn)entry("cuLaunchKernel", "cuLaunchKernel", 0),
                             .sync = (CUresult(*)(CUstream))entry("cuStreamSynchronize", "cuStreamSynchronize", 0) };
    if (!parked.set_ctx || !parked.launch || !parked.sync || !get_ctx || !func || get_ctx(&parked.ctx) != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_FOUND;
    pthread_t t;
    if (pthread_create(&t, NULL, launch_and_park, &parked) != 0)
        return CUDA_ERROR_OPERATING_SYSTEM;
    pthread_detach(t);
    while (!__atomic_load_n(&parked_done, __ATOMIC_ACQUIRE))
        usleep(1000);
    return parked.rc;
}

CUfunction gs_client_func(void)
{
    return func;
}

/* The flag a queue waits for (host memory, unified addressing): written
 * only once the launches behind the wait returned. */
static volatile uint32_t host_flag;

static void wait_for_host_flag(void *arg)
{
    (void)arg;
    struct timespec ts = { 0, 100000 };
    while (!__atomic_load_n(&host_flag, __ATOMIC_ACQUIRE))
        nanosleep(&ts, NULL);
}

/* hostwait / hostfunc / hostfunc2 SECS [VNAME] (with_func: a host function
 * waits for the flag, 2: through the ABI with a sync mode, cuLaunchHostFunc_v2
 * and later; VNAME: the host function's exported name, for dlsym lookups). */
static CUresult host_waits(gs_entry_fn entry, int with_func, double secs, const char *vname)
{
    CUresult (*wait)(CUstream, CUdeviceptr, uint32_t, unsigned) =
        (CUresult(*)(CUstream, CUdeviceptr, uint32_t, unsigned))entry("cuStreamWaitValue32", "cuStreamWaitValue32_v2",
                                                                      0);
    void *host_func = with_func ? entry("cuLaunchHostFunc", vname, 0) : NULL;
    gs_launch_fn launch = (gs_launch_fn)entry("cuLaunchKernel", "cuLaunchKernel", 0);
    CUresult (*sync)(CUstream) = (CUresult(*)(CUstream))entry("cuStreamSynchronize", "cuStreamSynchronize", 0);
    if (!(with_func ? host_func : (void *)wait) || !launch || !sync || !func)
        return CUDA_ERROR_NOT_FOUND;
    double t0 = gs_now_s();
    unsigned long long n = 0;
    __atomic_store_n(&host_flag, 0, __ATOMIC_RELEASE);
    CUresult rc;
    if (with_func == 2) /* CU_HOST_TASK_BLOCKING, 0 */
        rc = ((CUresult(*)(CUstream, CUhostFn, void *, unsigned))host_func)(NULL, wait_for_host_flag, NULL, 0);
    else if (with_func)
        rc = ((CUresult(*)(CUstream, CUhostFn, void *))host_func)(NULL, wait_for_host_flag, NULL);
    else
        rc = wait(NULL, (CUdeviceptr)(uintptr_t)&host_flag, 1, 0); /* CU_STREAM_WAIT_VALUE_GEQ */
    while (!rc && gs_now_s() - t0 < secs) {
        rc = launch(func, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        n++;
    }
    __atomic_store_n(&host_flag, 1, __ATOMIC_RELEASE);
    if (!rc)
        rc = sync(NULL);
    printf("launches=%llu elapsed_us=%llu ", n, (unsigned long long)((gs_now_s() - t0) * 1e6));
    return rc;
}

/* hostnode: a graph with a host node, instantiated (never launched). */
static CUresult graph_with_host_node(gs_entry_fn entry)
{
    CUresult (*create)(CUgraph *, unsigned) =
        (CUresult(*)(CUgraph *, unsigned))entry("cuGraphCreate", "cuGraphCreate", 0);
    CUresult (*add)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraphNodeParams *) = (CUresult(*)(
        CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraphNodeParams *))entry(NULL, "cuGraphAddNode", 0);
    CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long) =
        (CUresult(*)(CUgraphExec *, CUgraph, unsigned long long))entry("cuGraphInstantiateWithFlags",
                                                                       "cuGraphInstantiateWithFlags", 0);
    if (!create || !add || !instantiate)
        return CUDA_ERROR_NOT_FOUND;
    CUgraph g;
    CUgraphNode node;
    CUgraphExec exec;
    CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_HOST }; /* the sim never runs it: no function needed */
    CUresult rc = create(&g, 0);
    if (!rc)
        rc = add(&node, g, NULL, 0, &p);
    if (!rc)
        rc = instantiate(&exec, g, 0);
    return rc;
}

/* n functions of their own (sleep_us:US:kI, after `kernel` loaded the
 * module), each launched once, then a sync: a program of many kernels, as
 * torch.compile makes. */
static CUresult many_kernels(gs_entry_fn entry, unsigned n, unsigned long long us)
{
    CUresult (*get)(CUfunction *, CUmodule, const char *) =
        (CUresult(*)(CUfunction *, CUmodule, const char *))entry("cuModuleGetFunction", "cuModuleGetFunction", 0);
    gs_launch_fn launch = (gs_launch_fn)entry("cuLaunchKernel", "cuLaunchKernel", 0);
    CUresult (*sync)(CUstream) = (CUresult(*)(CUstream))entry("cuStreamSynchronize", "cuStreamSynchronize", 0);
    if (!module || !get || !launch || !sync)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = CUDA_SUCCESS;
    for (unsigned i = 0; i < n && !rc; i++) {
        char name[96];
        CUfunction f;
        snprintf(name, sizeof name, "sleep_us:%llu:k%u", us, i);
        rc = get(&f, module, name);
        if (!rc)
            rc = launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    }
    return rc ? rc : sync(NULL);
}

/* The current function's name from `kernel US [nccl]`'s arguments. */
static void kernel_name(int argc, char **argv, char *name, size_t size)
{
    func_us = strtoull(argv[1], NULL, 0);
    if (argc > 2 && !strcmp(argv[2], "nccl")) /* named as NCCL's kernels are, yet none */
        snprintf(name, size, "ncclKernel_sleep_us:%llu", func_us);
    else
        snprintf(name, size, "sleep_us:%llu", func_us);
}

static CUresult module_kernel(gs_entry_fn entry, int argc, char **argv)
{
    CUresult rc = CUDA_SUCCESS;
    if (!module)
        rc =
            ((CUresult(*)(CUmodule *, const void *))entry("cuModuleLoadData", "cuModuleLoadData", 0))(&module, "image");
    char name[96];
    kernel_name(argc, argv, name, sizeof name);
    return rc ? rc
              : ((CUresult(*)(CUfunction *, CUmodule, const char *))entry("cuModuleGetFunction", "cuModuleGetFunction",
                                                                          0))(&func, module, name);
}

static CUresult library_kernel(gs_entry_fn entry, int argc, char **argv)
{
    CUresult (*load)(CUlibrary *, const void *, CUjit_option *, void **, unsigned, CUlibraryOption *, void **,
                     unsigned) =
        (CUresult(*)(CUlibrary *, const void *, CUjit_option *, void **, unsigned, CUlibraryOption *, void **,
                     unsigned))entry("cuLibraryLoadData", "cuLibraryLoadData", 0);
    CUresult (*get)(CUkernel *, CUlibrary, const char *) =
        (CUresult(*)(CUkernel *, CUlibrary, const char *))entry("cuLibraryGetKernel", "cuLibraryGetKernel", 0);
    if (!load || !get)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = library ? CUDA_SUCCESS : load(&library, "image", NULL, NULL, 0, NULL, NULL, 0);
    char name[96];
    kernel_name(argc, argv, name, sizeof name);
    CUkernel k = NULL;
    if (!rc)
        rc = get(&k, library, name);
    func = (CUfunction)(void *)k; /* the driver launches a kernel cast to a function */
    return rc;
}

/* Unloads the library, or else the module, the current function came from. */
static CUresult unload(gs_entry_fn entry)
{
    CUresult rc;
    if (library) {
        CUresult (*lib_unload)(CUlibrary) = (CUresult(*)(CUlibrary))entry("cuLibraryUnload", "cuLibraryUnload", 0);
        rc = lib_unload ? lib_unload(library) : CUDA_ERROR_NOT_FOUND;
        library = rc ? library : NULL;
    } else {
        CUresult (*mod_unload)(CUmodule) = (CUresult(*)(CUmodule))entry("cuModuleUnload", "cuModuleUnload", 0);
        rc = mod_unload && module ? mod_unload(module) : CUDA_ERROR_NOT_FOUND;
        module = rc ? module : NULL;
    }
    func = rc ? func : NULL;
    return rc;
}

void gs_client_compute_ctx_gone(void)
{
    if (!module)
        return;
    module = NULL;
    if (!library)
        func = NULL;
}

struct unload_call {
    gs_entry_fn entry;
    CUresult rc;
};

static void *unload_thread(void *arg)
{
    struct unload_call *u = arg;
    u->rc = unload(u->entry);
    return NULL;
}

/* unload() on a thread of its own, joined: the launching thread's caches
 * must learn of it. */
static CUresult unload_elsewhere(gs_entry_fn entry)
{
    struct unload_call u = { .entry = entry, .rc = CUDA_ERROR_UNKNOWN };
    pthread_t t;
    if (pthread_create(&t, NULL, unload_thread, &u) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_join(t, NULL);
    return u.rc;
}

int gs_client_compute(int argc, char **argv, CUresult *rc, gs_entry_fn entry)
{
    const char *c = argv[0];
    if ((!strcmp(c, "kernel") || !strcmp(c, "libkernel")) && argc > 1) {
        *rc = c[0] == 'l' ? library_kernel(entry, argc, argv) : module_kernel(entry, argc, argv);
        printf("func=%p ", (void *)func);
        return 1;
    }
    if (!strcmp(c, "unload")) {
        *rc = argc > 1 && !strcmp(argv[1], "thread") ? unload_elsewhere(entry) : unload(entry);
        return 1;
    }
    if (!strcmp(c, "kernels") && argc > 2) {
        *rc = many_kernels(entry, (unsigned)strtoul(argv[1], NULL, 0), strtoull(argv[2], NULL, 0));
        return 1;
    }
    if (!strcmp(c, "tp") && argc > 4) {
        *rc = tp_steps(entry, strtoull(argv[1], NULL, 0), strtoull(argv[2], NULL, 0), (unsigned)atoi(argv[3]),
                       strtoull(argv[4], NULL, 0), argc > 5 ? strtoull(argv[5], NULL, 0) : 0,
                       argc > 6 ? (unsigned)atoi(argv[6]) : 0, argc > 7 && atoi(argv[7]) != 0);
        return 1;
    }
    if (!strcmp(c, "graph") && argc > 1) {
        graph_n = (unsigned)strtoul(argv[1], NULL, 0);
        CUresult (*mk)(CUgraphExec *, CUfunction, unsigned) =
            (CUresult(*)(CUgraphExec *, CUfunction, unsigned))entry(NULL, "gpusliceSimGraphCreate", 0);
        *rc = mk ? mk(&graph, func, graph_n) : CUDA_ERROR_NOT_FOUND;
        return 1;
    }
    if (!strcmp(c, "capture") && argc > 2) {
        *rc = capture(entry, (unsigned)strtoul(argv[1], NULL, 0), (unsigned)strtoul(argv[2], NULL, 0),
                      argc > 3 ? atoi(argv[3]) : 0, argc > 4 && atoi(argv[4]) != 0);
        return 1;
    }
    if (!strcmp(c, "park")) {
        *rc = park_a_thread(entry);
        return 1;
    }
    if (!strcmp(c, "threads") && argc > 1) {
        *rc = thread_per_launch(entry, (unsigned)strtoul(argv[1], NULL, 0));
        return 1;
    }
    if ((!strcmp(c, "hostwait") || !strcmp(c, "hostfunc") || !strcmp(c, "hostfunc2")) && argc > 1) {
        int with_func = !strcmp(c, "hostfunc2") ? 2 : !strcmp(c, "hostfunc");
        *rc = host_waits(entry, with_func, atof(argv[1]),
                         argc > 2         ? argv[2]
                         : with_func == 2 ? "cuLaunchHostFunc_v2"
                                          : "cuLaunchHostFunc");
        return 1;
    }
    if (!strcmp(c, "hostnode")) {
        *rc = graph_with_host_node(entry);
        return 1;
    }
    if (!strcmp(c, "idle") && argc > 1) {
        double secs = atof(argv[1]);
        struct timespec ts = { (time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9) };
        nanosleep(&ts, NULL);
        *rc = CUDA_SUCCESS;
        return 1;
    }
    if (!strcmp(c, "burst") && argc > 3) {
        /* burst N THINK_US SECS [GAP_US]: N launches (GAP_US of CPU work,
         * gs_cpu_work_us, between them, as a Python decoder spends between its small
         * kernels), a sync, THINK_US asleep; again until SECS */
        unsigned n = (unsigned)strtoul(argv[1], NULL, 0);
        double think = atof(argv[2]) / 1e6, secs = atof(argv[3]);
        double gap_us = argc > 4 ? atof(argv[4]) : 0;
        gs_launch_fn launch = (gs_launch_fn)entry("cuLaunchKernel", "cuLaunchKernel", 0);
        CUresult (*sync)(CUstream) = (CUresult(*)(CUstream))entry("cuStreamSynchronize", "cuStreamSynchronize", 0);
        if (!launch || !sync || !func) {
            *rc = CUDA_ERROR_NOT_FOUND;
            return 1;
        }
        long long delay0 = gs_run_delay_us(); /* before the clock: a burst of 1 us ran none, reading it after */
        double t0 = gs_now_s(), sum = 0, worst = 0;
        unsigned long long bursts = 0;
        *rc = CUDA_SUCCESS;
        while (!*rc && gs_now_s() - t0 < secs) {
            double b0 = gs_now_s();
            for (unsigned i = 0; i < n && !*rc; i++) {
                if (i && gap_us > 0)
                    gs_cpu_work_us(gap_us);
                *rc = launch(func, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
            }
            if (!*rc)
                *rc = sync(NULL);
            double lat = gs_now_s() - b0;
            sum += lat;
            worst = lat > worst ? lat : worst;
            bursts++;
            struct timespec ts = { (time_t)think, (long)((think - (double)(time_t)think) * 1e9) };
            nanosleep(&ts, NULL);
        }
        printf("bursts=%llu elapsed_us=%llu mean_us=%llu worst_us=%llu run_delay_wall_us=%lld ", bursts,
               (unsigned long long)((gs_now_s() - t0) * 1e6),
               bursts ? (unsigned long long)(sum / (double)bursts * 1e6) : 0ULL, (unsigned long long)(worst * 1e6),
               gs_run_delay_since(delay0));
        return 1;
    }
    if (!strcmp(c, "run") && argc > 2) {
        const char *path = argv[1];
        double secs = atof(argv[2]), warm = argc > 3 ? atof(argv[3]) : 0;
        unsigned depth = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 0) : 8;
        int pt = strstr(path, "ptsz") != NULL;
        const char *base = !strncmp(path, "kernel", 6) ? "cuLaunchKernel"
                           : !strncmp(path, "ex", 2)   ? "cuLaunchKernelEx"
                           : !strncmp(path, "coop", 4) ? "cuLaunchCooperativeKernel"
                                                       : "cuGraphLaunch";
        char vname[64];
        snprintf(vname, sizeof vname, "%s%s", base, pt ? "_ptsz" : "");
        void *fn = entry(base, vname, pt);
        CUresult (*sync)(CUstream) = (CUresult(*)(CUstream))entry("cuStreamSynchronize", "cuStreamSynchronize", 0);
        if (!fn || !sync || !func || (!strncmp(path, "graph", 5) && !graph)) {
            *rc = CUDA_ERROR_NOT_FOUND;
            return 1;
        }
        long long delay0 = gs_run_delay_us();
        double t0 = gs_now_s(), tw = t0 + warm, end = t0 + secs, tm = 0;
        unsigned long long n = 0, counted = 0;
        int measuring = warm <= 0;
        if (measuring)
            tm = t0;
        *rc = CUDA_SUCCESS;
        while (!*rc) {
            for (unsigned i = 0; i < depth && !*rc; i++)
                *rc = launch_once(path, fn);
            if (!*rc)
                *rc = sync(NULL);
            n += depth;
            double t = gs_now_s();
            if (measuring)
                counted += depth;
            else if (t >= tw) {
                measuring = 1;
                tm = t;
                delay0 = gs_run_delay_us();
            }
            if (t >= end)
                break;
        }
        double el = gs_now_s() - tm;
        long long delayed = gs_run_delay_since(delay0);
        unsigned long long per = !strncmp(path, "graph", 5) ? func_us * graph_n : func_us;
        printf("launches=%llu counted=%llu elapsed_us=%llu work_us=%llu ratio_ppm=%llu run_delay_wall_us=%lld ", n,
               counted, (unsigned long long)(el * 1e6), counted * per,
               el > 0 ? (unsigned long long)((double)(counted * per) / (el * 1e6) * 1e6) : 0ULL, delayed);
        return 1;
    }
    return 0;
}
