/* The tenant's own waits for its work. Where a limited thread's busy
 * interval ends at one, a marker recorded there measures the interval whole
 * (gs_compute_tenant_sync), so that its launches need no marker each. With
 * no compute limit configured each wrapper is one predictable branch and a
 * tail call into the driver. */
#include "compute_limiter.h"
#include "real_driver.h"

#define SYNC(real, stream, whole_context, call)                                                                        \
    do {                                                                                                               \
        if (GS_UNLIKELY(!(real)))                                                                                      \
            return CUDA_ERROR_NOT_FOUND;                                                                               \
        if (GS_UNLIKELY(__atomic_load_n(&gs_compute_state, __ATOMIC_RELAXED) == GS_COMPUTE_ON))                        \
            gs_compute_tenant_sync((stream), (whole_context));                                                         \
        return call;                                                                                                   \
    } while (0)

CUresult cuStreamSynchronize(CUstream s)
{
    gs_pfn_cuStreamSynchronize real = GS_REAL_CU(cuStreamSynchronize);
    SYNC(real, s, 0, real(s));
}

CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    gs_pfn_cuStreamSynchronize_ptsz real = GS_REAL_CU(cuStreamSynchronize_ptsz);
    SYNC(real, s, 0, real(s));
}

CUresult cuCtxSynchronize(void)
{
    gs_pfn_cuCtxSynchronize real = GS_REAL_CU(cuCtxSynchronize);
    SYNC(real, NULL, 1, real());
}

/* What cuGetProcAddress hands a CUDA 13 runtime for "cuCtxSynchronize"
 * (an H200's driver 580: cudaDeviceSynchronize comes here). A ctx other
 * than the current one costs at most a marker that waits for nothing. */
CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    gs_pfn_cuCtxSynchronize_v2 real = GS_REAL_CU(cuCtxSynchronize_v2);
    SYNC(real, NULL, 1, real(ctx));
}
