/* Every launch path, throttled by the compute limiter (compute_limiter.c).
 * With no compute limit configured each wrapper is one predictable branch
 * and a tail call into the driver. */
#include "compute_limiter.h"
#include "real_driver.h"

#define GATED(real, stream, call)                                                                  \
    do {                                                                                           \
        if (GS_UNLIKELY(!(real)))                                                                  \
            return CUDA_ERROR_NOT_FOUND;                                                           \
        if (GS_LIKELY(__atomic_load_n(&gs_compute_state, __ATOMIC_RELAXED) == GS_COMPUTE_OFF))    \
            return call;                                                                           \
        int d_ = gs_compute_before(stream);                                                        \
        CUresult rc_ = call;                                                                       \
        if (d_ >= 0)                                                                               \
            gs_compute_after(d_, (stream), rc_);                                                   \
        return rc_;                                                                                \
    } while (0)

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params,
                        void **extra)
{
    gs_pfn_cuLaunchKernel real = GS_REAL_CU(cuLaunchKernel);
    GATED(real, s, real(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra));
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                             unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params,
                             void **extra)
{
    gs_pfn_cuLaunchKernel_ptsz real = GS_REAL_CU(cuLaunchKernel_ptsz);
    GATED(real, s, real(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra));
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
    gs_pfn_cuLaunchKernelEx real = GS_REAL_CU(cuLaunchKernelEx);
    GATED(real, config ? config->hStream : NULL, real(config, f, params, extra));
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
    gs_pfn_cuLaunchKernelEx_ptsz real = GS_REAL_CU(cuLaunchKernelEx_ptsz);
    GATED(real, config ? config->hStream : NULL, real(config, f, params, extra));
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                                   CUstream s, void **params)
{
    gs_pfn_cuLaunchCooperativeKernel real = GS_REAL_CU(cuLaunchCooperativeKernel);
    GATED(real, s, real(f, gx, gy, gz, bx, by, bz, shmem, s, params));
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                                        CUstream s, void **params)
{
    gs_pfn_cuLaunchCooperativeKernel_ptsz real = GS_REAL_CU(cuLaunchCooperativeKernel_ptsz);
    GATED(real, s, real(f, gx, gy, gz, bx, by, bz, shmem, s, params));
}

CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
    gs_pfn_cuGraphLaunch real = GS_REAL_CU(cuGraphLaunch);
    GATED(real, s, real(g, s));
}

CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
    gs_pfn_cuGraphLaunch_ptsz real = GS_REAL_CU(cuGraphLaunch_ptsz);
    GATED(real, s, real(g, s));
}
