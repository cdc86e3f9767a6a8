/*
 * gs_client's CUDA-graph tenant (see gs_client.c for the protocol):
 *   graphmake HOW N KERNEL_US [GAP_US]
 *                        the replayed graph: N kernels of KERNEL_US, GAP_US of idle
 *                        GPU between consecutive ones (the simulated driver's
 *                        gpusliceSimGraphCreateGaps); HOW "sim" builds it
 *                        directly, "capture" through stream capture (as PyTorch's
 *                        CUDA-graph trees do: begin, N launches, end, instantiate;
 *                        GAP_US must be 0 there)
 *   replay PATH SECS WARM CPU_US [TAIL_US TAIL_AFTER_US [PRE]]
 *                        replays the graph through PATH (graph, graphptsz; graphctx:
 *                        cuGraphLaunch, and the context's synchronisation a CUDA 13
 *                        runtime's cudaDeviceSynchronize makes) for
 *                        SECS: PRE kernels of TAIL_US (a torch step's input copy
 *                        and RNG fills before the replay), the graph's launch,
 *                        then (with TAIL_US) TAIL_AFTER_US of CPU and a kernel of
 *                        TAIL_US (its .sum()), a stream synchronisation (its
 *                        .item(); graphctx: the context's), then CPU_US of CPU work before the next step;
 *                        reports the steps after the first WARM seconds, their
 *                        wall time and the GPU work they held
 */
#define _GNU_SOURCE
#include "gs_client_graphs.h"
#include "gs_client_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static CUmodule module;
static CUgraphExec graph;
static unsigned long long graph_work_us; /* the kernels' time in one replay, gaps excluded */

static CUresult function_of(gs_entry_fn entry, unsigned long long us, CUfunction *f)
{
    CUresult (*load)(CUmodule *, const void *) =
        (CUresult(*)(CUmodule *, const void *))entry("cuModuleLoadData", "cuModuleLoadData", 0);
    CUresult (*get)(CUfunction *, CUmodule, const char *) =
        (CUresult(*)(CUfunction *, CUmodule, const char *))entry("cuModuleGetFunction", "cuModuleGetFunction", 0);
    if (!load || !get)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = module ? CUDA_SUCCESS : load(&module, "image");
    char name[64];
    snprintf(name, sizeof name, "sleep_us:%llu", us);
    return rc ? rc : get(f, module, name);
}

/* The graph through stream capture: N launches of f recorded on a stream. */
static CUresult captured(gs_entry_fn entry, CUfunction f, unsigned n)
{
    struct gs_capture_api api;
    if (gs_capture_api_of(entry, &api) != 0)
        return CUDA_ERROR_NOT_FOUND;
    CUstream s = NULL;
    void *g = NULL;
    CUresult rc = api.stream_create(&s, 1);
    if (!rc)
        rc = api.begin(s, 0);
    for (unsigned i = 0; i < n && !rc; i++)
        rc = api.launch(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
    CUresult erc = s ? api.end(s, &g) : CUDA_ERROR_INVALID_HANDLE;
    rc = rc ? rc : erc;
    return rc ? rc : api.instantiate(&graph, g, 0);
}

static CUresult make(gs_entry_fn entry, const char *how, unsigned n, unsigned long long us, unsigned long long gap)
{
    CUfunction f = NULL;
    CUresult rc = function_of(entry, us, &f);
    if (rc)
        return rc;
    graph_work_us = n * us;
    if (!strcmp(how, "capture"))
        return gap ? CUDA_ERROR_INVALID_VALUE : captured(entry, f, n);
    CUresult (*mk)(CUgraphExec *, CUfunction, unsigned, unsigned long long) =
        (CUresult(*)(CUgraphExec *, CUfunction, unsigned, unsigned long long))entry(NULL, "gpusliceSimGraphCreateGaps",
                                                                                    0);
    return !strcmp(how, "sim") && mk ? mk(&graph, f, n, gap) : CUDA_ERROR_NOT_FOUND;
}

static CUresult replay(gs_entry_fn entry, char **argv, int argc)
{
    int pt = strstr(argv[1], "ptsz") != NULL, ctx = strstr(argv[1], "ctx") != NULL;
    double secs = atof(argv[2]), warm = atof(argv[3]), cpu = atof(argv[4]);
    unsigned long long tail_us = argc > 5 ? strtoull(argv[5], NULL, 0) : 0;
    double tail_after = argc > 6 ? atof(argv[6]) : 0;
    unsigned pre = argc > 7 && tail_us ? (unsigned)strtoul(argv[7], NULL, 0) : 0;
    CUresult (*glaunch)(CUgraphExec, CUstream) =
        (CUresult(*)(CUgraphExec, CUstream))entry("cuGraphLaunch", pt ? "cuGraphLaunch_ptsz" : "cuGraphLaunch", pt);
    gs_launch_fn launch = (gs_launch_fn)entry("cuLaunchKernel", "cuLaunchKernel", 0);
    CUresult (*sync)(CUstream) = (CUresult(*)(CUstream))entry("cuStreamSynchronize", "cuStreamSynchronize", 0);
    /* cuCtxSynchronize_v2(CUcontext), NULL: the current context */
    CUresult (*ctx_sync)(CUcontext) = NULL;
    if (ctx)
        ctx_sync = (CUresult(*)(CUcontext))entry("cuCtxSynchronize", "cuCtxSynchronize_v2", 0);
    CUfunction tail = NULL;
    CUresult rc = glaunch && launch && sync && graph && (ctx_sync || !ctx) ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
    if (!rc && tail_us)
        rc = function_of(entry, tail_us, &tail);
    double t0 = gs_now_s(), tm = 0;
    unsigned long long steps = 0, counted = 0;
    while (!rc) {
        for (unsigned i = 0; i < pre && !rc; i++)
            rc = launch(tail, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        if (!rc)
            rc = glaunch(graph, NULL);
        if (!rc && tail) {
            gs_cpu_work_us(tail_after);
            rc = launch(tail, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        }
        if (!rc)
            rc = ctx_sync ? ctx_sync(NULL) : sync(NULL);
        steps++;
        double t = gs_now_s();
        if (tm > 0)
            counted++;
        else if (t - t0 >= warm)
            tm = t;
        if (t - t0 >= secs)
            break;
        gs_cpu_work_us(cpu);
    }
    double el = tm > 0 ? gs_now_s() - tm : 0;
    unsigned long long work = counted * (graph_work_us + (pre + (tail_us > 0)) * tail_us);
    printf("steps=%llu counted=%llu elapsed_us=%llu work_us=%llu busy_ppm=%llu ", steps, counted,
           (unsigned long long)(el * 1e6), work, el > 0 ? (unsigned long long)((double)work / (el * 1e6) * 1e6) : 0ULL);
    return rc;
}

int gs_client_graphs(int argc, char **argv, CUresult *rc, gs_entry_fn entry)
{
    if (!strcmp(argv[0], "graphmake") && argc > 3) {
        *rc = make(entry, argv[1], (unsigned)strtoul(argv[2], NULL, 0), strtoull(argv[3], NULL, 0),
                   argc > 4 ? strtoull(argv[4], NULL, 0) : 0);
        return 1;
    }
    if (!strcmp(argv[0], "replay") && argc > 4) {
        *rc = replay(entry, argv, argc);
        return 1;
    }
    return 0;
}
