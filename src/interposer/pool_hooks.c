/*
 * Memory pools: which device a pool's memory lands on. An allocation from a
 * pool takes memory on the pool's device, whatever the current context's
 * (cuMemAllocFromPoolAsync); charged to the current device, a pool on
 * another GPU took that GPU's memory past its limit. Each pool the program
 * makes or asks a device for is recorded with its device; one never seen
 * (a pool on the host, or imported) is charged to the current device.
 */
#include "../core/alloc_table.h"
#include "host_wait_hooks.h"
#include "log.h"
#include "pool_hooks.h"
#include "real_driver.h"
#include "runtime.h"

/* Records pool as one of device ordinal's (one past the tables too: its
 * allocations are refused). 0, or -1 when it cannot be remembered (so its
 * allocations could land uncounted on another GPU). */
static int record(CUmemoryPool pool, CUdevice ordinal)
{
    int dev = gs_rt_dev_of_ordinal(ordinal);
    struct gs_alloc_rec rec = { .bytes = 0, .dev = dev, .slot = -1 };
    if (dev == -1 || gs_alloc_put(GS_ALLOC_POOL, (uint64_t)(uintptr_t)pool, rec, NULL, NULL) == 0)
        return 0;
    gs_log(GS_LOG_ERROR, "out of host memory recording a memory pool's device; the pool is refused");
    return -1;
}

int gs_pool_device(CUmemoryPool pool)
{
    struct gs_alloc_rec rec;
    if (gs_alloc_get(GS_ALLOC_POOL, (uint64_t)(uintptr_t)pool, &rec) == 0)
        return rec.dev;
    return gs_rt_dev_current(NULL);
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemPoolCreate);
    CUresult rc = real(pool, props);
    if (props && props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        rc = gs_host_memory_had(rc); /* host or managed memory a kernel may spin on */
    if (rc != CUDA_SUCCESS || gs_mode() == GS_MODE_PASSTHROUGH || !props ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || record(*pool, props->location.id) == 0)
        return rc;
    gs_pfn_cuMemPoolDestroy destroy = GS_REAL_CU(cuMemPoolDestroy);
    if (destroy)
        destroy(*pool);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemPoolDestroy);
    CUresult rc = real(pool);
    struct gs_alloc_rec gone;
    if (rc == CUDA_SUCCESS && gs_mode() != GS_MODE_PASSTHROUGH)
        (void)gs_alloc_take(GS_ALLOC_POOL, (uint64_t)(uintptr_t)pool, &gone);
    return rc;
}

/* A device's default or current pool: its memory is that device's. */
#define DEVICE_POOL(real, pool_out, dev, call)                                                                         \
    do {                                                                                                               \
        CUresult rc_ = call;                                                                                           \
        if (rc_ == CUDA_SUCCESS && gs_mode() != GS_MODE_PASSTHROUGH && (pool_out) && record(*(pool_out), dev) != 0)    \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                                           \
        return rc_;                                                                                                    \
    } while (0)

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuDeviceGetDefaultMemPool);
    DEVICE_POOL(real, pool_out, dev, real(pool_out, dev));
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuDeviceGetMemPool);
    DEVICE_POOL(real, pool, dev, real(pool, dev));
}
