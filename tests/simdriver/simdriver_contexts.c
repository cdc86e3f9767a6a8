/* Contexts: overhead charged per context, primary context refcounting, the
 * current context, and memory freed with its context; streams, events and
 * launches, and a stream's wait for host memory. */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "simtest.h"

static char g_path[256];

static int setup(void **state)
{
    simtest_fresh_state("contexts", g_path, sizeof(g_path));
    setenv("GPUSLICE_SIM_MEM", "4GiB", 1);
    setenv("GPUSLICE_SIM_CTX_OVERHEAD", "300MiB", 1);
    setenv("GPUSLICE_SIM_DEVICES", "2", 1);
    return cuInit(0) == CUDA_SUCCESS ? 0 : -1;
}

static int teardown(void **state)
{
    unlink(g_path);
    return 0;
}

static uint64_t nvml_used(unsigned int dev)
{
    nvmlDevice_t d;
    nvmlMemory_t m;
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(dev, &d), NVML_SUCCESS);
    assert_int_equal(nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
    return m.used;
}

static void before_any_context(void **state)
{
    CUdeviceptr p;
    size_t f, t;
    assert_int_equal(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&p, 1), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuMemGetInfo_v2(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    CUcontext cur = (CUcontext)1;
    assert_int_equal(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    assert_null(cur);
    size_t total = 0;
    assert_int_equal(cuDeviceTotalMem_v2(&total, 1), CUDA_SUCCESS);
    assert_int_equal(total, 4 * GIB);
    assert_int_equal(cuDeviceTotalMem_v2(&total, 2), CUDA_ERROR_INVALID_DEVICE);
}

static void primary_context_is_refcounted(void **state)
{
    assert_int_equal(nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nvml_used(0), 0);
    CUcontext a, b;
    assert_int_equal(cuDevicePrimaryCtxRetain(&a, 0), CUDA_SUCCESS);
    assert_int_equal(nvml_used(0), 300 * MIB);
    assert_int_equal(cuDevicePrimaryCtxRetain(&b, 0), CUDA_SUCCESS);
    assert_ptr_equal(a, b);
    assert_int_equal(nvml_used(0), 300 * MIB);
    assert_int_equal(cuCtxSetCurrent(a), CUDA_SUCCESS);
    CUdevice dev = -1;
    assert_int_equal(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    assert_int_equal(dev, 0);
    assert_int_equal(simtest_used(), 300 * MIB);
    CUdeviceptr p;
    assert_int_equal(cuMemAlloc_v2(&p, 10 * MIB), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    assert_int_equal(nvml_used(0), 310 * MIB);
    assert_int_equal(cuCtxDestroy_v2(a), CUDA_ERROR_INVALID_CONTEXT); /* primary: no */
    /* The last release destroys it, with the memory it owns. */
    assert_int_equal(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    assert_int_equal(nvml_used(0), 0);
    assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    assert_int_equal(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    /* Retaining again brings back the same handle. */
    assert_int_equal(cuDevicePrimaryCtxRetain(&b, 0), CUDA_SUCCESS);
    assert_ptr_equal(a, b);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    assert_int_equal(nvmlShutdown(), NVML_SUCCESS);
}

static void created_contexts_each_cost_overhead(void **state)
{
    assert_int_equal(nvmlInit_v2(), NVML_SUCCESS);
    CUcontext c1, c2, c3, c4;
    assert_int_equal(cuCtxCreate(&c1, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxCreate_v2(&c2, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxCreate_v3(&c3, NULL, 0, 0, 1), CUDA_SUCCESS);
    assert_int_equal(cuCtxCreate_v4(&c4, NULL, 0, 1), CUDA_SUCCESS);
    assert_int_equal(nvml_used(0), 600 * MIB);
    assert_int_equal(nvml_used(1), 600 * MIB);
    CUcontext cur;
    assert_int_equal(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    assert_ptr_equal(cur, c4); /* creation makes current */
    CUdeviceptr p;
    assert_int_equal(cuMemAlloc_v2(&p, 1), CUDA_SUCCESS);
    assert_int_equal(nvml_used(1), 602 * MIB);
    assert_int_equal(cuCtxDestroy_v2(c4), CUDA_SUCCESS);
    assert_int_equal(nvml_used(1), 300 * MIB);
    assert_int_equal(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE); /* went with its context */
    assert_int_equal(cuCtxDestroy_v2(c4), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxDestroy(c3), CUDA_SUCCESS);
    assert_int_equal(cuCtxDestroy_v2(c2), CUDA_SUCCESS);
    assert_int_equal(cuCtxDestroy_v2(c1), CUDA_SUCCESS);
    assert_int_equal(nvml_used(0), 0);
    assert_int_equal(nvml_used(1), 0);
    assert_int_equal(cuCtxCreate_v2(&c1, 0, 5), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(nvmlShutdown(), NVML_SUCCESS);
}

static void context_creation_can_run_out_of_memory(void **state)
{
    CUcontext c[20];
    int n = 0;
    CUresult rc;
    for (;;) {
        rc = cuCtxCreate_v2(&c[n], 0, 0);
        if (rc != CUDA_SUCCESS || n == 19)
            break;
        n++;
    }
    assert_int_equal(rc, CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(n, 13); /* 13 x 300 MiB fit in 4 GiB, the 14th does not */
    size_t f, t;
    assert_int_equal(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    assert_int_equal(f, 4 * GIB - 13 * 300 * MIB);
    while (n > 0)
        assert_int_equal(cuCtxDestroy_v2(c[--n]), CUDA_SUCCESS);
}

static void devices_identity(void **state)
{
    int count = 0;
    assert_int_equal(cuDeviceGetCount(&count), CUDA_SUCCESS);
    assert_int_equal(count, 2);
    CUdevice d;
    assert_int_equal(cuDeviceGet(&d, 1), CUDA_SUCCESS);
    assert_int_equal(cuDeviceGet(&d, 2), CUDA_ERROR_INVALID_DEVICE);
    CUuuid u0, u1, u1b;
    assert_int_equal(cuDeviceGetUuid(&u0, 0), CUDA_SUCCESS);
    assert_int_equal(cuDeviceGetUuid_v2(&u1, 1), CUDA_SUCCESS);
    assert_int_equal(cuDeviceGetUuid(&u1b, 1), CUDA_SUCCESS);
    assert_memory_equal(u1.bytes, u1b.bytes, 16);
    assert_memory_not_equal(u0.bytes, u1.bytes, 16);
    char name[128];
    assert_int_equal(cuDeviceGetName(name, sizeof(name), 0), CUDA_SUCCESS);
    assert_true(strlen(name) > 0);
    int sms = 0;
    assert_int_equal(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), CUDA_SUCCESS);
    assert_int_equal(sms, 132);
    int major = 0;
    assert_int_equal(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 1), CUDA_SUCCESS);
    assert_int_equal(major, 9);
    assert_int_equal(cuDeviceGetAttribute(&major, 99999, 0), CUDA_ERROR_INVALID_VALUE);
}

static void host_func(void *p)
{
    __atomic_add_fetch((int *)p, 1, __ATOMIC_SEQ_CST);
}

/* A host function that waits for its launching thread: runs off that
 * thread, and holds back what is queued after it until it returns. */
struct gated_call {
    pthread_t caller, ran_on;
    volatile int gate;
};

static void gated_func(void *p)
{
    struct gated_call *g = p;
    g->ran_on = pthread_self();
    while (!__atomic_load_n(&g->gate, __ATOMIC_ACQUIRE))
        sched_yield();
}

static void streams_events_launches(void **state)
{
    CUcontext ctx;
    assert_int_equal(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CUmodule mod;
    CUfunction f, g;
    static const char image[] = "ptx";
    assert_int_equal(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&f, mod, "k"), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&g, mod, "k"), CUDA_SUCCESS);
    assert_ptr_equal(f, g);
    CUstream s;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CUevent e0, e1;
    assert_int_equal(cuEventCreate(&e0, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&e1, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(e0, s), CUDA_SUCCESS);
    assert_int_equal(cuLaunchKernel(f, 132, 1, 1, 256, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cuLaunchKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CUlaunchConfig cfg = {
        .gridDimX = 4, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32, .blockDimY = 1, .blockDimZ = 1, .hStream = s
    };
    assert_int_equal(cuLaunchKernelEx(&cfg, f, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cuLaunchKernelEx_ptsz(&cfg, f, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cuLaunchCooperativeKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL), CUDA_SUCCESS);
    assert_int_equal(cuLaunchCooperativeKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, s, NULL), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch((CUgraphExec)(void *)&cfg, s), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch_ptsz((CUgraphExec)(void *)&cfg, s), CUDA_SUCCESS);
    int calls = 0;
    assert_int_equal(cuLaunchHostFunc(s, host_func, &calls), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc_ptsz(s, host_func, &calls), CUDA_SUCCESS);
    struct gated_call gc = { .caller = pthread_self() };
    assert_int_equal(cuLaunchHostFunc(s, gated_func, &gc), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(e1, s), CUDA_SUCCESS);
    for (int i = 0; i < 20; i++) { /* the call has not returned: the event stays pending */
        assert_int_equal(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
        usleep(1000);
    }
    __atomic_store_n(&gc.gate, 1, __ATOMIC_RELEASE);
    assert_int_equal(cuEventSynchronize(e1), CUDA_SUCCESS);
    assert_int_equal(__atomic_load_n(&calls, __ATOMIC_SEQ_CST), 2);
    assert_false(pthread_equal(gc.ran_on, gc.caller));
    float ms = -1;
    assert_int_equal(cuEventElapsedTime(&ms, e0, e1), CUDA_SUCCESS);
    assert_true(ms >= 0);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy_v2(e0), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy(e1), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy_v2(e1), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuModuleUnload(mod), CUDA_SUCCESS);
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
}

/* cuStreamWaitValue32: what is queued after the wait completes, as the host
 * sees it, only once host memory holds the value; what came before does. */
static void work_after_a_wait_for_host_memory_completes_once_the_value_holds(void **state)
{
    CUcontext ctx;
    assert_int_equal(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CUmodule mod;
    CUfunction f;
    assert_int_equal(cuModuleLoadData(&mod, "ptx"), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&f, mod, "sleep_us:10"), CUDA_SUCCESS);
    CUevent before, after;
    assert_int_equal(cuEventCreate(&before, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&after, 0), CUDA_SUCCESS);
    static volatile uint32_t flag;
    CUdeviceptr addr = (CUdeviceptr)(uintptr_t)&flag;
    assert_int_equal(cuStreamWaitValue32_v2(NULL, addr, 1, 4), CUDA_ERROR_INVALID_VALUE); /* no such compare */
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(before, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitValue32_v2(NULL, addr, 2, 0), CUDA_SUCCESS); /* GEQ 2 */
    assert_int_equal(cuEventRecord(after, NULL), CUDA_SUCCESS);               /* nothing between */
    assert_int_equal(cuEventSynchronize(before), CUDA_SUCCESS);
    struct timespec ms = { 0, 1000000 };
    nanosleep(&ms, NULL); /* the timeline is long past the 10 us kernel */
    assert_int_equal(cuEventQuery(after), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
    flag = 1;
    assert_int_equal(cuEventQuery(after), CUDA_ERROR_NOT_READY);
    flag = 2;
    assert_int_equal(cuEventQuery(after), CUDA_SUCCESS);
    flag = 0; /* passed for good */
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy_v2(before), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy_v2(after), CUDA_SUCCESS);
    assert_int_equal(cuModuleUnload(mod), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(before_any_context),
        cmocka_unit_test(primary_context_is_refcounted),
        cmocka_unit_test(created_contexts_each_cost_overhead),
        cmocka_unit_test(context_creation_can_run_out_of_memory),
        cmocka_unit_test(devices_identity),
        cmocka_unit_test(streams_events_launches),
        cmocka_unit_test(work_after_a_wait_for_host_memory_completes_once_the_value_holds),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
