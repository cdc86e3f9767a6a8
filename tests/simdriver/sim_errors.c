/* Error names and strings, the export-table stub and the "future" entry point. */
#include <stddef.h>

#include "sim_cuda.h"

static const struct {
    CUresult code;
    const char *name;
    const char *text;
} k_errors[] = {
    { CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
    { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
    { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
    { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
    { CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down" },
    { CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
    { CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
    { CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid" },
    { CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
    { CUDA_ERROR_NOT_MAPPED, "CUDA_ERROR_NOT_MAPPED", "resource not mapped" },
    { CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM",
      "OS call failed or operation not supported on this OS" },
    { CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
    { CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
    { CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
    { CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed" },
    { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
    { CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
};

static CUresult lookup(CUresult error, const char **out, int want_name)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof(k_errors) / sizeof(k_errors[0]); i++) {
        if (k_errors[i].code == error) {
            *out = want_name ? k_errors[i].name : k_errors[i].text;
            return CUDA_SUCCESS;
        }
    }
    *out = NULL; /* the driver's answer for a code it does not know */
    return CUDA_ERROR_INVALID_VALUE;
}

SIM_API cuGetErrorString(CUresult error, const char **pStr)
{
    return lookup(error, pStr, 0);
}

SIM_API cuGetErrorName(CUresult error, const char **pStr)
{
    return lookup(error, pStr, 1);
}

SIM_API cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    /* The runtime's private tables are not simulated. */
    if (ppExportTable)
        *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API cuSimFutureFeature(int x, int *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = x * 2;
    return CUDA_SUCCESS;
}
