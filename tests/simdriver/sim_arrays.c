/*
 * CUDA arrays and mipmapped arrays. An array occupies
 * width x max(height,1) x max(depth,1) x channels x bytes-per-element,
 * rounded up to 2 MiB; a mipmapped array the sum of its levels, rounded once.
 * The handle is the array's fake device address.
 */
#include "sim_cuda.h"

static uint64_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

static uint64_t at_least_1(uint64_t v)
{
    return v ? v : 1;
}

/* Bytes of one array level; 0 on an invalid or overflowing description. */
static uint64_t level_bytes(uint64_t w, uint64_t h, uint64_t d, CUarray_format f, unsigned int channels)
{
    uint64_t bpe = format_bytes(f), r = 0;
    if (!w || !bpe || (channels != 1 && channels != 2 && channels != 4))
        return 0;
    if (__builtin_mul_overflow(w, at_least_1(h), &r) || __builtin_mul_overflow(r, at_least_1(d), &r) ||
        __builtin_mul_overflow(r, (uint64_t)channels * bpe, &r))
        return 0;
    return r;
}

static CUresult create(uint64_t *handle, uint64_t bytes, int kind)
{
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    int ctx = -1;
    rc = sim_current_ctx(&ctx);
    struct sim_alloc *a = NULL;
    if (rc == CUDA_SUCCESS)
        rc = sim_alloc_new(&c, ctx, sim_ctxs[ctx].dev, kind, bytes, 0, 0, &a);
    if (rc == CUDA_SUCCESS)
        *handle = a->va;
    sim_leave(&c);
    return rc;
}

static CUresult destroy(uint64_t handle, int kind)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_alloc *a = sim_alloc_at(&c, handle, SIM_MASK(kind));
    if (a)
        sim_alloc_drop(c.st, a);
    else
        rc = CUDA_ERROR_INVALID_HANDLE;
    sim_leave(&c);
    return rc;
}

static CUresult create_array(CUarray *out, uint64_t w, uint64_t h, uint64_t d, CUarray_format f, unsigned int ch)
{
    uint64_t handle = 0;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = create(&handle, level_bytes(w, h, d, f, ch), SIM_KIND_ARRAY);
    if (rc == CUDA_SUCCESS)
        *out = (CUarray)(uintptr_t)handle;
    return rc;
}

SIM_API cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    return create_array(pHandle, d->Width, d->Height, 0, d->Format, d->NumChannels);
}

SIM_API cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    return create_array(pHandle, d->Width, d->Height, 0, d->Format, d->NumChannels);
}

SIM_API cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    return create_array(pHandle, d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
}

SIM_API cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    return create_array(pHandle, d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
}

SIM_API cuArrayDestroy(CUarray hArray)
{
    return destroy((uint64_t)(uintptr_t)hArray, SIM_KIND_ARRAY);
}

SIM_API cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                               unsigned int numMipmapLevels)
{
    if (!pHandle || !d || d->Width == 0 || numMipmapLevels == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t largest = d->Width;
    if (d->Height > largest)
        largest = d->Height;
    if (d->Depth > largest)
        largest = d->Depth;
    unsigned int max_levels = 0;
    for (uint64_t v = largest; v; v >>= 1)
        max_levels++;
    if (numMipmapLevels > max_levels)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t total = 0;
    for (unsigned int l = 0; l < numMipmapLevels; l++) {
        /* Each level halves every non-zero dimension, down to 1. */
        uint64_t w = at_least_1(d->Width >> l);
        uint64_t h = d->Height ? at_least_1(d->Height >> l) : 0;
        uint64_t z = d->Depth ? at_least_1(d->Depth >> l) : 0;
        uint64_t b = level_bytes(w, h, z, d->Format, d->NumChannels);
        if (!b || __builtin_add_overflow(total, b, &total))
            return CUDA_ERROR_INVALID_VALUE;
    }
    uint64_t handle = 0;
    CUresult rc = create(&handle, total, SIM_KIND_MIPMAP);
    if (rc == CUDA_SUCCESS)
        *pHandle = (CUmipmappedArray)(uintptr_t)handle;
    return rc;
}

SIM_API cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    return destroy((uint64_t)(uintptr_t)hMipmappedArray, SIM_KIND_MIPMAP);
}
