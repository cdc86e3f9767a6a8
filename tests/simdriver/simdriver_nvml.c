/* NVML: init nesting, identity matching CUDA, memory v1/v2, process lists
 * (v1, v2, v3) with NVML's capacity/INSUFFICIENT_SIZE contract, the power
 * fields. */
#include <string.h>
#include <sys/wait.h>

#include "simtest.h"

static char g_path[256];
static nvmlDevice_t g_dev;

static int setup(void **state)
{
    simtest_fresh_state("nvml", g_path, sizeof(g_path));
    setenv("GPUSLICE_SIM_MEM", "10GiB", 1);
    setenv("GPUSLICE_SIM_CTX_OVERHEAD", "256MiB", 1);
    if (nvmlInit_v2() != NVML_SUCCESS || cuInit(0) != CUDA_SUCCESS ||
        nvmlDeviceGetHandleByIndex_v2(0, &g_dev) != NVML_SUCCESS)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    nvmlShutdown();
    unlink(g_path);
    return 0;
}

static void init_nests_and_guards_calls(void **state)
{
    unsigned int n = 0;
    assert_int_equal(nvmlInit(), NVML_SUCCESS);
    assert_int_equal(nvmlInitWithFlags(0), NVML_SUCCESS);
    assert_int_equal(nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(nvmlDeviceGetCount_v2(&n), NVML_SUCCESS); /* still one init left */
    assert_int_equal(n, 1);
    assert_int_equal(nvmlDeviceGetCount(&n), NVML_SUCCESS);
    assert_int_equal(nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(nvmlInit_v2(), NVML_SUCCESS);
    assert_string_equal(nvmlErrorString(NVML_ERROR_INSUFFICIENT_SIZE), "Insufficient Size");
}

static void identity_matches_cuda(void **state)
{
    char uuid[NVML_DEVICE_UUID_BUFFER_SIZE], name[NVML_DEVICE_NAME_BUFFER_SIZE];
    char drv[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    assert_int_equal(nvmlDeviceGetUUID(g_dev, uuid, sizeof(uuid)), NVML_SUCCESS);
    assert_string_equal(uuid, "GPU-00000000-5151-0000-0000-000000000000");
    CUuuid cu;
    assert_int_equal(cuDeviceGetUuid_v2(&cu, 0), CUDA_SUCCESS);
    char from_cuda[64];
    const unsigned char *b = (const unsigned char *)cu.bytes;
    snprintf(from_cuda, sizeof(from_cuda), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    assert_string_equal(uuid, from_cuda);
    nvmlDevice_t again;
    assert_int_equal(nvmlDeviceGetHandleByUUID(uuid, &again), NVML_SUCCESS);
    assert_ptr_equal(again, g_dev);
    assert_int_equal(nvmlDeviceGetHandleByUUID("GPU-nope", &again), NVML_ERROR_NOT_FOUND);
    assert_int_equal(nvmlDeviceGetUUID(g_dev, uuid, 10), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(nvmlDeviceGetName(g_dev, name, sizeof(name)), NVML_SUCCESS);
    char cu_name[128];
    assert_int_equal(cuDeviceGetName(cu_name, sizeof(cu_name), 0), CUDA_SUCCESS);
    assert_string_equal(name, cu_name);
    unsigned int idx = 9;
    assert_int_equal(nvmlDeviceGetIndex(g_dev, &idx), NVML_SUCCESS);
    assert_int_equal(idx, 0);
    assert_int_equal(nvmlSystemGetDriverVersion(drv, sizeof(drv)), NVML_SUCCESS);
    assert_true(strlen(drv) > 0);
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(1, &again), NVML_ERROR_INVALID_ARGUMENT);
}

static void memory_info_v1_and_v2(void **state)
{
    CUcontext ctx;
    assert_int_equal(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CUdeviceptr p;
    assert_int_equal(cuMemAlloc_v2(&p, 100 * MIB), CUDA_SUCCESS);
    nvmlMemory_t m1;
    assert_int_equal(nvmlDeviceGetMemoryInfo(g_dev, &m1), NVML_SUCCESS);
    assert_int_equal(m1.total, 10 * GIB);
    assert_int_equal(m1.used, 356 * MIB);
    assert_int_equal(m1.free, 10 * GIB - 356 * MIB);
    nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
    assert_int_equal(nvmlDeviceGetMemoryInfo_v2(g_dev, &m2), NVML_SUCCESS);
    assert_int_equal(m2.total, 10 * GIB);
    assert_int_equal(m2.used, 356 * MIB);
    assert_int_equal(m2.free + m2.used + m2.reserved, m2.total);
    m2.version = NVML_STRUCT_VERSION(sizeof(nvmlMemory_v2_t), 1);
    assert_int_equal(nvmlDeviceGetMemoryInfo_v2(g_dev, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    assert_int_equal(nvmlDeviceGetMemoryInfo(g_dev, &m1), NVML_SUCCESS);
    assert_int_equal(m1.used, 0);
}

static void process_lists_and_capacity(void **state)
{
    CUcontext ctx;
    assert_int_equal(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CUdeviceptr p;
    assert_int_equal(cuMemAlloc_v2(&p, 3 * MIB), CUDA_SUCCESS);
    int ready[2], go[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(go), 0);
    pid_t child = fork();
    if (child == 0) {
        CUcontext c;
        char x = 1;
        close(go[1]);
        CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
        CHILD_CHECK(cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS);
        CHILD_CHECK(write(ready[1], &x, 1) == 1);
        while (read(go[0], &x, 1) > 0) {
        }
        _exit(0);
    }
    close(go[0]);
    char x;
    assert_int_equal(read(ready[0], &x, 1), 1);

    /* Capacity 0 and NULL: how many there are. */
    unsigned int n = 0;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(g_dev, &n, NULL), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 2);
    nvmlProcessInfo_t info[4];
    n = 1;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v2(g_dev, &n, info), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 2);
    n = 4;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(g_dev, &n, info), NVML_SUCCESS);
    assert_int_equal(n, 2);
    int seen_self = 0, seen_child = 0;
    for (unsigned int i = 0; i < n; i++) {
        if (info[i].pid == (unsigned int)getpid()) {
            seen_self = 1;
            assert_int_equal(info[i].usedGpuMemory, 256 * MIB + 4 * MIB);
        } else if (info[i].pid == (unsigned int)child) {
            seen_child = 1;
            assert_int_equal(info[i].usedGpuMemory, 256 * MIB);
        }
        assert_int_equal(info[i].gpuInstanceId, 0xFFFFFFFFU);
    }
    assert_true(seen_self && seen_child);
    nvmlProcessInfo_v1_t v1[4];
    n = 4;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses(g_dev, &n, v1), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_true(v1[0].usedGpuMemory + v1[1].usedGpuMemory == 516 * MIB);
    n = 0;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses(g_dev, &n, v1), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 2);

    close(go[1]);
    close(ready[0]);
    close(ready[1]);
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    n = 4;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(g_dev, &n, info), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    n = 4;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(g_dev, &n, info), NVML_SUCCESS);
    assert_int_equal(n, 0);
}

static void utilization_is_empty_for_now(void **state)
{
    nvmlUtilization_t u = { 7, 7 };
    assert_int_equal(nvmlDeviceGetUtilizationRates(g_dev, &u), NVML_SUCCESS);
    assert_int_equal(u.gpu, 0);
    nvmlProcessUtilizationSample_t s[2];
    unsigned int n = 2;
    assert_int_equal(nvmlDeviceGetProcessUtilization(g_dev, s, &n, 0), NVML_ERROR_NOT_FOUND);
    assert_int_equal(n, 0);
}

/* The power fields: the one-second mean as nvmlDeviceGetPowerUsage gives it
 * and the instantaneous draw of a device without work (80 W not yet used,
 * 100 W idle once a sample period has passed); any other field answers
 * NOT_SUPPORTED in its own nvmlReturn, the call itself succeeding. */
static void power_fields(void **state)
{
    nvmlFieldValue_t v[3] = { { .fieldId = NVML_FI_DEV_POWER_AVERAGE },
                              { .fieldId = NVML_FI_DEV_POWER_INSTANT },
                              { .fieldId = 1 } };
    unsigned int before = 0, after = 0;
    assert_int_equal(nvmlDeviceGetPowerUsage(g_dev, &before), NVML_SUCCESS);
    assert_int_equal(nvmlDeviceGetFieldValues(g_dev, 3, v), NVML_SUCCESS);
    assert_int_equal(nvmlDeviceGetPowerUsage(g_dev, &after), NVML_SUCCESS);
    assert_int_equal(v[0].nvmlReturn, NVML_SUCCESS);
    assert_in_range(v[0].value.uiVal, before < after ? before : after, before < after ? after : before);
    assert_int_equal(v[1].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(v[1].valueType, NVML_VALUE_TYPE_UNSIGNED_INT);
    assert_in_range(v[1].value.uiVal, 80000, 100000);
    assert_int_equal(v[2].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceGetFieldValues(g_dev, 1, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetFieldValues(g_dev, -1, v), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetFieldValues(NULL, 1, v), NVML_ERROR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(init_nests_and_guards_calls),  cmocka_unit_test(identity_matches_cuda),
        cmocka_unit_test(memory_info_v1_and_v2),        cmocka_unit_test(process_lists_and_capacity),
        cmocka_unit_test(utilization_is_empty_for_now), cmocka_unit_test(power_fields),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
