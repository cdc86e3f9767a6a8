/*
 * cuGetProcAddress, driven by one table: for each base name, the variants
 * with the CUDA version from which each one is what the driver returns (as
 * measured on the real driver), and which are per-thread-default-stream
 * (_ptsz) variants. A lookup picks, among the variants of the requested
 * stream flavour, the one with the highest version <= cudaVersion.
 *
 * The pointers are the exported functions themselves, the very addresses
 * dlsym returns (the library is linked -Bsymbolic-functions so that a
 * preloaded interposer defining the same names cannot capture them).
 */
#include <string.h>

#include "sim_cuda.h"

struct proc_entry {
    const char *name; /* base name, as callers ask for it */
    int version;      /* first cudaVersion that gets this variant */
    int ptsz;         /* selected by CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
    void *fn;
};

#define E(name, ver, fn)                                                                                               \
    {                                                                                                                  \
        name, ver, 0, (void *)(fn)                                                                                     \
    }
#define P(name, ver, fn)                                                                                               \
    {                                                                                                                  \
        name, ver, 1, (void *)(fn)                                                                                     \
    }

static const struct proc_entry k_entries[] = {
    E("cuInit", 2000, cuInit),
    E("cuDriverGetVersion", 2020, cuDriverGetVersion),
    E("cuDeviceGet", 2000, cuDeviceGet),
    E("cuDeviceGetCount", 2000, cuDeviceGetCount),
    E("cuDeviceGetName", 2000, cuDeviceGetName),
    E("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
    E("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    E("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    E("cuDeviceTotalMem", 2000, cuDeviceTotalMem),
    E("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),

    E("cuCtxCreate", 2000, cuCtxCreate),
    E("cuCtxCreate", 3020, cuCtxCreate_v2),
    E("cuCtxCreate", 12000, cuCtxCreate_v3),
    E("cuCtxCreate", 12050, cuCtxCreate_v4),
    E("cuCtxDestroy", 2000, cuCtxDestroy),
    E("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    E("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    E("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    E("cuCtxGetDevice", 2000, cuCtxGetDevice),
    E("cuCtxSynchronize", 2000, cuCtxSynchronize),
    E("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),
    E("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    E("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    E("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    E("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset),
    E("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),

    E("cuMemAlloc", 2000, cuMemAlloc),
    E("cuMemAlloc", 3020, cuMemAlloc_v2),
    E("cuMemFree", 2000, cuMemFree),
    E("cuMemFree", 3020, cuMemFree_v2),
    E("cuMemGetInfo", 2000, cuMemGetInfo),
    E("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    E("cuMemAllocPitch", 2000, cuMemAllocPitch),
    E("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    E("cuMemGetAddressRange", 2000, cuMemGetAddressRange),
    E("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    E("cuMemAllocManaged", 6000, cuMemAllocManaged),
    E("cuMemAllocHost", 2000, cuMemAllocHost),
    E("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    E("cuMemHostAlloc", 2020, cuMemHostAlloc),
    E("cuMemFreeHost", 2000, cuMemFreeHost),
    E("cuMemHostRegister", 4000, cuMemHostRegister),
    E("cuMemHostRegister", 6050, cuMemHostRegister_v2),
    E("cuMemHostUnregister", 4000, cuMemHostUnregister),

    E("cuArrayCreate", 2000, cuArrayCreate),
    E("cuArrayCreate", 3020, cuArrayCreate_v2),
    E("cuArray3DCreate", 2000, cuArray3DCreate),
    E("cuArray3DCreate", 3020, cuArray3DCreate_v2),
    E("cuArrayDestroy", 2000, cuArrayDestroy),
    E("cuMipmappedArrayCreate", 5000, cuMipmappedArrayCreate),
    E("cuMipmappedArrayDestroy", 5000, cuMipmappedArrayDestroy),

    E("cuMemCreate", 10020, cuMemCreate),
    E("cuMemRelease", 10020, cuMemRelease),
    E("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    E("cuMemAddressReserve", 10020, cuMemAddressReserve),
    E("cuMemAddressFree", 10020, cuMemAddressFree),
    E("cuMemMap", 10020, cuMemMap),
    E("cuMemUnmap", 10020, cuMemUnmap),
    E("cuMemSetAccess", 10020, cuMemSetAccess),
    E("cuMemRetainAllocationHandle", 11000, cuMemRetainAllocationHandle),
    E("cuMemExportToShareableHandle", 10020, cuMemExportToShareableHandle),
    E("cuMemImportFromShareableHandle", 10020, cuMemImportFromShareableHandle),
    E("cuMemGetAllocationPropertiesFromHandle", 10020, cuMemGetAllocationPropertiesFromHandle),

    E("cuMemAllocAsync", 11020, cuMemAllocAsync),
    P("cuMemAllocAsync", 11020, cuMemAllocAsync_ptsz),
    E("cuMemFreeAsync", 11020, cuMemFreeAsync),
    P("cuMemFreeAsync", 11020, cuMemFreeAsync_ptsz),
    E("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    P("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync_ptsz),
    E("cuMemPoolCreate", 11020, cuMemPoolCreate),
    E("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    E("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    E("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),

    E("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    E("cuIpcOpenMemHandle", 4010, cuIpcOpenMemHandle),
    E("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
    E("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),

    E("cuStreamCreate", 2000, cuStreamCreate),
    E("cuStreamDestroy", 2000, cuStreamDestroy),
    E("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    E("cuStreamSynchronize", 2000, cuStreamSynchronize),
    P("cuStreamSynchronize", 7000, cuStreamSynchronize_ptsz),
    E("cuStreamWaitValue32", 8000, cuStreamWaitValue32),
    E("cuStreamWaitValue32", 12000, cuStreamWaitValue32_v2),
    E("cuEventCreate", 2000, cuEventCreate),
    E("cuEventRecord", 2000, cuEventRecord),
    E("cuEventSynchronize", 2000, cuEventSynchronize),
    E("cuEventElapsedTime", 2000, cuEventElapsedTime),
    E("cuEventDestroy", 2000, cuEventDestroy),
    E("cuEventDestroy", 4000, cuEventDestroy_v2),
    E("cuModuleLoadData", 2000, cuModuleLoadData),
    E("cuModuleGetFunction", 2000, cuModuleGetFunction),
    E("cuModuleUnload", 2000, cuModuleUnload),
    E("cuLibraryLoadData", 12000, cuLibraryLoadData),
    E("cuLibraryGetKernel", 12000, cuLibraryGetKernel),
    E("cuLibraryUnload", 12000, cuLibraryUnload),
    E("cuKernelGetName", 12030, cuKernelGetName),
    E("cuFuncGetName", 12030, cuFuncGetName),

    E("cuLaunchKernel", 4000, cuLaunchKernel),
    P("cuLaunchKernel", 4000, cuLaunchKernel_ptsz),
    E("cuLaunchKernelEx", 11060, cuLaunchKernelEx),
    P("cuLaunchKernelEx", 11060, cuLaunchKernelEx_ptsz),
    E("cuLaunchCooperativeKernel", 9000, cuLaunchCooperativeKernel),
    P("cuLaunchCooperativeKernel", 9000, cuLaunchCooperativeKernel_ptsz),
    E("cuGraphLaunch", 10000, cuGraphLaunch),
    P("cuGraphLaunch", 10000, cuGraphLaunch_ptsz),
    E("cuGraphCreate", 10000, cuGraphCreate),
    E("cuGraphAddMemAllocNode", 11040, cuGraphAddMemAllocNode),
    E("cuGraphAddMemFreeNode", 11040, cuGraphAddMemFreeNode),
    E("cuGraphGetNodes", 10000, cuGraphGetNodes),
    E("cuGraphAddNode", 12020, cuGraphAddNode),
    E("cuGraphChildGraphNodeGetGraph", 10000, cuGraphChildGraphNodeGetGraph),
    E("cuGraphNodeGetType", 10000, cuGraphNodeGetType),
    E("cuGraphMemAllocNodeGetParams", 11040, cuGraphMemAllocNodeGetParams),
    E("cuGraphMemFreeNodeGetParams", 11040, cuGraphMemFreeNodeGetParams),
    /* As measured on driver 580: "cuGraphInstantiate" stays the 5-argument
     * ABI at every version (cuda.h's rename to ...WithFlags is the header's). */
    E("cuGraphInstantiate", 10000, cuGraphInstantiate),
    E("cuGraphInstantiate", 11000, cuGraphInstantiate_v2),
    E("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    E("cuGraphDestroy", 10000, cuGraphDestroy),
    E("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
    E("cuDeviceGraphMemTrim", 11040, cuDeviceGraphMemTrim),
    E("cuLaunchHostFunc", 10000, cuLaunchHostFunc),
    P("cuLaunchHostFunc", 10000, cuLaunchHostFunc_ptsz),
    E("cuLaunchHostFunc", 13010, cuLaunchHostFunc_v2),
    P("cuLaunchHostFunc", 13010, cuLaunchHostFunc_v2_ptsz),
    E("cuLaunchHostFunc", 13090, cuLaunchHostFunc_v99), /* newer than the interposer */

    E("cuGetErrorString", 6000, cuGetErrorString),
    E("cuGetErrorName", 6000, cuGetErrorName),
    E("cuGetExportTable", 3000, cuGetExportTable),
    E("cuGetProcAddress", 11030, cuGetProcAddress),
    E("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    E("cuSimFutureFeature", 13000, cuSimFutureFeature),
};

static CUresult resolve(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult *status)
{
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult rc = CUDA_ERROR_NOT_FOUND;
    const struct proc_entry *best = NULL;
    if (!symbol || !pfn ||
        (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    *pfn = NULL;
    const size_t n = sizeof(k_entries) / sizeof(k_entries[0]);
    int known = 0, has_ptsz = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(k_entries[i].name, symbol) == 0) {
            known = 1;
            has_ptsz |= k_entries[i].ptsz;
        }
    }
    if (!known)
        goto out;
    /* Functions without a _ptsz variant answer the per-thread flag with the plain one. */
    int want_ptsz = has_ptsz && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    for (size_t i = 0; i < n; i++) {
        const struct proc_entry *e = &k_entries[i];
        if (strcmp(e->name, symbol) == 0 && e->ptsz == want_ptsz && e->version <= cuda_version &&
            (!best || e->version > best->version))
            best = e;
    }
    if (!best) {
        st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        goto out;
    }
    *pfn = best->fn;
    st = CU_GET_PROC_ADDRESS_SUCCESS;
    rc = CUDA_SUCCESS;
out:
    if (status)
        *status = st;
    return rc;
}

SIM_API cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return resolve(symbol, pfn, cudaVersion, flags, NULL);
}

SIM_API cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *symbolStatus)
{
    return resolve(symbol, pfn, cudaVersion, flags, symbolStatus);
}
