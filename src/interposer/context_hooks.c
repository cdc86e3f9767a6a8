/*
 * A context takes device memory of its own (about 520 MiB on an H200 with
 * CUDA 13) that no cuMemAlloc reports. Every context a process makes is
 * charged: the primary context once per device, each cuCtxCreate context
 * until its cuCtxDestroy. The charge is a fixed size if
 * GPUSLICE_CTX_OVERHEAD says so. Otherwise the process's first context on a
 * device is measured: what NVML reports for this process right after the
 * creation, or, where NVML cannot see our pid (pid namespaces), what the
 * device as a whole gained across the creation; later ones are charged the
 * same. Like any allocation the charge is reserved before the creation and
 * a context past the limit is refused; a measured charge is settled after.
 *
 * The compute limiter forgets what it holds of a context or stream the
 * program destroys (gs_compute_forget): the primary context goes
 * at its last release or a reset.
 */
#include "charge.h"
#include "compute_collective.h"
#include "compute_limiter.h"
#include "fork_hooks.h"
#include "log.h"
#include "nvml_procs.h"
#include "real_driver.h"
#include "runtime.h"

#include "../core/uuid_format.h"

#include <pthread.h>
#include <unistd.h>

/* Used when the measurement is impossible or implausible. */
#define FALLBACK_OVERHEAD (512ULL << 20)
#define MAX_PLAUSIBLE_OVERHEAD (8ULL << 30)

static int primary_charged[GS_MAX_DEVICES];
static uint64_t measured[GS_MAX_DEVICES];     /* auto mode: what the first context took; 0: not yet */
static CUcontext primary_ctx[GS_MAX_DEVICES]; /* each device's primary context, as last retained */
/* Held across each creation and destruction: two threads of this process
 * never measure each other, and a CUcontext value the driver hands out
 * again is recorded only after its old record is gone. */
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

void gs_ctx_fork_child(void)
{
    for (int i = 0; i < GS_MAX_DEVICES; i++) {
        primary_charged[i] = 0;
        measured[i] = 0;
        primary_ctx[i] = NULL;
    }
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    ctx_lock = fresh; /* it may be held by a thread that does not exist in the child */
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
    unsigned int pids[64];
    unsigned long long mem[64];
    int n = gs_nvml_compute_procs(h, pids, mem, 64);
    unsigned int me = (unsigned int)getpid();
    for (int i = 0; i < n; i++) {
        if (pids[i] == me && mem[i] != NVML_VALUE_NOT_AVAILABLE_ULL) {
            *used = mem[i];
            return 0;
        }
    }
    return -1;
}

/* One context creation: what was reserved for it, and NVML's view before
 * it when its overhead is to be measured. */
struct ctx_charge {
    int dev; /* region device; -1: nothing charged */
    int slot;
    uint64_t bytes; /* reserved */
    int measure;
    nvmlDevice_t nvml;
    unsigned long long before;
    int have_before;
};

/* What a context on ordinal is charged before it exists: the configured
 * size, or what this process's first context there measured, or the
 * fallback until one has. */
static uint64_t expected_overhead(CUdevice ordinal)
{
    if (gs_rt.cfg.ctx_overhead >= 0)
        return (uint64_t)gs_rt.cfg.ctx_overhead;
    return measured[ordinal] ? measured[ordinal] : FALLBACK_OVERHEAD;
}

/* With ctx_lock held, before the real creation: reserves the context's
 * overhead like any allocation. CUDA_ERROR_OUT_OF_MEMORY past the limit. */
static CUresult ctx_reserve(struct ctx_charge *c, CUdevice ordinal, int primary)
{
    c->dev = -1;
    int dev = gs_rt_dev_of_ordinal(ordinal);
    if (dev == GS_DEV_UNTRACKED)
        return CUDA_ERROR_OUT_OF_MEMORY; /* cannot account for it, so refuse it */
    if (ordinal < 0 || ordinal >= GS_MAX_DEVICES || (primary && primary_charged[ordinal]))
        return CUDA_SUCCESS; /* the driver refuses the ordinal, nothing is limited past the tables
                              * (gs_rt_dev_of_ordinal), or a retained primary costs nothing more */
    if (gs_rt_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0)
        return CUDA_SUCCESS; /* a device this process cannot see: the driver refuses it */
    struct gs_region *r = gs_rt_region();
    int slot = gs_rt_slot();
    uint64_t bytes = expected_overhead(ordinal);
    if (!r || slot < 0)
        return CUDA_ERROR_OUT_OF_MEMORY; /* cannot account for it, so refuse it */
    if (gs_region_reserve_overhead(r, gs_rt_region_fd, slot, dev, bytes) != 0) {
        gs_log(GS_LOG_INFO, "context of %llu bytes refused: %llu of %llu bytes in use on %s", (unsigned long long)bytes,
               (unsigned long long)r->dev[dev].mem_used, (unsigned long long)r->dev[dev].mem_limit, r->dev[dev].uuid);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *c = (struct ctx_charge){ .dev = dev, .slot = slot, .bytes = bytes };
    c->measure = gs_rt.cfg.ctx_overhead < 0 && !measured[ordinal];
    if (c->measure) {
        c->nvml = nvml_device_of(ordinal);
        c->have_before = device_used(c->nvml, &c->before) == 0;
    }
    return CUDA_SUCCESS;
}

/* What the process's first context on a device really took. */
static uint64_t measure(const struct ctx_charge *c, CUdevice ordinal)
{
    unsigned long long after = 0;
    if (own_usage(c->nvml, &after) == 0 && after > 0 && after <= MAX_PLAUSIBLE_OVERHEAD)
        return after; /* exact: nothing else of ours is on the device yet */
    if (c->have_before && device_used(c->nvml, &after) == 0 && after > c->before &&
        after - c->before <= MAX_PLAUSIBLE_OVERHEAD)
        return after - c->before;
    gs_log(GS_LOG_WARN, "could not measure context overhead on device %d; charging %llu MiB", ordinal,
           (unsigned long long)(FALLBACK_OVERHEAD >> 20));
    return FALLBACK_OVERHEAD;
}

/* The reservation becomes what was measured: the excess goes back, a
 * shortfall is added (already spent, so even past the limit). */
static void settle_measured(struct ctx_charge *c, uint64_t actual)
{
    struct gs_region *r = gs_rt_region();
    if (actual > c->bytes)
        gs_region_charge_force(r, c->slot, c->dev, actual - c->bytes);
    else if (actual < c->bytes)
        gs_region_release_overhead(r, c->slot, c->dev, c->bytes - actual);
    c->bytes = actual;
}

/* A created context's charge, kept until its cuCtxDestroy. One that cannot
 * be recorded could never be released: it is destroyed and refused (or,
 * if it cannot be destroyed, stays charged until the process exits). */
static CUresult record_context(const struct ctx_charge *c, CUcontext ctx)
{
    struct gs_region *r = gs_rt_region();
    struct gs_alloc_rec rec = { .bytes = c->bytes, .dev = c->dev, .slot = c->slot }, old;
    int replaced = 0;
    if (gs_alloc_put(GS_ALLOC_CTX, (uint64_t)(uintptr_t)ctx, rec, &old, &replaced) == 0) {
        if (replaced) /* destroyed around us: the driver handed its value out again */
            gs_region_release_overhead(r, old.slot, old.dev, old.bytes);
        return CUDA_SUCCESS;
    }
    gs_log(GS_LOG_ERROR, "out of host memory tracking a context; the context is refused");
    gs_pfn_cuCtxDestroy_v2 destroy = GS_REAL_CU(cuCtxDestroy_v2);
    if (destroy && destroy(ctx) == CUDA_SUCCESS)
        gs_region_release_overhead(r, c->slot, c->dev, c->bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* After the real creation, still under ctx_lock: keeps the charge of a
 * context that exists (the primary one for the process's life, a created
 * one under ctx), gives it back otherwise. */
static CUresult ctx_commit(struct ctx_charge *c, CUdevice ordinal, CUresult rc, int primary, CUcontext ctx)
{
    if (c->dev < 0)
        return rc;
    if (rc != CUDA_SUCCESS) {
        gs_region_release_overhead(gs_rt_region(), c->slot, c->dev, c->bytes);
        return rc;
    }
    if (c->measure) {
        settle_measured(c, measure(c, ordinal));
        measured[ordinal] = c->bytes;
    }
    gs_log(GS_LOG_DEBUG, "context on device %d charged %llu bytes", ordinal, (unsigned long long)c->bytes);
    if (primary) {
        primary_charged[ordinal] = 1;
        return rc;
    }
    return record_context(c, ctx);
}

/* Reserve, create, keep or give back. pctx is read only after a success. */
#define CTX_CALL(ordinal, primary, pctx, call)                                                                         \
    do {                                                                                                               \
        if (gs_mode() == GS_MODE_PASSTHROUGH)                                                                          \
            return call;                                                                                               \
        if (gs_rt_ready() != 0)                                                                                        \
            return CUDA_ERROR_NOT_INITIALIZED;                                                                         \
        struct ctx_charge c_;                                                                                          \
        pthread_mutex_lock(&ctx_lock);                                                                                 \
        CUresult rc_ = ctx_reserve(&c_, (ordinal), (primary));                                                         \
        if (rc_ == CUDA_SUCCESS) {                                                                                     \
            rc_ = call;                                                                                                \
            rc_ = ctx_commit(&c_, (ordinal), rc_, (primary), rc_ == CUDA_SUCCESS ? *(pctx) : NULL);                    \
        }                                                                                                              \
        pthread_mutex_unlock(&ctx_lock);                                                                               \
        return rc_;                                                                                                    \
    } while (0)

static CUresult retain_primary(gs_pfn_cuDevicePrimaryCtxRetain real, CUcontext *pctx, CUdevice dev)
{
    CTX_CALL(dev, 1, pctx, real(pctx, dev));
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuDevicePrimaryCtxRetain);
    CUresult rc = retain_primary(real, pctx, dev);
    if (rc == CUDA_SUCCESS && dev >= 0 && dev < GS_MAX_DEVICES)
        __atomic_store_n(&primary_ctx[dev], *pctx, __ATOMIC_RELAXED);
    return rc;
}

/* The pre-3.2 name, with the same ABI as _v2. */
CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuCtxCreate);
    CTX_CALL(dev, 0, pctx, real(pctx, flags, dev));
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuCtxCreate_v2);
    CTX_CALL(dev, 0, pctx, real(pctx, flags, dev));
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
                        CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuCtxCreate_v3);
    CTX_CALL(dev, 0, pctx, real(pctx, paramsArray, numParams, flags, dev));
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuCtxCreate_v4);
    CTX_CALL(dev, 0, pctx, real(pctx, params, flags, dev));
}

/* Destroys ctx; on success releases exactly what its creation was charged. */
static CUresult destroy_context(CUresult (*real)(CUcontext), CUcontext ctx)
{
    if (gs_mode() == GS_MODE_PASSTHROUGH)
        return real(ctx);
    pthread_mutex_lock(&ctx_lock);
    gs_compute_forget(NULL, ctx);
    CUresult rc = real(ctx);
    gs_compute_forgotten(ctx);
    if (rc == CUDA_SUCCESS)
        gs_compute_collective_unloaded(); /* its modules went with it */
    struct gs_alloc_rec rec;
    if (rc == CUDA_SUCCESS && gs_alloc_take(GS_ALLOC_CTX, (uint64_t)(uintptr_t)ctx, &rec) == 0) {
        struct gs_region *r = gs_rt_region();
        if (r && gs_region_release_overhead(r, rec.slot, rec.dev, rec.bytes) != 0)
            gs_log(GS_LOG_WARN, "context released more than was charged on device %d", rec.dev);
    }
    pthread_mutex_unlock(&ctx_lock);
    return rc;
}

CUresult cuCtxDestroy(CUcontext ctx)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuCtxDestroy);
    return destroy_context(real, ctx);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuCtxDestroy_v2);
    return destroy_context(real, ctx);
}

/* A release or reset of dev's primary context. A release destroys it only
 * at its last reference, which the driver does not tell beforehand: forgotten
 * at each (a release that leaves it costs each thread's limiter state a
 * set-up afresh, and its six events). */
static CUresult end_primary(CUresult (*real)(CUdevice), CUdevice dev)
{
    CUcontext ctx = dev >= 0 && dev < GS_MAX_DEVICES ? __atomic_load_n(&primary_ctx[dev], __ATOMIC_RELAXED) : NULL;
    gs_compute_forget(NULL, ctx);
    CUresult rc = real(dev);
    gs_compute_forgotten(ctx);
    if (rc == CUDA_SUCCESS)
        gs_compute_collective_unloaded(); /* its modules may have gone with it */
    return rc;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuDevicePrimaryCtxRelease);
    return end_primary(real, dev);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuDevicePrimaryCtxRelease_v2);
    return end_primary(real, dev);
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuDevicePrimaryCtxReset);
    return end_primary(real, dev);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuDevicePrimaryCtxReset_v2);
    return end_primary(real, dev);
}

static CUresult destroy_stream(CUresult (*real)(CUstream), CUstream s)
{
    gs_compute_forget(&s, NULL);
    return real(s);
}

CUresult cuStreamDestroy(CUstream s)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuStreamDestroy);
    return destroy_stream(real, s);
}

CUresult cuStreamDestroy_v2(CUstream s)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuStreamDestroy_v2);
    return destroy_stream(real, s);
}
