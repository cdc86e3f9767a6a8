/* Memory accounting of every allocation kind: granularity, charge and free. */
#include <string.h>

#include "simtest.h"

static char g_path[256];
static CUcontext g_ctx;

static int setup(void **state)
{
    simtest_fresh_state("memory", g_path, sizeof(g_path));
    setenv("GPUSLICE_SIM_MEM", "8GiB", 1);
    setenv("GPUSLICE_SIM_CTX_OVERHEAD", "512MiB", 1);
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&g_ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(g_ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    cuDevicePrimaryCtxRelease_v2(0);
    unlink(g_path);
    return 0;
}

static void small_allocations_share_2mib_chunks(void **state)
{
    uint64_t base = simtest_used();
    CUdeviceptr p[16];
    for (int i = 0; i < 16; i++)
        assert_int_equal(cuMemAlloc_v2(&p[i], 1), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 2 * MIB);
    for (int i = 1; i < 16; i++)
        assert_true(p[i] != p[i - 1]);
    for (int i = 0; i < 16; i++)
        assert_int_equal(cuMemFree_v2(p[i]), CUDA_SUCCESS);
    assert_int_equal(simtest_used(), base);

    for (int i = 0; i < 16; i++)
        assert_int_equal(cuMemAlloc_v2(&p[i], MIB), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 16 * MIB);
    /* A chunk stays charged while anything lives in it. */
    for (int i = 0; i < 16; i += 2)
        assert_int_equal(cuMemFree_v2(p[i]), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 16 * MIB);
    for (int i = 1; i < 16; i += 2)
        assert_int_equal(cuMemFree_v2(p[i]), CUDA_SUCCESS);
    assert_int_equal(simtest_used(), base);
}

static void large_allocations_round_to_2mib(void **state)
{
    uint64_t base = simtest_used();
    CUdeviceptr a, b, c;
    assert_int_equal(cuMemAlloc_v2(&a, MIB + 1), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 2 * MIB);
    assert_int_equal(cuMemAlloc_v2(&b, 3 * MIB), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 6 * MIB);
    assert_int_equal(cuMemAlloc_v2(&c, 4 * MIB), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 10 * MIB);
    assert_int_equal(a % (2 * MIB), 0);
    CUdeviceptr rb = 0;
    size_t rs = 0;
    assert_int_equal(cuMemGetAddressRange_v2(&rb, &rs, b + 100), CUDA_SUCCESS);
    assert_int_equal(rb, b);
    assert_int_equal(rs, 3 * MIB);
    assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(b), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(c), CUDA_SUCCESS);
    assert_int_equal(simtest_used(), base);
    assert_int_equal(cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE); /* double free */
    assert_int_equal(cuMemAlloc_v2(&a, 0), CUDA_ERROR_INVALID_VALUE);
}

static void out_of_memory_leaves_usage_alone(void **state)
{
    size_t free_b = 0, total = 0;
    assert_int_equal(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    assert_int_equal(total, 8 * GIB);
    uint64_t base = simtest_used();
    CUdeviceptr p;
    assert_int_equal(cuMemAlloc_v2(&p, free_b + 1), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMemAlloc_v2(&p, (size_t)-1), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(simtest_used(), base);
    assert_int_equal(cuMemAlloc_v2(&p, free_b), CUDA_SUCCESS); /* exactly fits */
    assert_int_equal(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    assert_int_equal(free_b, 0);
    CUdeviceptr q;
    assert_int_equal(cuMemAlloc_v2(&q, 1), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(simtest_used(), base);
}

static void legacy_32bit_api(void **state)
{
    uint64_t base = simtest_used();
    CUdeviceptr_v1 p = 0, q = 0;
    unsigned int pitch = 0;
    assert_int_equal(cuMemAlloc(&p, 3 * MIB), CUDA_SUCCESS);
    assert_true(p != 0);
    assert_int_equal(simtest_used() - base, 4 * MIB);
    assert_int_equal(cuMemAllocPitch(&q, &pitch, 1000, 1000, 4), CUDA_SUCCESS);
    assert_int_equal(pitch, 1024);
    assert_int_equal(simtest_used() - base, 6 * MIB); /* 1024 * 1000 <= 1 MiB: chunk */
    CUdeviceptr_v1 rb = 0;
    unsigned int rs = 0;
    assert_int_equal(cuMemGetAddressRange(&rb, &rs, p + 5), CUDA_SUCCESS);
    assert_int_equal(rb, p);
    assert_int_equal(rs, 3 * MIB);
    unsigned int f = 0, t = 0;
    assert_int_equal(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    assert_int_equal(t, 0xFFFFFFFFU); /* 8 GiB saturates 32 bits */
    unsigned int tm = 0;
    assert_int_equal(cuDeviceTotalMem(&tm, 0), CUDA_SUCCESS);
    assert_int_equal(tm, 0xFFFFFFFFU);
    assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(q), CUDA_SUCCESS); /* either ABI frees either */
    assert_int_equal(simtest_used(), base);
}

static void pitch_allocation(void **state)
{
    uint64_t base = simtest_used();
    CUdeviceptr p;
    size_t pitch = 0;
    assert_int_equal(cuMemAllocPitch_v2(&p, &pitch, 4000, 1000, 4), CUDA_SUCCESS);
    assert_int_equal(pitch, 4096);
    assert_int_equal(simtest_used() - base, 4 * MIB); /* 4096000 B -> 4 MiB */
    assert_int_equal(cuMemAllocPitch_v2(&p, &pitch, 4000, 1000, 3), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(simtest_used(), base);
}

static void arrays_and_mipmaps(void **state)
{
    uint64_t base = simtest_used();
    CUarray a2, a3, a1;
    CUDA_ARRAY_DESCRIPTOR d2 = { .Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4 };
    assert_int_equal(cuArrayCreate_v2(&a2, &d2), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 16 * MIB);
    CUDA_ARRAY3D_DESCRIPTOR d3 = {
        .Width = 100, .Height = 100, .Depth = 100, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1
    };
    assert_int_equal(cuArray3DCreate_v2(&a3, &d3), CUDA_SUCCESS); /* 1e6 B -> 2 MiB */
    assert_int_equal(simtest_used() - base, 18 * MIB);
    CUDA_ARRAY_DESCRIPTOR_v1 d1 = { .Width = 10, .Height = 0, .Format = CU_AD_FORMAT_HALF, .NumChannels = 2 };
    assert_int_equal(cuArrayCreate(&a1, &d1), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 20 * MIB);
    d2.NumChannels = 3;
    CUarray bad;
    assert_int_equal(cuArrayCreate_v2(&bad, &d2), CUDA_ERROR_INVALID_VALUE);

    /* 2048x2048 RGBA8 with 3 levels: 16 + 4 + 1 MiB = 21 MiB -> 22 MiB. */
    CUmipmappedArray m;
    CUDA_ARRAY3D_DESCRIPTOR dm = {
        .Width = 2048, .Height = 2048, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4
    };
    assert_int_equal(cuMipmappedArrayCreate(&m, &dm, 3), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 42 * MIB);
    assert_int_equal(cuMipmappedArrayCreate(&m, &dm, 13), CUDA_ERROR_INVALID_VALUE);

    assert_int_equal(cuArrayDestroy(a2), CUDA_SUCCESS);
    assert_int_equal(cuArrayDestroy(a3), CUDA_SUCCESS);
    assert_int_equal(cuArrayDestroy(a1), CUDA_SUCCESS);
    assert_int_equal(cuArrayDestroy(a1), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
    assert_int_equal(simtest_used(), base);
}

static void managed_memory_is_charged(void **state)
{
    uint64_t base = simtest_used();
    CUdeviceptr p;
    assert_int_equal(cuMemAllocManaged(&p, 1, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 2 * MIB);
    assert_int_equal(cuMemAllocManaged(&p, 1, 7), CUDA_ERROR_INVALID_VALUE);
    size_t rs = 0;
    assert_int_equal(cuMemGetAddressRange_v2(NULL, &rs, p), CUDA_SUCCESS);
    assert_int_equal(rs, 1);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(simtest_used(), base);
}

static void vmm_frees_after_release_and_unmap(void **state)
{
    uint64_t base = simtest_used();
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    size_t gran = 0;
    assert_int_equal(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    assert_int_equal(gran, 2 * MIB);
    CUmemGenericAllocationHandle h;
    assert_int_equal(cuMemCreate(&h, 3 * MIB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemCreate(&h, 4 * MIB, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 4 * MIB);
    CUdeviceptr va;
    assert_int_equal(cuMemAddressReserve(&va, 8 * MIB, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 4 * MIB); /* address space is free */
    assert_int_equal(cuMemMap(va, 4 * MIB, 0, h, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va, 4 * MIB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* overlap */
    CUmemAccessDesc acc = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    assert_int_equal(cuMemSetAccess(va, 4 * MIB, &acc, 1), CUDA_SUCCESS);
    assert_int_equal(cuMemSetAccess(va, 8 * MIB, &acc, 1), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr rb;
    size_t rs;
    assert_int_equal(cuMemGetAddressRange_v2(&rb, &rs, va + 4096), CUDA_SUCCESS);
    assert_int_equal(rb, va);
    assert_int_equal(rs, 4 * MIB);
    assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 4 * MIB); /* still mapped */
    assert_int_equal(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemUnmap(va, 4 * MIB), CUDA_SUCCESS);
    assert_int_equal(simtest_used(), base);
    assert_int_equal(cuMemAddressFree(va, 8 * MIB), CUDA_SUCCESS);
}

static void stream_ordered_pools(void **state)
{
    uint64_t base = simtest_used();
    CUstream s;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CUdeviceptr a, b, c;
    assert_int_equal(cuMemAllocAsync(&a, 1, s), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 2 * MIB);
    assert_int_equal(cuMemAllocAsync_ptsz(&b, 5 * MIB, NULL), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 8 * MIB);
    CUmemoryPool dflt, pool;
    assert_int_equal(cuDeviceGetDefaultMemPool(&dflt, 0), CUDA_SUCCESS);
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    assert_int_equal(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocFromPoolAsync(&c, 2 * MIB, pool, s), CUDA_SUCCESS);
    assert_int_equal(simtest_used() - base, 10 * MIB);
    size_t rs = 0;
    assert_int_equal(cuMemGetAddressRange_v2(NULL, &rs, c), CUDA_SUCCESS);
    assert_int_equal(rs, 2 * MIB);
    assert_int_equal(cuMemFreeAsync(a, s), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeAsync_ptsz(b, s), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(c), CUDA_SUCCESS); /* cuMemFree takes async memory too */
    assert_int_equal(simtest_used(), base);
    assert_int_equal(cuMemFreeAsync(a, s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemPoolDestroy(pool), CUDA_SUCCESS);
    assert_int_equal(cuMemPoolDestroy(dflt), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocAsync(&a, 1, s), CUDA_ERROR_INVALID_HANDLE); /* stale stream */
}

static void ipc_in_same_process_is_refused(void **state)
{
    CUdeviceptr p, q;
    CUipcMemHandle h;
    assert_int_equal(cuMemAlloc_v2(&p, 4 * MIB), CUDA_SUCCESS);
    assert_int_equal(cuIpcGetMemHandle(&h, p), CUDA_SUCCESS);
    assert_int_equal(cuIpcOpenMemHandle_v2(&q, h, 0), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuIpcGetMemHandle(&h, p + 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_allocations_share_2mib_chunks),
        cmocka_unit_test(large_allocations_round_to_2mib),
        cmocka_unit_test(out_of_memory_leaves_usage_alone),
        cmocka_unit_test(legacy_32bit_api),
        cmocka_unit_test(pitch_allocation),
        cmocka_unit_test(arrays_and_mipmaps),
        cmocka_unit_test(managed_memory_is_charged),
        cmocka_unit_test(vmm_frees_after_release_and_unmap),
        cmocka_unit_test(stream_ordered_pools),
        cmocka_unit_test(ipc_in_same_process_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
