/*
 * Stream-ordered allocation and memory pools. Nothing runs asynchronously in
 * the sim, so an allocation takes device memory when cuMemAllocAsync returns
 * and gives it back when cuMemFreeAsync returns. Pools do not cache freed
 * memory (as a real pool with release threshold 0 after a synchronisation),
 * so cuMemPoolTrimTo has nothing to trim. Each allocation is charged its size
 * rounded up to 2 MiB, and belongs to the context current at allocation.
 */
#include <string.h>

#include "sim_cuda.h"

/* Slots 0..SIM_MAX_DEVICES-1 are the devices' default pools. */
struct sim_pool sim_pools[SIM_MAX_POOLS];

void sim_pool_reset_local(void)
{
    memset(sim_pools, 0, sizeof(sim_pools));
}

static int pool_index(CUmemoryPool pool)
{
    const struct sim_pool *p = (const struct sim_pool *)(void *)pool;
    if (p < sim_pools || p >= sim_pools + SIM_MAX_POOLS)
        return -1;
    int idx = (int)(p - sim_pools);
    return sim_pools[idx].magic == SIM_POOL_MAGIC && sim_pools[idx].in_use ? idx : -1;
}

SIM_API cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    struct sim_call c;
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    dev = sim_dev_phys(dev);
    if (dev < 0) {
        rc = CUDA_ERROR_INVALID_DEVICE;
    } else {
        sim_pools[dev] = (struct sim_pool){ SIM_POOL_MAGIC, 1, dev, 1 };
        *pool_out = (CUmemoryPool)(void *)&sim_pools[dev];
    }
    sim_leave(&c);
    return rc;
}

SIM_API cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    int dev = sim_dev_phys(props->location.id);
    if (dev < 0) {
        rc = CUDA_ERROR_INVALID_DEVICE;
    } else {
        for (int i = SIM_MAX_DEVICES; i < SIM_MAX_POOLS; i++) {
            if (!sim_pools[i].in_use) {
                sim_pools[i] = (struct sim_pool){ SIM_POOL_MAGIC, 1, dev, 0 };
                *pool = (CUmemoryPool)(void *)&sim_pools[i];
                rc = CUDA_SUCCESS;
                break;
            }
        }
    }
    sim_leave(&c);
    return rc;
}

SIM_API cuMemPoolDestroy(CUmemoryPool pool)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    int idx = pool_index(pool);
    /* Like the driver, outstanding allocations stay valid until freed. */
    if (idx < 0 || sim_pools[idx].is_default)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        sim_pools[idx].in_use = 0;
    sim_leave(&c);
    return rc;
}

SIM_API cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pool_index(pool) < 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    sim_leave(&c);
    return rc;
}

/* pool NULL: the default pool of the current context's device. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream stream)
{
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    int ctx = -1, pool_idx = -1;
    rc = sim_current_ctx(&ctx);
    if (rc == CUDA_SUCCESS && !sim_stream_valid(stream))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS) {
        pool_idx = pool ? pool_index(pool) : sim_ctxs[ctx].dev;
        if (pool_idx < 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (!pool) /* the default pool exists implicitly */
            sim_pools[pool_idx] = (struct sim_pool){ SIM_POOL_MAGIC, 1, pool_idx, 1 };
    }
    struct sim_alloc *a = NULL;
    if (rc == CUDA_SUCCESS)
        rc = sim_alloc_new(&c, ctx, sim_pools[pool_idx].dev, SIM_KIND_POOL, size, 0, 0, &a);
    if (rc == CUDA_SUCCESS) {
        a->link = (uint64_t)pool_idx;
        *dptr = a->va;
    }
    sim_leave(&c);
    return rc;
}

SIM_API cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, hStream);
}

SIM_API cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, hStream);
}

SIM_API cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, pool, hStream);
}

SIM_API cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, pool, hStream);
}

static CUresult free_async(CUdeviceptr dptr, CUstream stream)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_alloc *a = sim_alloc_at(&c, dptr, SIM_MASK(SIM_KIND_POOL));
    if (!sim_stream_valid(stream))
        rc = CUDA_ERROR_INVALID_HANDLE;
    else if (a)
        sim_alloc_drop(c.st, a);
    else if (!sim_graph_mem_free(&c, dptr)) /* or a graph allocation */
        rc = CUDA_ERROR_INVALID_VALUE;
    sim_leave(&c);
    return rc;
}

SIM_API cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream);
}

SIM_API cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream);
}
