/* cuInit and cuGetProcAddress: the doors through which CUDA runtimes
 * (cudart, PyTorch, JAX, CuPy, NCCL) find every other entry point. */
#include "host_wait_hooks.h"
#include "log.h"
#include "real_driver.h"
#include "runtime.h"

CUresult cuInit(unsigned int flags)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuInit);
    if (gs_rt_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return real(flags);
}

/* The real driver picks the ABI variant for (symbol, version, flags); we
 * only ever swap its answer for the wrapper of that very variant. */
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuGetProcAddress);
    CUresult rc = real(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS && pfn)
        *pfn = gs_lookup_wrapped(symbol, *pfn);
    return rc;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuGetProcAddress_v2);
    CUresult rc = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (rc == CUDA_SUCCESS && pfn)
        *pfn = gs_lookup_wrapped(symbol, *pfn);
    return rc;
}
