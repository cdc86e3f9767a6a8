/*
 * cuGetProcAddress: the version/flag table as measured on the real driver,
 * statuses, and pointer identity with dlsym on the exported names.
 */
#include <dlfcn.h>
#include <string.h>

#include "simtest.h"

static void *g_lib;

static int setup(void **state)
{
    g_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return g_lib ? 0 : -1;
}

static int teardown(void **state)
{
    dlclose(g_lib);
    return 0;
}

/* Resolves through cuGetProcAddress_v2 and expects exactly the export `want`. */
static void expect(const char *base, int version, cuuint64_t flags, const char *want)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = -1;
    CUresult rc = cuGetProcAddress_v2(base, &fn, version, flags, &st);
    if (rc != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS)
        fail_msg("%s@%d flags %llu: rc %d status %d", base, version, (unsigned long long)flags, rc, st);
    void *exported = dlsym(g_lib, want);
    assert_non_null(exported);
    if (fn != exported)
        fail_msg("%s@%d flags %llu: got %p, dlsym(%s) = %p", base, version, (unsigned long long)flags, fn, want,
                 exported);
    /* The legacy 4-argument entry point answers the same. */
    void *fn4 = NULL;
    assert_int_equal(cuGetProcAddress(base, &fn4, version, flags), CUDA_SUCCESS);
    assert_ptr_equal(fn4, fn);
}

static void versioned_memory_entry_points(void **state)
{
    static const char *const names[] = { "cuMemAlloc",       "cuMemFree",       "cuMemGetInfo",
                                         "cuDeviceTotalMem", "cuMemAllocPitch", "cuMemGetAddressRange",
                                         "cuArrayCreate",    "cuArray3DCreate" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char v2[64];
        snprintf(v2, sizeof(v2), "%s_v2", names[i]);
        expect(names[i], 2000, 0, names[i]);
        expect(names[i], 3010, 0, names[i]);
        expect(names[i], 3020, 0, v2);
        expect(names[i], 12000, 0, v2);
        expect(names[i], 13000, 0, v2);
    }
}

static void context_creation_versions(void **state)
{
    expect("cuCtxCreate", 3010, 0, "cuCtxCreate");
    expect("cuCtxCreate", 3020, 0, "cuCtxCreate_v2");
    expect("cuCtxCreate", 11080, 0, "cuCtxCreate_v2");
    expect("cuCtxCreate", 12000, 0, "cuCtxCreate_v3");
    expect("cuCtxCreate", 12040, 0, "cuCtxCreate_v3");
    expect("cuCtxCreate", 12050, 0, "cuCtxCreate_v4");
    expect("cuCtxCreate", 13000, 0, "cuCtxCreate_v4");
    expect("cuCtxDestroy", 12000, 0, "cuCtxDestroy_v2");
    expect("cuDevicePrimaryCtxRelease", 10020, 0, "cuDevicePrimaryCtxRelease");
    expect("cuDevicePrimaryCtxRelease", 11000, 0, "cuDevicePrimaryCtxRelease_v2");
    expect("cuDevicePrimaryCtxReset", 10020, 0, "cuDevicePrimaryCtxReset");
    expect("cuDevicePrimaryCtxReset", 11000, 0, "cuDevicePrimaryCtxReset_v2");
    expect("cuIpcOpenMemHandle", 10020, 0, "cuIpcOpenMemHandle");
    expect("cuIpcOpenMemHandle", 12000, 0, "cuIpcOpenMemHandle_v2");
    expect("cuDeviceGetUuid", 11020, 0, "cuDeviceGetUuid");
    expect("cuDeviceGetUuid", 11040, 0, "cuDeviceGetUuid_v2");
}

static void get_proc_address_itself(void **state)
{
    expect("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
    expect("cuGetProcAddress", 11080, 0, "cuGetProcAddress");
    expect("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
    expect("cuGetProcAddress", 13000, 0, "cuGetProcAddress_v2");
}

static void per_thread_stream_flavours(void **state)
{
    static const char *const names[] = { "cuMemAllocAsync", "cuMemFreeAsync",   "cuMemAllocFromPoolAsync",
                                         "cuLaunchKernel",  "cuLaunchKernelEx", "cuLaunchCooperativeKernel",
                                         "cuGraphLaunch",   "cuLaunchHostFunc" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char ptsz[64];
        snprintf(ptsz, sizeof(ptsz), "%s_ptsz", names[i]);
        expect(names[i], 12000, CU_GET_PROC_ADDRESS_DEFAULT, names[i]);
        expect(names[i], 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, names[i]);
        expect(names[i], 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, ptsz);
    }
    /* No per-thread variant: the flag gets the plain function. */
    expect("cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemAlloc_v2");
}

static void not_found_statuses(void **state)
{
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult st = -1;
    assert_int_equal(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11010, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_null(fn);
    assert_int_equal(cuGetProcAddress_v2("cuLaunchKernelEx", &fn, 11050, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_int_equal(cuGetProcAddress_v2("cuMemCreate", &fn, 10010, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect("cuMemCreate", 10020, 0, "cuMemCreate");
    expect("cuLaunchKernelEx", 11060, 0, "cuLaunchKernelEx");
    /* cuFuncGetName came with CUDA 12.3. */
    assert_int_equal(cuGetProcAddress_v2("cuFuncGetName", &fn, 12020, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect("cuFuncGetName", 12030, 0, "cuFuncGetName");
    expect("cuFuncGetName", 13000, 0, "cuFuncGetName");

    assert_int_equal(cuGetProcAddress_v2("cuNoSuchThing", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    /* Versioned names are not base names. */
    assert_int_equal(cuGetProcAddress_v2("cuMemAlloc_v2", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_int_equal(cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(cuGetProcAddress_v2("cuInit", &fn, 13000, 4, &st), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGetProcAddress_v2(NULL, &fn, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);
}

static void future_feature_passes_through(void **state)
{
    expect("cuSimFutureFeature", 13000, 0, "cuSimFutureFeature");
    CUresult (*fn)(int, int *) = NULL;
    assert_int_equal(cuGetProcAddress_v2("cuSimFutureFeature", (void **)&fn, 13000, 0, NULL), CUDA_SUCCESS);
    int out = 0;
    assert_int_equal(fn(21, &out), CUDA_SUCCESS);
    assert_int_equal(out, 42);
}

static void every_plain_name_resolves_to_an_export(void **state)
{
    static const char *const names[] = { "cuInit",
                                         "cuDriverGetVersion",
                                         "cuDeviceGet",
                                         "cuDeviceGetCount",
                                         "cuDeviceGetName",
                                         "cuDeviceGetAttribute",
                                         "cuCtxSetCurrent",
                                         "cuCtxGetCurrent",
                                         "cuCtxGetDevice",
                                         "cuDevicePrimaryCtxRetain",
                                         "cuMemAllocManaged",
                                         "cuArrayDestroy",
                                         "cuMipmappedArrayCreate",
                                         "cuMipmappedArrayDestroy",
                                         "cuMemRelease",
                                         "cuMemGetAllocationGranularity",
                                         "cuMemAddressReserve",
                                         "cuMemAddressFree",
                                         "cuMemMap",
                                         "cuMemUnmap",
                                         "cuMemSetAccess",
                                         "cuMemPoolCreate",
                                         "cuMemPoolDestroy",
                                         "cuDeviceGetDefaultMemPool",
                                         "cuMemPoolTrimTo",
                                         "cuIpcGetMemHandle",
                                         "cuIpcCloseMemHandle",
                                         "cuStreamCreate",
                                         "cuStreamSynchronize",
                                         "cuModuleLoadData",
                                         "cuModuleGetFunction",
                                         "cuEventCreate",
                                         "cuEventRecord",
                                         "cuEventSynchronize",
                                         "cuEventElapsedTime",
                                         "cuGetErrorString",
                                         "cuGetErrorName",
                                         "cuGetExportTable" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        expect(names[i], 13000, 0, names[i]);
    expect("cuStreamDestroy", 13000, 0, "cuStreamDestroy_v2");
    expect("cuCtxSynchronize", 12090, 0, "cuCtxSynchronize"); /* as driver 580 hands them out */
    expect("cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2");
    expect("cuEventDestroy", 13000, 0, "cuEventDestroy_v2");
}

static void misc_entry_points(void **state)
{
    int v = 0;
    assert_int_equal(cuDriverGetVersion(&v), CUDA_SUCCESS);
    assert_int_equal(v, 13000);
    const void *tbl = (const void *)1;
    CUuuid id = { { 0 } };
    assert_int_equal(cuGetExportTable(&tbl, &id), CUDA_ERROR_NOT_SUPPORTED);
    const char *s = NULL;
    assert_int_equal(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
    assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
    assert_int_equal(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
    assert_string_equal(s, "out of memory");
    assert_int_equal(cuGetErrorString(12345, &s), CUDA_ERROR_INVALID_VALUE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(versioned_memory_entry_points),
        cmocka_unit_test(context_creation_versions),
        cmocka_unit_test(get_proc_address_itself),
        cmocka_unit_test(per_thread_stream_flavours),
        cmocka_unit_test(not_found_statuses),
        cmocka_unit_test(future_feature_passes_through),
        cmocka_unit_test(every_plain_name_resolves_to_an_export),
        cmocka_unit_test(misc_entry_points),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
