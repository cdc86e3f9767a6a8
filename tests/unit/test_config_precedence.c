/* Unit tests for precedence: ours > HAMi's > config file; NAME_<i> > NAME per source. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "config.h"
#include "fake_env.h"
#include "tmpfile_util.h"

#define GIB (UINT64_C(1) << 30)

static char g_err[1024];

static void load_ok(struct fake_env *e, struct gs_config *cfg)
{
    if (gs_config_load(cfg, fake_env_get, e, g_err, sizeof(g_err)) != 0)
        fail_msg("load failed: %s", g_err);
}

static int teardown(void **state)
{
    (void)state;
    tmpfile_cleanup();
    return 0;
}

static void test_ours_beats_hami_memory(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;

    (void)state;
    fake_env_set(&e, "CUDA_DEVICE_MEMORY_LIMIT", "4G");
    fake_env_set(&e, "CUDA_DEVICE_MEMORY_LIMIT_1", "2G");
    fake_env_set(&e, "GPUSLICE_MEMORY_LIMIT", "8G");
    load_ok(&e, &cfg);
    /* Our all-devices name outranks even HAMi's per-device one. */
    assert_int_equal(cfg.mem_limit[0], 8 * GIB);
    assert_int_equal(cfg.mem_limit[1], 8 * GIB);

    fake_env_set(&e, "GPUSLICE_MEMORY_LIMIT_1", "1G");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[0], 8 * GIB);
    assert_int_equal(cfg.mem_limit[1], GIB);
}

static void test_hami_fills_devices_ours_leaves(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;

    (void)state;
    fake_env_set(&e, "CUDA_DEVICE_MEMORY_LIMIT", "4G");
    fake_env_set(&e, "GPUSLICE_MEMORY_LIMIT_2", "1G");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[0], 4 * GIB);
    assert_int_equal(cfg.mem_limit[2], GIB);
    assert_int_equal(cfg.mem_limit[3], 4 * GIB);
}

static void test_ours_beats_hami_compute(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;

    (void)state;
    fake_env_set(&e, "CUDA_DEVICE_SM_LIMIT", "30");
    fake_env_set(&e, "GPUSLICE_CORES_1", "70");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.sm_limit[0], 30);
    assert_int_equal(cfg.sm_limit[1], 70);

    fake_env_set(&e, "GPUSLICE_CORES", "10");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.sm_limit[0], 10);
    assert_int_equal(cfg.sm_limit[1], 70);
}

static void test_ours_beats_hami_scalars(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;

    (void)state;
    fake_env_set(&e, "CUDA_DEVICE_MEMORY_SHARED_CACHE", "/hami.cache");
    fake_env_set(&e, "GPUSLICE_REGION", "/run/gpuslice/region");
    fake_env_set(&e, "LIBCUDA_LOG_LEVEL", "4");
    fake_env_set(&e, "GPUSLICE_LOG_LEVEL", "error");
    load_ok(&e, &cfg);
    assert_string_equal(cfg.region_path, "/run/gpuslice/region");
    assert_int_equal(cfg.log_level, 0);
}

static void test_file_is_lowest(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    const char *path = tmpfile_write_str("GPUSLICE_MEMORY_LIMIT=8G\n"
                                         "GPUSLICE_CORES=50\n"
                                         "GPUSLICE_COMPUTE_MODE=share\n"
                                         "GPUSLICE_REGION=/file/region\n"
                                         "CUDA_DEVICE_MEMORY_LIMIT_3=3G\n");

    (void)state;
    fake_env_set(&e, "GPUSLICE_CONFIG", path);
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[0], 8 * GIB);
    assert_int_equal(cfg.mem_limit[3], 8 * GIB); /* within the file, ours beats HAMi's too */
    assert_int_equal(cfg.sm_limit[0], 50);
    assert_int_equal(cfg.compute_mode, GS_COMPUTE_SHARE);
    assert_string_equal(cfg.region_path, "/file/region");

    /* HAMi's names in the environment beat even our names in the file. */
    fake_env_set(&e, "CUDA_DEVICE_MEMORY_LIMIT", "4G");
    fake_env_set(&e, "CUDA_DEVICE_SM_LIMIT", "0"); /* explicit "no limit" wins too */
    fake_env_set(&e, "CUDA_DEVICE_MEMORY_SHARED_CACHE", "/env/cache");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[0], 4 * GIB);
    assert_int_equal(cfg.mem_limit[3], 4 * GIB);
    assert_int_equal(cfg.sm_limit[0], 0);
    assert_int_equal(cfg.any_limit, 1);
    assert_int_equal(cfg.compute_mode, GS_COMPUTE_SHARE); /* untouched by env: file value stays */
    assert_string_equal(cfg.region_path, "/env/cache");

    fake_env_set(&e, "GPUSLICE_MEMORY_LIMIT_3", "1G");
    fake_env_set(&e, "GPUSLICE_COMPUTE_MODE", "cap");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[3], GIB);
    assert_int_equal(cfg.compute_mode, GS_COMPUTE_CAP);
}

static void test_file_indexed_over_file_all(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    const char *path = tmpfile_write_str("CUDA_DEVICE_MEMORY_LIMIT_2=2G\nCUDA_DEVICE_MEMORY_LIMIT=6G\n");

    (void)state;
    fake_env_set(&e, "GPUSLICE_CONFIG", path);
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[0], 6 * GIB);
    assert_int_equal(cfg.mem_limit[2], 2 * GIB);
}

static void test_invalid_file_value_fails_even_if_env_overrides(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    const char *path = tmpfile_write_str("GPUSLICE_CORES=150\n");
    char want[512];

    (void)state;
    fake_env_set(&e, "GPUSLICE_CONFIG", path);
    fake_env_set(&e, "GPUSLICE_CORES", "50");
    assert_int_equal(gs_config_load(&cfg, fake_env_get, &e, g_err, sizeof(g_err)), -1);
    snprintf(want, sizeof(want), "gpuslice: %s:1: GPUSLICE_CORES='150': out of range (expected 1..100)", path);
    assert_string_equal(g_err, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ours_beats_hami_memory),
        cmocka_unit_test(test_hami_fills_devices_ours_leaves),
        cmocka_unit_test(test_ours_beats_hami_compute),
        cmocka_unit_test(test_ours_beats_hami_scalars),
        cmocka_unit_test_teardown(test_file_is_lowest, teardown),
        cmocka_unit_test_teardown(test_file_indexed_over_file_all, teardown),
        cmocka_unit_test_teardown(test_invalid_file_value_fails_even_if_env_overrides, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
