/*
 * A context takes device memory of its own (about 520 MiB on an H200 with
 * CUDA 13) that no cuMemAlloc reports. The first context a process makes on
 * a device is charged: a fixed size if GPUSLICE_CTX_OVERHEAD says so,
 * otherwise what NVML reports for this process right after the creation,
 * or, where NVML cannot see our pid (pid namespaces), what the device as a
 * whole gained across the creation.
 */
#include "charge.h"
#include "fork_hooks.h"
#include "log.h"
#include "real_driver.h"
#include "runtime.h"

#include "../core/uuid_format.h"

#include <pthread.h>
#include <unistd.h>

/* Used when the measurement is impossible or implausible. */
#define FALLBACK_OVERHEAD (512ULL << 20)
#define MAX_PLAUSIBLE_OVERHEAD (8ULL << 30)

static int charged[GS_MAX_DEVICES];
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

void gs_ctx_fork_child(void)
{
    for (int i = 0; i < GS_MAX_DEVICES; i++)
        charged[i] = 0;
}

static nvmlDevice_t nvml_device_of(CUdevice ordinal)
{
    gs_pfn_cuDeviceGetUuid get_uuid = GS_REAL_CU(cuDeviceGetUuid);
    gs_pfn_nvmlInit_v2 init = GS_REAL_NVML(nvmlInit_v2);
    gs_pfn_nvmlDeviceGetHandleByUUID by_uuid = GS_REAL_NVML(nvmlDeviceGetHandleByUUID);
    CUuuid u;
    nvmlDevice_t h = NULL;
    if (!get_uuid || !init || !by_uuid || get_uuid(&u, ordinal) != CUDA_SUCCESS || init() != NVML_SUCCESS)
        return NULL;
    char text[GS_UUID_TEXT_LEN];
    gs_format_gpu_uuid(u.bytes, text, sizeof text);
    return by_uuid(text, &h) == NVML_SUCCESS ? h : NULL;
}

static int device_used(nvmlDevice_t h, unsigned long long *used)
{
    gs_pfn_nvmlDeviceGetMemoryInfo info = GS_REAL_NVML(nvmlDeviceGetMemoryInfo);
    nvmlMemory_t m;
    if (!h || !info || info(h, &m) != NVML_SUCCESS)
        return -1;
    *used = m.used;
    return 0;
}

/* What NVML says this very process holds on the device, when NVML sees our
 * pid (same pid namespace as the driver: bare hosts, `gpuslice run`). In a
 * container NVML reports host pids and this finds nothing. */
static int own_usage(nvmlDevice_t h, unsigned long long *used)
{
    gs_pfn_nvmlDeviceGetComputeRunningProcesses_v3 list = GS_REAL_NVML(nvmlDeviceGetComputeRunningProcesses_v3);
    nvmlProcessInfo_t infos[64];
    unsigned int n = 64;
    if (!h || !list || list(h, &n, infos) != NVML_SUCCESS)
        return -1;
    unsigned int me = (unsigned int)getpid();
    for (unsigned int i = 0; i < n && i < 64; i++) {
        if (infos[i].pid == me && infos[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE_ULL) {
            *used = infos[i].usedGpuMemory;
            return 0;
        }
    }
    return -1;
}

struct ctx_probe {
    int first; /* this creation is the process's first on the device */
    int dev;
    nvmlDevice_t nvml;
    unsigned long long before;
    int have_before;
};

/* Before the real creation: remember NVML's view. Holding ctx_lock across
 * the creation keeps two threads of this process from measuring each
 * other. Returns an error if gpuslice is failing closed. */
static CUresult probe_begin(struct ctx_probe *p, CUdevice ordinal)
{
    p->first = 0;
    if (gs_rt_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&ctx_lock);
    if (ordinal < 0 || ordinal >= GS_MAX_DEVICES || charged[ordinal]) {
        pthread_mutex_unlock(&ctx_lock);
        return CUDA_SUCCESS;
    }
    p->dev = gs_rt_dev_of_ordinal(ordinal);
    if (gs_rt_ready() != 0) {
        pthread_mutex_unlock(&ctx_lock);
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    p->first = 1;
    p->have_before = 0;
    if (gs_rt.cfg.ctx_overhead < 0) {
        p->nvml = nvml_device_of(ordinal);
        p->have_before = device_used(p->nvml, &p->before) == 0;
    }
    return CUDA_SUCCESS;
}

static void probe_end(struct ctx_probe *p, CUdevice ordinal, CUresult rc)
{
    if (!p->first)
        return;
    if (rc == CUDA_SUCCESS) {
        uint64_t overhead = FALLBACK_OVERHEAD;
        unsigned long long after = 0;
        if (gs_rt.cfg.ctx_overhead >= 0) {
            overhead = (uint64_t)gs_rt.cfg.ctx_overhead;
        } else if (own_usage(p->nvml, &after) == 0 && after > 0 && after <= MAX_PLAUSIBLE_OVERHEAD) {
            /* Exact: nothing else of ours is on the device yet. */
            overhead = after;
        } else if (p->have_before && device_used(p->nvml, &after) == 0 && after > p->before &&
                   after - p->before <= MAX_PLAUSIBLE_OVERHEAD) {
            overhead = after - p->before;
        } else {
            gs_log(GS_LOG_WARN, "could not measure context overhead on device %d; charging %llu MiB", ordinal,
                   (unsigned long long)(FALLBACK_OVERHEAD >> 20));
        }
        gs_charge_force(p->dev, overhead);
        charged[ordinal] = 1;
        gs_log(GS_LOG_DEBUG, "context on device %d charged %llu bytes", ordinal, (unsigned long long)overhead);
    }
    pthread_mutex_unlock(&ctx_lock);
}

#define CTX_CALL(ordinal, call)                                                                                        \
    do {                                                                                                               \
        if (gs_mode() == GS_MODE_PASSTHROUGH)                                                                          \
            return call;                                                                                               \
        struct ctx_probe p_;                                                                                           \
        CUresult rc_ = probe_begin(&p_, (ordinal));                                                                    \
        if (rc_ != CUDA_SUCCESS)                                                                                       \
            return rc_;                                                                                                \
        rc_ = call;                                                                                                    \
        probe_end(&p_, (ordinal), rc_);                                                                                \
        return rc_;                                                                                                    \
    } while (0)

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuDevicePrimaryCtxRetain);
    CTX_CALL(dev, real(pctx, dev));
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuCtxCreate_v2);
    CTX_CALL(dev, real(pctx, flags, dev));
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
                        CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuCtxCreate_v3);
    CTX_CALL(dev, real(pctx, paramsArray, numParams, flags, dev));
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuCtxCreate_v4);
    CTX_CALL(dev, real(pctx, params, flags, dev));
}
