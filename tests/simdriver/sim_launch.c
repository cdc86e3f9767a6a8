/*
 * Streams, events, modules and every launch entry point. Work completes the
 * moment it is submitted: launches are validated and return, host functions
 * run on the calling thread. This file is where a per-device kernel timeline
 * (for compute limits) will hook in.
 *
 * Handles point into fixed process-local tables, so a stale handle is
 * detected without touching freed memory.
 */
#include <string.h>
#include <time.h>

#include "sim_cuda.h"

#define MAX_STREAMS 1024
#define MAX_EVENTS 4096
#define MAX_MODULES 256
#define MAX_FUNCS 1024
#define NAME_LEN 128

struct sim_stream {
    int in_use;
    int ctx;
};
struct sim_event {
    int in_use;
    int recorded;
    unsigned int flags;
    uint64_t t_ns;
};
struct sim_module {
    int in_use;
};
struct sim_func {
    int in_use;
    int module;
    char name[NAME_LEN];
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_stream g_streams[MAX_STREAMS];
static struct sim_event g_events[MAX_EVENTS];
static struct sim_module g_modules[MAX_MODULES];
static struct sim_func g_funcs[MAX_FUNCS];

/* Index of a live handle in its table, or -1. Every table entry starts with
 * its in_use flag. */
static int live_index(const void *h, const void *table, size_t n, size_t elem)
{
    uintptr_t p = (uintptr_t)h, t = (uintptr_t)table;
    if (p < t || p >= t + n * elem || (p - t) % elem)
        return -1;
    const int *in_use = (const int *)h;
    return *in_use ? (int)((p - t) / elem) : -1;
}
#define HANDLE_INDEX(table, n, h) live_index((const void *)(h), (table), (n), sizeof((table)[0]))

/* Checks cuInit and a current context (launches need one). */
static CUresult need_ctx(void)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    int ctx = -1;
    return sim_current_ctx(&ctx);
}

int sim_stream_valid(CUstream s)
{
    /* 0x1 is CU_STREAM_LEGACY, 0x2 CU_STREAM_PER_THREAD. */
    if (s == NULL || s == (CUstream)(uintptr_t)1 || s == (CUstream)(uintptr_t)2)
        return 1;
    pthread_mutex_lock(&g_lock);
    int ok = HANDLE_INDEX(g_streams, MAX_STREAMS, s) >= 0;
    pthread_mutex_unlock(&g_lock);
    return ok;
}

/* ---- streams ---- */

SIM_API cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    int ctx = -1;
    if (!phStream || Flags > 1) /* 1 = CU_STREAM_NON_BLOCKING */
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = need_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    sim_current_ctx(&ctx);
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < MAX_STREAMS; i++) {
        if (!g_streams[i].in_use) {
            g_streams[i] = (struct sim_stream){1, ctx};
            *phStream = (CUstream)(void *)&g_streams[i];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static CUresult stream_destroy(CUstream s)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_lock);
    int i = HANDLE_INDEX(g_streams, MAX_STREAMS, s);
    if (i >= 0)
        g_streams[i].in_use = 0;
    pthread_mutex_unlock(&g_lock);
    return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API cuStreamDestroy(CUstream hStream)
{
    return stream_destroy(hStream);
}

SIM_API cuStreamDestroy_v2(CUstream hStream)
{
    return stream_destroy(hStream);
}

SIM_API cuStreamSynchronize(CUstream hStream)
{
    CUresult rc = need_ctx();
    if (rc == CUDA_SUCCESS && !sim_stream_valid(hStream))
        rc = CUDA_ERROR_INVALID_HANDLE;
    return rc;
}

/* ---- events ---- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

SIM_API cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    if (!phEvent || (Flags & ~0x7U))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = need_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < MAX_EVENTS; i++) {
        if (!g_events[i].in_use) {
            g_events[i] = (struct sim_event){.in_use = 1, .flags = Flags};
            *phEvent = (CUevent)(void *)&g_events[i];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

SIM_API cuEventRecord(CUevent hEvent, CUstream hStream)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!sim_stream_valid(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_lock);
    int i = HANDLE_INDEX(g_events, MAX_EVENTS, hEvent);
    if (i >= 0) {
        g_events[i].recorded = 1;
        g_events[i].t_ns = now_ns();
    }
    pthread_mutex_unlock(&g_lock);
    return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API cuEventSynchronize(CUevent hEvent)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_lock);
    int i = HANDLE_INDEX(g_events, MAX_EVENTS, hEvent);
    pthread_mutex_unlock(&g_lock);
    return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    int a = HANDLE_INDEX(g_events, MAX_EVENTS, hStart);
    int b = HANDLE_INDEX(g_events, MAX_EVENTS, hEnd);
    if (a < 0 || b < 0 || (g_events[a].flags & 0x2) || (g_events[b].flags & 0x2))
        rc = CUDA_ERROR_INVALID_HANDLE; /* 0x2 = CU_EVENT_DISABLE_TIMING */
    else if (!g_events[a].recorded || !g_events[b].recorded)
        rc = CUDA_ERROR_INVALID_HANDLE;
    else
        *pMilliseconds = (float)((double)((int64_t)(g_events[b].t_ns - g_events[a].t_ns)) / 1e6);
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static CUresult event_destroy(CUevent e)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_lock);
    int i = HANDLE_INDEX(g_events, MAX_EVENTS, e);
    if (i >= 0)
        g_events[i].in_use = 0;
    pthread_mutex_unlock(&g_lock);
    return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API cuEventDestroy(CUevent hEvent)
{
    return event_destroy(hEvent);
}

SIM_API cuEventDestroy_v2(CUevent hEvent)
{
    return event_destroy(hEvent);
}

/* ---- modules and functions ---- */

SIM_API cuModuleLoadData(CUmodule *module, const void *image)
{
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = need_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < MAX_MODULES; i++) {
        if (!g_modules[i].in_use) {
            g_modules[i].in_use = 1;
            *module = (CUmodule)(void *)&g_modules[i];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

SIM_API cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    if (!hfunc || !name || strlen(name) >= NAME_LEN)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_lock);
    int m = HANDLE_INDEX(g_modules, MAX_MODULES, hmod);
    if (m >= 0) {
        /* Every name exists: a module's image is not parsed. Same name, same handle. */
        int free_i = -1;
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        for (int i = 0; i < MAX_FUNCS; i++) {
            if (g_funcs[i].in_use && g_funcs[i].module == m && strcmp(g_funcs[i].name, name) == 0) {
                free_i = i;
                break;
            }
            if (!g_funcs[i].in_use && free_i < 0)
                free_i = i;
        }
        if (free_i >= 0) {
            if (!g_funcs[free_i].in_use) {
                g_funcs[free_i] = (struct sim_func){.in_use = 1, .module = m};
                strcpy(g_funcs[free_i].name, name);
            }
            *hfunc = (CUfunction)(void *)&g_funcs[free_i];
            rc = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

SIM_API cuModuleUnload(CUmodule hmod)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_lock);
    int m = HANDLE_INDEX(g_modules, MAX_MODULES, hmod);
    if (m >= 0) {
        g_modules[m].in_use = 0;
        for (int i = 0; i < MAX_FUNCS; i++)
            if (g_funcs[i].in_use && g_funcs[i].module == m)
                g_funcs[i].in_use = 0;
    }
    pthread_mutex_unlock(&g_lock);
    return m >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* ---- launches ---- */

static CUresult check_launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, CUstream s)
{
    CUresult rc = need_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_lock);
    int fi = HANDLE_INDEX(g_funcs, MAX_FUNCS, f);
    pthread_mutex_unlock(&g_lock);
    if (fi < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!sim_stream_valid(s))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

SIM_API cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                       unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                       unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                       void **kernelParams, void **extra)
{
    return check_launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream);
}

SIM_API cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                            unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                            unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                            void **kernelParams, void **extra)
{
    return check_launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream);
}

static CUresult launch_ex(const CUlaunchConfig *cfg, CUfunction f)
{
    if (!cfg)
        return CUDA_ERROR_INVALID_VALUE;
    return check_launch(f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX,
                        cfg->blockDimY, cfg->blockDimZ, cfg->hStream);
}

SIM_API cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                         void **extra)
{
    return launch_ex(config, f);
}

SIM_API cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                              void **extra)
{
    return launch_ex(config, f);
}

SIM_API cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                  unsigned int gridDimZ, unsigned int blockDimX,
                                  unsigned int blockDimY, unsigned int blockDimZ,
                                  unsigned int sharedMemBytes, CUstream hStream,
                                  void **kernelParams)
{
    return check_launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream);
}

SIM_API cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                       unsigned int gridDimZ, unsigned int blockDimX,
                                       unsigned int blockDimY, unsigned int blockDimZ,
                                       unsigned int sharedMemBytes, CUstream hStream,
                                       void **kernelParams)
{
    return check_launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream);
}

static CUresult graph_launch(CUgraphExec g, CUstream s)
{
    CUresult rc = need_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    /* There is no graph API in the sim: any non-NULL executable graph runs. */
    if (!g || !sim_stream_valid(s))
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

SIM_API cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream);
}

SIM_API cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream);
}

static CUresult host_func(CUstream s, CUhostFn fn, void *data)
{
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = need_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!sim_stream_valid(s))
        return CUDA_ERROR_INVALID_HANDLE;
    fn(data); /* all earlier work on the stream is already done */
    return CUDA_SUCCESS;
}

SIM_API cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    return host_func(hStream, fn, userData);
}

SIM_API cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    return host_func(hStream, fn, userData);
}
