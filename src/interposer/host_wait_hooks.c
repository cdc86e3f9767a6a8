/* Work a stream queues to wait for the host (cuStreamWaitValue32/64, a
 * batch of memory operations, which may hold such waits, a host function or
 * callback, which may wait for the program's other threads or its next
 * steps, a wait for an external semaphore, which the host may signal):
 * passed through, once it is noted that the process queues such
 * work. From then on its windows' drains wait with a bound
 * (compute_drain.h): the value may be written, or the host function's wait
 * end, only after a later launch returns, and an unbounded drain in that
 * launch would wait for good. Other processes keep the driver's own wait,
 * one wake-up sooner. A graph's host, memory-operation and semaphore-wait
 * nodes are noted as it is instantiated (graph_memory_hooks.c).
 *
 * So is host memory the device reaches, once it is had (pinned or
 * registered here; managed, or host-located VMM or pool memory, where those
 * are wrapped; any host memory on a device with pageable access, at the
 * limiter's set-up): a kernel may spin on a flag there, and no API call
 * shows that wait. */
#include "host_wait_hooks.h"

#include "compute_limiter.h"
#include "log.h"
#include "real_driver.h"

#include <string.h>

/* The entry points every variant of which may queue a wait for the host: a
 * variant newer than this build is not wrapped, so its lookup notes the
 * process instead. cuda-python looks every entry point up as it loads, so a
 * driver with such a variant makes all its processes drain with the bound:
 * safe, and a wake-up dearer a drain, until the variant is wrapped. */
static const char *const host_wait_families[] = {
    "cuStreamWaitValue32", "cuStreamWaitValue64", "cuStreamBatchMemOp",
    "cuLaunchHostFunc",    "cuStreamAddCallback", "cuWaitExternalSemaphoresAsync",
    "cuMemAllocHost",      "cuMemHostAlloc",      "cuMemHostRegister",
    "cuMemAllocManaged",
};

static int of_host_wait_family(const char *name)
{
    for (size_t i = 0; i < sizeof host_wait_families / sizeof host_wait_families[0]; i++) {
        size_t n = strlen(host_wait_families[i]);
        if (!strncmp(name, host_wait_families[i], n) && (name[n] == '\0' || name[n] == '_'))
            return 1;
    }
    return 0;
}

void *gs_lookup_wrapped(const char *name, void *found)
{
    void *handed = gs_wrapper_for(found);
    /* handed == found: not wrapped, unless found is our own export (a lookup
     * through RTLD_DEFAULT finds the interposer first). */
    if (!name || !found || handed != found || !of_host_wait_family(name) || gs_is_wrapper(found))
        return handed;
    static int said; /* once said, not once read before the log level was */
    if (gs_log_threshold >= GS_LOG_INFO && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        gs_log(GS_LOG_INFO,
               "%s: the driver handed out a variant this build does not wrap; this process's drains "
               "wait with a bound from now on, as for any work that waits for its host",
               name);
    gs_compute_note_host_waits();
    return handed;
}

#define NOTE_AND_PASS(name, call)                                                                                      \
    do {                                                                                                               \
        GS_REAL_CU_OR_NOT_FOUND(real, name);                                                                           \
        gs_compute_note_host_waits();                                                                                  \
        return call;                                                                                                   \
    } while (0)

CUresult cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    NOTE_AND_PASS(cuStreamWaitValue32, real(stream, addr, value, flags));
}

CUresult cuStreamWaitValue32_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    NOTE_AND_PASS(cuStreamWaitValue32_ptsz, real(stream, addr, value, flags));
}

CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    NOTE_AND_PASS(cuStreamWaitValue32_v2, real(stream, addr, value, flags));
}

CUresult cuStreamWaitValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    NOTE_AND_PASS(cuStreamWaitValue32_v2_ptsz, real(stream, addr, value, flags));
}

CUresult cuStreamWaitValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    NOTE_AND_PASS(cuStreamWaitValue64, real(stream, addr, value, flags));
}

CUresult cuStreamWaitValue64_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    NOTE_AND_PASS(cuStreamWaitValue64_ptsz, real(stream, addr, value, flags));
}

CUresult cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    NOTE_AND_PASS(cuStreamWaitValue64_v2, real(stream, addr, value, flags));
}

CUresult cuStreamWaitValue64_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    NOTE_AND_PASS(cuStreamWaitValue64_v2_ptsz, real(stream, addr, value, flags));
}

CUresult cuStreamBatchMemOp(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *params, unsigned int flags)
{
    NOTE_AND_PASS(cuStreamBatchMemOp, real(stream, count, params, flags));
}

CUresult cuStreamBatchMemOp_ptsz(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *params,
                                 unsigned int flags)
{
    NOTE_AND_PASS(cuStreamBatchMemOp_ptsz, real(stream, count, params, flags));
}

CUresult cuStreamBatchMemOp_v2(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *params,
                               unsigned int flags)
{
    NOTE_AND_PASS(cuStreamBatchMemOp_v2, real(stream, count, params, flags));
}

CUresult cuStreamBatchMemOp_v2_ptsz(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *params,
                                    unsigned int flags)
{
    NOTE_AND_PASS(cuStreamBatchMemOp_v2_ptsz, real(stream, count, params, flags));
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    NOTE_AND_PASS(cuLaunchHostFunc, real(hStream, fn, userData));
}

CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    NOTE_AND_PASS(cuLaunchHostFunc_ptsz, real(hStream, fn, userData));
}

CUresult cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn, void *userData, unsigned int syncMode)
{
    NOTE_AND_PASS(cuLaunchHostFunc_v2, real(hStream, fn, userData, syncMode));
}

CUresult cuLaunchHostFunc_v2_ptsz(CUstream hStream, CUhostFn fn, void *userData, unsigned int syncMode)
{
    NOTE_AND_PASS(cuLaunchHostFunc_v2_ptsz, real(hStream, fn, userData, syncMode));
}

CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
    NOTE_AND_PASS(cuStreamAddCallback, real(hStream, callback, userData, flags));
}

CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
    NOTE_AND_PASS(cuStreamAddCallback_ptsz, real(hStream, callback, userData, flags));
}

CUresult cuWaitExternalSemaphoresAsync(const CUexternalSemaphore *extSemArray,
                                       const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray, unsigned int numExtSems,
                                       CUstream stream)
{
    NOTE_AND_PASS(cuWaitExternalSemaphoresAsync, real(extSemArray, paramsArray, numExtSems, stream));
}

CUresult cuWaitExternalSemaphoresAsync_ptsz(const CUexternalSemaphore *extSemArray,
                                            const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray,
                                            unsigned int numExtSems, CUstream stream)
{
    NOTE_AND_PASS(cuWaitExternalSemaphoresAsync_ptsz, real(extSemArray, paramsArray, numExtSems, stream));
}

CUresult gs_host_memory_had(CUresult rc)
{
    if (rc == CUDA_SUCCESS)
        gs_compute_note_host_waits();
    return rc;
}

CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemAllocHost);
    return gs_host_memory_had(real(pp, bytesize));
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemAllocHost_v2);
    return gs_host_memory_had(real(pp, bytesize));
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemHostAlloc);
    return gs_host_memory_had(real(pp, bytesize, Flags));
}

CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemHostRegister);
    return gs_host_memory_had(real(p, bytesize, Flags));
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemHostRegister_v2);
    return gs_host_memory_had(real(p, bytesize, Flags));
}
