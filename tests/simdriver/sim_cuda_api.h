/*
 * Every entry point the simulated libcuda.so.1 exports, with the exact
 * driver signature. The sim's sources include it so the compiler checks each
 * definition; tests include it to call the sim directly.
 */
#ifndef GPUSLICE_SIM_CUDA_API_H
#define GPUSLICE_SIM_CUDA_API_H

#include "../../src/abi/cuda_abi.h"
#include "sim_export.h"

#define SIM_API SIM_EXPORT CUresult

/* Initialisation and devices. */
SIM_API cuInit(unsigned int flags);
SIM_API cuDriverGetVersion(int *version);
SIM_API cuDeviceGet(CUdevice *device, int ordinal);
SIM_API cuDeviceGetCount(int *count);
SIM_API cuDeviceGetName(char *name, int len, CUdevice dev);
SIM_API cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
SIM_API cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev);
SIM_API cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev);
SIM_API cuDeviceTotalMem(unsigned int *bytes, CUdevice dev);
SIM_API cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);

/* Contexts. */
SIM_API cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev);
SIM_API cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
SIM_API cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
                       CUdevice dev);
SIM_API cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags, CUdevice dev);
SIM_API cuCtxDestroy(CUcontext ctx);
SIM_API cuCtxDestroy_v2(CUcontext ctx);
SIM_API cuCtxSetCurrent(CUcontext ctx);
SIM_API cuCtxGetCurrent(CUcontext *pctx);
SIM_API cuCtxGetDevice(CUdevice *device);
SIM_API cuCtxSynchronize(void);
SIM_API cuCtxSynchronize_v2(CUcontext ctx);
SIM_API cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
SIM_API cuDevicePrimaryCtxRelease(CUdevice dev);
SIM_API cuDevicePrimaryCtxRelease_v2(CUdevice dev);
SIM_API cuDevicePrimaryCtxReset(CUdevice dev);
SIM_API cuDevicePrimaryCtxReset_v2(CUdevice dev);

/* Linear device memory. */
SIM_API cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize);
SIM_API cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
SIM_API cuMemFree(CUdeviceptr_v1 dptr);
SIM_API cuMemFree_v2(CUdeviceptr dptr);
SIM_API cuMemGetInfo(unsigned int *free, unsigned int *total);
SIM_API cuMemGetInfo_v2(size_t *free, size_t *total);
SIM_API cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes, unsigned int Height,
                        unsigned int ElementSizeBytes);
SIM_API cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                           unsigned int ElementSizeBytes);
SIM_API cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize, CUdeviceptr_v1 dptr);
SIM_API cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr);
SIM_API cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
SIM_API cuMemAllocHost(void **pp, unsigned int bytesize);
SIM_API cuMemAllocHost_v2(void **pp, size_t bytesize);
SIM_API cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags);
SIM_API cuMemFreeHost(void *p);
SIM_API cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags);
SIM_API cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags);
SIM_API cuMemHostUnregister(void *p);

/* Arrays. */
SIM_API cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray);
SIM_API cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray);
SIM_API cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray);
SIM_API cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray);
SIM_API cuArrayDestroy(CUarray hArray);
SIM_API cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pDesc,
                               unsigned int numMipmapLevels);
SIM_API cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray);

/* Virtual memory management. */
SIM_API cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                    unsigned long long flags);
SIM_API cuMemRelease(CUmemGenericAllocationHandle handle);
SIM_API cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                      CUmemAllocationGranularity_flags option);
SIM_API cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                            unsigned long long flags);
SIM_API cuMemAddressFree(CUdeviceptr ptr, size_t size);
SIM_API cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                 unsigned long long flags);
SIM_API cuMemUnmap(CUdeviceptr ptr, size_t size);
SIM_API cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count);
SIM_API cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr);

/* Stream-ordered allocation. */
SIM_API cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
SIM_API cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
SIM_API cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);
SIM_API cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
SIM_API cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
SIM_API cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
SIM_API cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps);
SIM_API cuMemPoolDestroy(CUmemoryPool pool);
SIM_API cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev);
SIM_API cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep);

/* IPC. */
SIM_API cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr);
SIM_API cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags);
SIM_API cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags);
SIM_API cuIpcCloseMemHandle(CUdeviceptr dptr);

/* Streams, events, modules, launches. */
SIM_API cuStreamCreate(CUstream *phStream, unsigned int Flags);
SIM_API cuStreamDestroy(CUstream hStream);
SIM_API cuStreamDestroy_v2(CUstream hStream);
SIM_API cuStreamSynchronize(CUstream hStream);
SIM_API cuStreamSynchronize_ptsz(CUstream hStream);
SIM_API cuEventCreate(CUevent *phEvent, unsigned int Flags);
SIM_API cuEventRecord(CUevent hEvent, CUstream hStream);
SIM_API cuEventSynchronize(CUevent hEvent);
SIM_API cuEventQuery(CUevent hEvent);
SIM_API cuStreamQuery(CUstream hStream);
SIM_API cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, uint32_t value, unsigned int flags);
SIM_API cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, uint32_t value, unsigned int flags);
/* Sim only: an executable graph of count launches of f. */
SIM_API gpusliceSimGraphCreate(CUgraphExec *out, CUfunction f, unsigned int count);
/* Sim only: the same, gap_us of idle device time between consecutive launches. */
SIM_API gpusliceSimGraphCreateGaps(CUgraphExec *out, CUfunction f, unsigned int count, unsigned long long gap_us);
SIM_API cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);
SIM_API cuEventDestroy(CUevent hEvent);
SIM_API cuEventDestroy_v2(CUevent hEvent);
SIM_API cuModuleLoadData(CUmodule *module, const void *image);
SIM_API cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
SIM_API cuModuleUnload(CUmodule hmod);
SIM_API cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions, void **jitOptionsValues,
                          unsigned int numJitOptions, CUlibraryOption *libraryOptions, void **libraryOptionValues,
                          unsigned int numLibraryOptions);
SIM_API cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name);
SIM_API cuLibraryUnload(CUlibrary library);
SIM_API cuKernelGetName(const char **name, CUkernel hfunc);
SIM_API cuFuncGetName(const char **name, CUfunction hfunc);
SIM_API cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra);
SIM_API cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                            unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                            unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra);
SIM_API cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra);
SIM_API cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra);
SIM_API cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                  unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                  unsigned int sharedMemBytes, CUstream hStream, void **kernelParams);
SIM_API cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                       unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                       unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                       void **kernelParams);
SIM_API cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream);
SIM_API cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);
SIM_API cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData);
SIM_API cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData);
SIM_API cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn, void *userData, unsigned int syncMode);
SIM_API cuLaunchHostFunc_v2_ptsz(CUstream hStream, CUhostFn fn, void *userData, unsigned int syncMode);
SIM_API cuLaunchHostFunc_v99(CUstream hStream, CUhostFn fn, void *userData, unsigned int syncMode);

/* Errors, entry points, extras. */
SIM_API cuGetErrorString(CUresult error, const char **pStr);
SIM_API cuGetErrorName(CUresult error, const char **pStr);
SIM_API cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId);
SIM_API cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
SIM_API cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *symbolStatus);
/* Stands for an entry point newer than the interposer: *out = x * 2. */
SIM_API cuSimFutureFeature(int x, int *out);

/* Stream capture (sim_capture.c). Mode: 0 global, 1 thread-local, 2 relaxed.
 * Status: 0 none, 1 active, 2 invalidated. The sim's CUgraph is its
 * executable graph; cuGraphInstantiateWithFlags hands it back. */
#define SIM_ERR_CAPTURE_UNSUPPORTED ((CUresult)900)
#define SIM_ERR_CAPTURE_INVALIDATED ((CUresult)901)
#define SIM_ERR_CAPTURED_EVENT ((CUresult)907)
#define SIM_ERR_ILLEGAL_STATE ((CUresult)401)
SIM_API cuStreamBeginCapture(CUstream hStream);
SIM_API cuStreamBeginCapture_ptsz(CUstream hStream);
SIM_API cuStreamBeginCapture_v2(CUstream hStream, int mode);
SIM_API cuStreamBeginCapture_v2_ptsz(CUstream hStream, int mode);
SIM_API cuStreamEndCapture(CUstream hStream, CUgraph *phGraph);
SIM_API cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
SIM_API cuStreamIsCapturing(CUstream hStream, int *captureStatus);
SIM_API cuStreamIsCapturing_ptsz(CUstream hStream, int *captureStatus);
SIM_API cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const void *dependencies,
                                    const void *dependencyData, size_t numDependencies, int mode);
SIM_API cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const void *dependencies,
                                         const void *dependencyData, size_t numDependencies, int mode);
SIM_API cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags);

/* Graph memory nodes (sim_graph_memory.c). */
SIM_API cuGraphCreate(CUgraph *phGraph, unsigned int flags);
SIM_API cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                           size_t bufferSize);
SIM_API cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                              size_t bufferSize);
SIM_API cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                               size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams);
SIM_API cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                              size_t numDependencies, CUdeviceptr dptr);
SIM_API cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes);
SIM_API cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                       size_t numDependencies, CUgraphNodeParams *nodeParams);
SIM_API cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph);
SIM_API cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type);
SIM_API cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out);
SIM_API cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out);
SIM_API cuGraphDestroy(CUgraph hGraph);
SIM_API cuGraphExecDestroy(CUgraphExec hGraphExec);
SIM_API cuDeviceGraphMemTrim(CUdevice device);

/* Sharing VMM allocations (sim_vmm.c): POSIX file descriptors only. */
SIM_API cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                     CUmemAllocationHandleType handleType, unsigned long long flags);
SIM_API cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                       CUmemAllocationHandleType shHandleType);
SIM_API cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle);

#endif
