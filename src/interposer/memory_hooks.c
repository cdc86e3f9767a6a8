/* Every way a program takes device memory, each charged before the real
 * call and released exactly after a successful free. */
#include "../core/accounting.h"
#include "charge.h"
#include "graph_memory.h"
#include "host_wait_hooks.h"
#include "log.h"
#include "pool_hooks.h"
#include "real_driver.h"
#include "runtime.h"

/* Free through `call`; on success release exactly what (kind, handle) was
 * charged (its record taken out before the call: gs_charge_free_begin). */
#define RELEASING_CALL(kind, handle, call)                                                                             \
    do {                                                                                                               \
        struct gs_alloc_rec rec_;                                                                                      \
        int taken_ = gs_charge_free_begin((kind), (uint64_t)(handle), &rec_);                                          \
        CUresult rc_ = call;                                                                                           \
        gs_charge_free_end((kind), (uint64_t)(handle), &rec_, taken_, rc_);                                            \
        return rc_;                                                                                                    \
    } while (0)

/* A free of a device pointer: it may also be a graph allocation that
 * outlived its graph (graph_memory_hooks.c). */
#define RELEASING_PTR_CALL(dptr, call)                                                                                 \
    do {                                                                                                               \
        struct gs_alloc_rec rec_;                                                                                      \
        int taken_ = gs_charge_free_begin(GS_ALLOC_PTR, (dptr), &rec_);                                                \
        CUresult rc_ = call;                                                                                           \
        gs_charge_free_end(GS_ALLOC_PTR, (dptr), &rec_, taken_, rc_);                                                  \
        if (rc_ == CUDA_SUCCESS && gs_mode() != GS_MODE_PASSTHROUGH)                                                   \
            gs_graph_mem_freed(dptr);                                                                                  \
        return rc_;                                                                                                    \
    } while (0)

/* Charge `bytes` on region device `dev`, run `call`, keep or return. `dev`
 * is evaluated only when accounting is active. */
#define CHARGED_CALL_ON(dev, bytes, kind, handle_expr, call)                                                           \
    do {                                                                                                               \
        if (gs_mode() == GS_MODE_PASSTHROUGH)                                                                          \
            return call;                                                                                               \
        struct gs_charge c_;                                                                                           \
        CUresult rc_ = gs_charge_reserve(&c_, (dev), (bytes));                                                         \
        if (rc_ != CUDA_SUCCESS)                                                                                       \
            return rc_;                                                                                                \
        rc_ = call;                                                                                                    \
        gs_charge_commit(&c_, rc_, (kind), rc_ == CUDA_SUCCESS ? (uint64_t)(handle_expr) : 0);                         \
        return rc_;                                                                                                    \
    } while (0)

/* The common case: memory on the current context's device. */
#define CHARGED_CALL(bytes, kind, handle_expr, call)                                                                   \
    CHARGED_CALL_ON(gs_rt_dev_current(NULL), bytes, kind, handle_expr, call)

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemAlloc_v2);
    CHARGED_CALL(gs_charge_linear(bytesize), GS_ALLOC_PTR, *dptr, real(dptr, bytesize));
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemAllocPitch_v2);
    /* The pitch is chosen by the driver; 512-byte alignment bounds it. */
    uint64_t row = ((uint64_t)WidthInBytes + 511) & ~(uint64_t)511;
    uint64_t bytes = Height && row > UINT64_MAX / Height ? UINT64_MAX : row * Height;
    CHARGED_CALL(gs_charge_linear(bytes), GS_ALLOC_PTR, *dptr,
                 real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemAllocManaged);
    /* the host reaches it too: a kernel may spin on it (gs_host_memory_had) */
    if (gs_rt.cfg.managed_policy == GS_MANAGED_IGNORE)
        return gs_host_memory_had(real(dptr, bytesize, flags));
    CHARGED_CALL(gs_charge_linear(bytesize), GS_ALLOC_PTR, *dptr, gs_host_memory_had(real(dptr, bytesize, flags)));
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemFree_v2);
    RELEASING_PTR_CALL(dptr, real(dptr));
}

/* ---- the pre-3.2 ABI: 32-bit sizes and pointers, same memory, same
 * charges (a 32-bit pointer is kept zero-extended, as cuMemFree_v2 sees it) ---- */

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemAlloc);
    CHARGED_CALL(gs_charge_linear(bytesize), GS_ALLOC_PTR, *dptr, real(dptr, bytesize));
}

CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes, unsigned int Height,
                         unsigned int ElementSizeBytes)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemAllocPitch);
    uint64_t row = ((uint64_t)WidthInBytes + 511) & ~(uint64_t)511;
    CHARGED_CALL(gs_charge_linear(row * Height), GS_ALLOC_PTR, *dptr,
                 real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
}

CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemFree);
    RELEASING_CALL(GS_ALLOC_PTR, dptr, real(dptr));
}

CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuArrayCreate);
    uint64_t bytes = d ? gs_charge_array(d->Width, d->Height, 1, d->NumChannels, d->Format) : 0;
    CHARGED_CALL(bytes, GS_ALLOC_ARRAY, (uintptr_t)*pHandle, real(pHandle, d));
}

CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuArray3DCreate);
    uint64_t bytes = d ? gs_charge_array(d->Width, d->Height, d->Depth, d->NumChannels, d->Format) : 0;
    CHARGED_CALL(bytes, GS_ALLOC_ARRAY, (uintptr_t)*pHandle, real(pHandle, d));
}

/* ---- arrays ---- */

CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuArrayCreate_v2);
    uint64_t bytes = d ? gs_charge_array(d->Width, d->Height, 1, d->NumChannels, d->Format) : 0;
    CHARGED_CALL(bytes, GS_ALLOC_ARRAY, (uintptr_t)*pHandle, real(pHandle, d));
}

CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuArray3DCreate_v2);
    uint64_t bytes = d ? gs_charge_array(d->Width, d->Height, d->Depth, d->NumChannels, d->Format) : 0;
    CHARGED_CALL(bytes, GS_ALLOC_ARRAY, (uintptr_t)*pHandle, real(pHandle, d));
}

CUresult cuArrayDestroy(CUarray hArray)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuArrayDestroy);
    RELEASING_CALL(GS_ALLOC_ARRAY, (uintptr_t)hArray, real(hArray));
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                unsigned int numMipmapLevels)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMipmappedArrayCreate);
    uint64_t bytes =
        d ? gs_charge_mipmapped(d->Width, d->Height, d->Depth, d->NumChannels, d->Format, numMipmapLevels) : 0;
    CHARGED_CALL(bytes, GS_ALLOC_MIPMAP, (uintptr_t)*pHandle, real(pHandle, d, numMipmapLevels));
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray h)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMipmappedArrayDestroy);
    RELEASING_CALL(GS_ALLOC_MIPMAP, (uintptr_t)h, real(h));
}

/* ---- stream-ordered allocation (charged at allocation, released when the
 * free is enqueued: the pool may keep the pages cached after that, see
 * docs/memory.md) ---- */

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemAllocAsync);
    CHARGED_CALL(gs_charge_linear(bytesize), GS_ALLOC_PTR, *dptr, real(dptr, bytesize, hStream));
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemAllocAsync_ptsz);
    CHARGED_CALL(gs_charge_linear(bytesize), GS_ALLOC_PTR, *dptr, real(dptr, bytesize, hStream));
}

/* From a pool: on the pool's device (pool_hooks.c), not the current one. */
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemAllocFromPoolAsync);
    CHARGED_CALL_ON(gs_pool_device(pool), gs_charge_linear(bytesize), GS_ALLOC_PTR, *dptr,
                    real(dptr, bytesize, pool, hStream));
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemAllocFromPoolAsync_ptsz);
    CHARGED_CALL_ON(gs_pool_device(pool), gs_charge_linear(bytesize), GS_ALLOC_PTR, *dptr,
                    real(dptr, bytesize, pool, hStream));
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemFreeAsync);
    RELEASING_PTR_CALL(dptr, real(dptr, hStream));
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemFreeAsync_ptsz);
    RELEASING_PTR_CALL(dptr, real(dptr, hStream));
}

/* ---- IPC imports: charged the size of the imported range ---- */

static CUresult ipc_open(gs_pfn_cuIpcOpenMemHandle real, CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
    if (gs_mode() == GS_MODE_PASSTHROUGH)
        return real(pdptr, handle, flags);
    CUresult rc = real(pdptr, handle, flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The size is only known once the range is mapped: map, then charge,
     * and undo the mapping if the charge does not fit. */
    gs_pfn_cuMemGetAddressRange_v2 range = GS_REAL_CU(cuMemGetAddressRange_v2);
    CUdeviceptr base = 0;
    size_t size = 0;
    if (!range || range(&base, &size, *pdptr) != CUDA_SUCCESS)
        size = 0;
    struct gs_charge c;
    CUresult crc = gs_charge_reserve(&c, gs_rt_dev_current(NULL), gs_charge_linear(size));
    if (crc != CUDA_SUCCESS) {
        gs_pfn_cuIpcCloseMemHandle close_fn = GS_REAL_CU(cuIpcCloseMemHandle);
        if (close_fn)
            close_fn(*pdptr);
        *pdptr = 0;
        return crc;
    }
    gs_charge_commit(&c, CUDA_SUCCESS, GS_ALLOC_IPC, *pdptr);
    return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuIpcOpenMemHandle);
    return ipc_open(real, pdptr, handle, Flags);
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuIpcOpenMemHandle_v2);
    return ipc_open(real, pdptr, handle, Flags);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuIpcCloseMemHandle);
    RELEASING_CALL(GS_ALLOC_IPC, dptr, real(dptr));
}
