/* Every launch path, throttled by the compute limiter (compute_limiter.c).
 * With no compute limit configured each wrapper is one predictable branch
 * and a tail call into the driver. A collective's kernel is never held back
 * (its peers would spin for it) and is charged apart (compute_collective.c). */
#include "compute_capture.h"
#include "compute_collective.h"
#include "compute_graphs.h"
#include "compute_limiter.h"
#include "real_driver.h"

/* No driver entry point: not found; no compute limit: straight to the driver. */
#define PASS_UNLESS_LIMITED(real, call)                                                                                \
    do {                                                                                                               \
        if (GS_UNLIKELY(!(real)))                                                                                      \
            return CUDA_ERROR_NOT_FOUND;                                                                               \
        if (GS_LIKELY(__atomic_load_n(&gs_compute_state, __ATOMIC_RELAXED) == GS_COMPUTE_OFF))                         \
            return call;                                                                                               \
    } while (0)

/* The gate around a launch on stream (graph: a CUDA graph's), once a
 * compute limit may be on. */
#define GATE(stream, graph, call)                                                                                      \
    do {                                                                                                               \
        int d_ = gs_compute_before((stream), (graph));                                                                 \
        if (GS_UNLIKELY(d_ == GS_COMPUTE_REFUSED))                                                                     \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                                           \
        CUresult rc_ = call;                                                                                           \
        if (d_ >= 0)                                                                                                   \
            gs_compute_after(d_, (stream), rc_, (graph));                                                              \
        return rc_;                                                                                                    \
    } while (0)

/* A graph launch: one launch for all of its kernels (compute_limiter.c
 * measures the work around it apart). One that holds a collective is also
 * measured as one, once the gate has let it through (compute_graphs.h). */
#define GATED_GRAPH(real, g, stream, call)                                                                             \
    do {                                                                                                               \
        PASS_UNLESS_LIMITED(real, call);                                                                               \
        int d_ = gs_compute_before((stream), 1);                                                                       \
        if (GS_UNLIKELY(d_ == GS_COMPUTE_REFUSED))                                                                     \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                                           \
        int t_ =                                                                                                       \
            d_ >= 0 && gs_compute_graph_exec_collective(g) ? gs_compute_collective_graph_before((g), (stream)) : -1;   \
        CUresult rc_ = call;                                                                                           \
        if (t_ >= 0)                                                                                                   \
            gs_compute_collective_after(t_, (stream), rc_);                                                            \
        if (d_ >= 0)                                                                                                   \
            gs_compute_after(d_, (stream), rc_, 1);                                                                    \
        return rc_;                                                                                                    \
    } while (0)

/* A kernel launch of f with `blocks` blocks: a collective's is measured,
 * never gated by windows (only held while its container owes much). */
#define GATED_KERNEL(real, f, blocks, stream, call)                                                                    \
    do {                                                                                                               \
        PASS_UNLESS_LIMITED(real, call);                                                                               \
        if (GS_UNLIKELY(gs_compute_is_collective(f))) {                                                                \
            if (GS_UNLIKELY(gs_compute_collective_hold() == GS_COMPUTE_REFUSED))                                       \
                return CUDA_ERROR_OUT_OF_MEMORY;                                                                       \
            int t_ = gs_compute_collective_before((f), (blocks), (stream));                                            \
            CUresult rc_ = call;                                                                                       \
            if (t_ >= 0)                                                                                               \
                gs_compute_collective_after(t_, (stream), rc_);                                                        \
            return rc_;                                                                                                \
        }                                                                                                              \
        GATE(stream, 0, call);                                                                                         \
    } while (0)

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params, void **extra)
{
    gs_pfn_cuLaunchKernel real = GS_REAL_CU(cuLaunchKernel);
    GATED_KERNEL(real, f, gx * gy * gz, s, real(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra));
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                             unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params,
                             void **extra)
{
    gs_pfn_cuLaunchKernel_ptsz real = GS_REAL_CU(cuLaunchKernel_ptsz);
    GATED_KERNEL(real, f, gx * gy * gz, s, real(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra));
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
    gs_pfn_cuLaunchKernelEx real = GS_REAL_CU(cuLaunchKernelEx);
    GATED_KERNEL(real, f, config ? config->gridDimX * config->gridDimY * config->gridDimZ : 0,
                 config ? config->hStream : NULL, real(config, f, params, extra));
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
    gs_pfn_cuLaunchKernelEx_ptsz real = GS_REAL_CU(cuLaunchKernelEx_ptsz);
    GATED_KERNEL(real, f, config ? config->gridDimX * config->gridDimY * config->gridDimZ : 0,
                 config ? config->hStream : NULL, real(config, f, params, extra));
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                   unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params)
{
    gs_pfn_cuLaunchCooperativeKernel real = GS_REAL_CU(cuLaunchCooperativeKernel);
    GATED_KERNEL(real, f, gx * gy * gz, s, real(f, gx, gy, gz, bx, by, bz, shmem, s, params));
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                                        CUstream s, void **params)
{
    gs_pfn_cuLaunchCooperativeKernel_ptsz real = GS_REAL_CU(cuLaunchCooperativeKernel_ptsz);
    GATED_KERNEL(real, f, gx * gy * gz, s, real(f, gx, gy, gz, bx, by, bz, shmem, s, params));
}

CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
    gs_pfn_cuGraphLaunch real = GS_REAL_CU(cuGraphLaunch);
    GATED_GRAPH(real, g, s, real(g, s));
}

CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
    gs_pfn_cuGraphLaunch_ptsz real = GS_REAL_CU(cuGraphLaunch_ptsz);
    GATED_GRAPH(real, g, s, real(g, s));
}

/* Stream capture: counted so that the limiter leaves the process's streams
 * alone while any capture is open (compute_limiter.c). */
#define CAPTURE_BEGIN(real, stream, call)                                                                              \
    do {                                                                                                               \
        if (GS_UNLIKELY(!(real)))                                                                                      \
            return CUDA_ERROR_NOT_FOUND;                                                                               \
        gs_compute_capture_prepare();                                                                                  \
        CUresult rc_ = call;                                                                                           \
        gs_compute_capture_begun((stream), rc_);                                                                       \
        return rc_;                                                                                                    \
    } while (0)

CUresult cuStreamBeginCapture(CUstream s)
{
    gs_pfn_cuStreamBeginCapture real = GS_REAL_CU(cuStreamBeginCapture);
    CAPTURE_BEGIN(real, s, real(s));
}

CUresult cuStreamBeginCapture_ptsz(CUstream s)
{
    gs_pfn_cuStreamBeginCapture_ptsz real = GS_REAL_CU(cuStreamBeginCapture_ptsz);
    CAPTURE_BEGIN(real, s, real(s));
}

CUresult cuStreamBeginCapture_v2(CUstream s, int mode)
{
    gs_pfn_cuStreamBeginCapture_v2 real = GS_REAL_CU(cuStreamBeginCapture_v2);
    CAPTURE_BEGIN(real, s, real(s, mode));
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, int mode)
{
    gs_pfn_cuStreamBeginCapture_v2_ptsz real = GS_REAL_CU(cuStreamBeginCapture_v2_ptsz);
    CAPTURE_BEGIN(real, s, real(s, mode));
}

CUresult cuStreamBeginCaptureToGraph(CUstream s, void *g, const void *deps, const void *data, size_t n, int mode)
{
    gs_pfn_cuStreamBeginCaptureToGraph real = GS_REAL_CU(cuStreamBeginCaptureToGraph);
    CAPTURE_BEGIN(real, s, real(s, g, deps, data, n, mode));
}

CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, void *g, const void *deps, const void *data, size_t n, int mode)
{
    gs_pfn_cuStreamBeginCaptureToGraph_ptsz real = GS_REAL_CU(cuStreamBeginCaptureToGraph_ptsz);
    CAPTURE_BEGIN(real, s, real(s, g, deps, data, n, mode));
}

CUresult cuStreamEndCapture(CUstream s, void **g)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuStreamEndCapture);
    CUresult rc = real(s, g);
    gs_compute_capture_ended(s, rc, g ? *g : NULL);
    return rc;
}

CUresult cuStreamEndCapture_ptsz(CUstream s, void **g)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuStreamEndCapture_ptsz);
    CUresult rc = real(s, g);
    gs_compute_capture_ended(s, rc, g ? *g : NULL);
    return rc;
}
