/* Preloaded by the simdriver_proc_address_preloaded test: defines names the
 * sim exports, so the test can check that cuGetProcAddress still hands out
 * the sim's own functions, not these. */
#include "../../src/abi/cuda_abi.h"

__attribute__((visibility("default"))) CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
__attribute__((visibility("default"))) CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    return CUDA_ERROR_UNKNOWN;
}

__attribute__((visibility("default"))) CUresult cuLaunchKernel_ptsz(void);
__attribute__((visibility("default"))) CUresult cuLaunchKernel_ptsz(void)
{
    return CUDA_ERROR_UNKNOWN;
}
