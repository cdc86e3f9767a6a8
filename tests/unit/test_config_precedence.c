/* Unit tests for precedence: within a source ours > HAMi's and NAME_<i> > NAME; between
 * sources the config file's limits are ceilings and its node settings win. */
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

static void expect_fail(struct fake_env *e, const char *want_fmt, ...) __attribute__((format(printf, 2, 3)));

/* Loads e expecting failure with the message want_fmt formats, and *cfg untouched. */
static void expect_fail(struct fake_env *e, const char *want_fmt, ...)
{
    struct gs_config cfg;
    struct gs_config before;
    char want[1024];
    va_list ap;

    memset(&cfg, 0x5a, sizeof(cfg));
    before = cfg;
    va_start(ap, want_fmt);
    vsnprintf(want, sizeof(want), want_fmt, ap);
    va_end(ap);
    assert_int_equal(gs_config_load(&cfg, fake_env_get, e, g_err, sizeof(g_err)), -1);
    assert_string_equal(g_err, want);
    assert_memory_equal(&cfg, &before, sizeof(cfg));
}

/* Finding 2 of issue 16: the pod's environment set 12 GiB over the agent's 1000 MiB. */
static void test_env_cannot_raise_the_agents_limit(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    const char *path = tmpfile_write_str("# gpuslice-node-agent\n"
                                         "GPUSLICE_MEMORY_LIMIT_0=1000Mi\n"
                                         "GPUSLICE_CORES_0=10\n");

    (void)state;
    fake_env_set(&e, "GPUSLICE_CONFIG", path);
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[0], 1000ULL << 20);
    assert_int_equal(cfg.sm_limit[0], 10);

    fake_env_set(&e, "GPUSLICE_MEMORY_LIMIT", "12GiB");
    expect_fail(&e,
                "gpuslice: GPUSLICE_MEMORY_LIMIT='12GiB' would raise the limit set by %s:2: "
                "GPUSLICE_MEMORY_LIMIT_0='1000Mi' (the environment may lower a limit of the config file, "
                "never raise it)",
                path);
    fake_env_set(&e, "GPUSLICE_MEMORY_LIMIT", "1001Mi"); /* one MiB over is over */
    expect_fail(&e,
                "gpuslice: GPUSLICE_MEMORY_LIMIT='1001Mi' would raise the limit set by %s:2: "
                "GPUSLICE_MEMORY_LIMIT_0='1000Mi' (the environment may lower a limit of the config file, "
                "never raise it)",
                path);
    fake_env_set(&e, "GPUSLICE_MEMORY_LIMIT", "1000Mi"); /* equal is not raising */
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[0], 1000ULL << 20);
    assert_int_equal(cfg.mem_limit[1], 1000ULL << 20); /* a device the file leaves unlimited */

    fake_env_set(&e, "GPUSLICE_CORES_0", "11");
    expect_fail(&e,
                "gpuslice: GPUSLICE_CORES_0='11' would raise the limit set by %s:3: GPUSLICE_CORES_0='10' "
                "(the environment may lower a limit of the config file, never raise it)",
                path);
}

/* Lowering is allowed, through either naming; the file's other devices keep their own. */
static void test_env_may_lower_a_limit(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    const char *path = tmpfile_write_str("GPUSLICE_MEMORY_LIMIT=8G\n"
                                         "GPUSLICE_CORES=50\n"
                                         "CUDA_DEVICE_MEMORY_LIMIT_3=3G\n");

    (void)state;
    fake_env_set(&e, "GPUSLICE_CONFIG", path);
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[0], 8 * GIB);
    assert_int_equal(cfg.mem_limit[3], 8 * GIB); /* within the file, ours beats HAMi's too */
    assert_int_equal(cfg.sm_limit[0], 50);

    fake_env_set(&e, "CUDA_DEVICE_MEMORY_LIMIT_1", "4G");
    fake_env_set(&e, "CUDA_DEVICE_SM_LIMIT", "20");
    fake_env_set(&e, "GPUSLICE_CORES_2", "50");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[0], 8 * GIB);
    assert_int_equal(cfg.mem_limit[1], 4 * GIB);
    assert_int_equal(cfg.sm_limit[0], 20);
    assert_int_equal(cfg.sm_limit[2], 50);
    assert_int_equal(cfg.any_limit, 1);
}

/* "No limit" is the loosest value of all: HAMi's 0 and 100 and our 100 all raise 50. */
static void test_env_cannot_lift_a_limit(void **state)
{
    struct fake_env e = { 0 };
    const char *path = tmpfile_write_str("CUDA_DEVICE_SM_LIMIT=50\nCUDA_DEVICE_MEMORY_LIMIT=1G\n");

    (void)state;
    fake_env_set(&e, "GPUSLICE_CONFIG", path);
    fake_env_set(&e, "CUDA_DEVICE_SM_LIMIT", "0");
    expect_fail(&e,
                "gpuslice: CUDA_DEVICE_SM_LIMIT='0' would raise the limit set by %s:1: CUDA_DEVICE_SM_LIMIT='50' "
                "(the environment may lower a limit of the config file, never raise it)",
                path);
    fake_env_set(&e, "CUDA_DEVICE_SM_LIMIT", "100");
    expect_fail(&e,
                "gpuslice: CUDA_DEVICE_SM_LIMIT='100' would raise the limit set by %s:1: CUDA_DEVICE_SM_LIMIT='50' "
                "(the environment may lower a limit of the config file, never raise it)",
                path);
    fake_env_set(&e, "CUDA_DEVICE_SM_LIMIT", "40");
    fake_env_set(&e, "GPUSLICE_CORES_7", "100");
    expect_fail(&e,
                "gpuslice: GPUSLICE_CORES_7='100' would raise the limit set by %s:1: CUDA_DEVICE_SM_LIMIT='50' "
                "(the environment may lower a limit of the config file, never raise it)",
                path);
    fake_env_set(&e, "GPUSLICE_CORES_7", "5");
    fake_env_set(&e, "CUDA_DEVICE_MEMORY_LIMIT_15", "2G");
    expect_fail(&e,
                "gpuslice: CUDA_DEVICE_MEMORY_LIMIT_15='2G' would raise the limit set by %s:2: "
                "CUDA_DEVICE_MEMORY_LIMIT='1G' (the environment may lower a limit of the config file, never "
                "raise it)",
                path);
}

/* Switches that would loosen a limit: where the file is silent, the default is the
 * ceiling. Tightening is allowed. */
static void test_env_cannot_switch_a_limit_off(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    const char *path = tmpfile_write_str("GPUSLICE_MEMORY_LIMIT_0=1G\n");

    (void)state;
    fake_env_set(&e, "GPUSLICE_CONFIG", path);
    fake_env_set(&e, "GPUSLICE_MANAGED", "ignore");
    expect_fail(&e,
                "gpuslice: GPUSLICE_MANAGED='ignore' would raise the limit set by %s, which leaves "
                "GPUSLICE_MANAGED at its default 'count' (the environment may lower a limit of the config "
                "file, never raise it)",
                path);
    fake_env_set(&e, "GPUSLICE_MANAGED", "count");
    fake_env_set(&e, "GPU_CORE_UTILIZATION_POLICY", "disable");
    expect_fail(&e,
                "gpuslice: GPU_CORE_UTILIZATION_POLICY='disable' would raise the limit set by %s, which leaves "
                "GPU_CORE_UTILIZATION_POLICY at its default 'default' (the environment may lower a limit of the "
                "config file, never raise it)",
                path);
    fake_env_set(&e, "GPU_CORE_UTILIZATION_POLICY", "force");
    fake_env_set(&e, "GPUSLICE_SHARE_WEIGHT", "101");
    expect_fail(&e,
                "gpuslice: GPUSLICE_SHARE_WEIGHT='101' would raise the limit set by %s, which leaves "
                "GPUSLICE_SHARE_WEIGHT at its default '100' (the environment may lower a limit of the config "
                "file, never raise it)",
                path);
    fake_env_set(&e, "GPUSLICE_SHARE_WEIGHT", "40");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.managed_policy, GS_MANAGED_COUNT);
    assert_int_equal(cfg.core_policy, GS_CORE_POLICY_FORCE);
    assert_int_equal(cfg.share_weight, 40);

    /* Without a config file nothing is a ceiling: the environment is all there is. */
    fake_env_set(&e, "GPUSLICE_CONFIG", NULL);
    fake_env_set(&e, "GPUSLICE_MANAGED", "ignore");
    fake_env_set(&e, "GPU_CORE_UTILIZATION_POLICY", "disable");
    fake_env_set(&e, "GPUSLICE_SHARE_WEIGHT", "5000");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.managed_policy, GS_MANAGED_IGNORE);
    assert_int_equal(cfg.core_policy, GS_CORE_POLICY_DISABLE);
    assert_int_equal(cfg.share_weight, 5000);
}

/* A file that loosens a switch itself lets the environment choose up to it. */
static void test_file_switch_is_the_ceiling(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    const char *path = tmpfile_write_str("GPUSLICE_MANAGED=ignore\nGPU_CORE_UTILIZATION_POLICY=disable\n");

    (void)state;
    fake_env_set(&e, "GPUSLICE_CONFIG", path);
    load_ok(&e, &cfg);
    assert_int_equal(cfg.managed_policy, GS_MANAGED_IGNORE);
    assert_int_equal(cfg.core_policy, GS_CORE_POLICY_DISABLE);
    fake_env_set(&e, "GPUSLICE_MANAGED", "count");
    fake_env_set(&e, "GPU_CORE_UTILIZATION_POLICY", "default");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.managed_policy, GS_MANAGED_COUNT);
    assert_int_equal(cfg.core_policy, GS_CORE_POLICY_DEFAULT);
}

/* Node settings the file sets win outright; where it is silent the environment's apply. */
static void test_file_node_settings_win(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    const char *path = tmpfile_write_str("GPUSLICE_COMPUTE_MODE=share\n"
                                         "GPUSLICE_REGION=/file/region\n"
                                         "GPUSLICE_LEDGER_DIR=/file/ledgers\n"
                                         "GPUSLICE_CONTAINER=ns/pod/c\n");

    (void)state;
    fake_env_set(&e, "GPUSLICE_CONFIG", path);
    fake_env_set(&e, "GPUSLICE_COMPUTE_MODE", "cap");
    fake_env_set(&e, "CUDA_DEVICE_MEMORY_SHARED_CACHE", "/env/cache");
    fake_env_set(&e, "GPUSLICE_REGION", "/env/region");
    fake_env_set(&e, "GPUSLICE_LEDGER_DIR", "/env/ledgers");
    fake_env_set(&e, "GPUSLICE_CONTAINER", "impostor");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.compute_mode, GS_COMPUTE_SHARE);
    assert_string_equal(cfg.region_path, "/file/region");
    assert_string_equal(cfg.ledger_dir, "/file/ledgers");
    assert_string_equal(cfg.container_name, "ns/pod/c");

    /* A bad value is still an error although the file's would win. */
    fake_env_set(&e, "GPUSLICE_LEDGER_DIR", "relative");
    expect_fail(&e, "gpuslice: GPUSLICE_LEDGER_DIR='relative': must be an absolute path");

    path = tmpfile_write_str("GPUSLICE_CORES=30\n");
    fake_env_set(&e, "GPUSLICE_CONFIG", path);
    fake_env_set(&e, "GPUSLICE_LEDGER_DIR", "/env/ledgers");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.compute_mode, GS_COMPUTE_CAP);
    assert_string_equal(cfg.region_path, "/env/region");
    assert_string_equal(cfg.ledger_dir, "/env/ledgers");
    assert_string_equal(cfg.container_name, "impostor");
}

/* The compute limiter's and the context charge's calibration are node settings too. */
static void test_file_calibration_wins(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    const char *path = tmpfile_write_str("GPUSLICE_CTX_OVERHEAD=300Mi\n");

    (void)state;
    fake_env_set(&e, "GPUSLICE_CONFIG", path);
    fake_env_set(&e, "GPUSLICE_CTX_OVERHEAD", "0");
    fake_env_set(&e, "GPUSLICE_POWER_EXPONENT", "0");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.ctx_overhead, 300 << 20);
    assert_int_equal(cfg.power_exp_milli, 0); /* the file is silent: the environment's */
}

/* The log level changes nothing a tenant gains by: the environment wins. */
static void test_env_log_level_wins(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    const char *path = tmpfile_write_str("GPUSLICE_LOG_LEVEL=error\n");

    (void)state;
    fake_env_set(&e, "GPUSLICE_CONFIG", path);
    load_ok(&e, &cfg);
    assert_int_equal(cfg.log_level, 0);
    fake_env_set(&e, "LIBCUDA_LOG_LEVEL", "4");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.log_level, 3);
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
        cmocka_unit_test_teardown(test_env_cannot_raise_the_agents_limit, teardown),
        cmocka_unit_test_teardown(test_env_may_lower_a_limit, teardown),
        cmocka_unit_test_teardown(test_env_cannot_lift_a_limit, teardown),
        cmocka_unit_test_teardown(test_env_cannot_switch_a_limit_off, teardown),
        cmocka_unit_test_teardown(test_file_switch_is_the_ceiling, teardown),
        cmocka_unit_test_teardown(test_file_node_settings_win, teardown),
        cmocka_unit_test_teardown(test_file_calibration_wins, teardown),
        cmocka_unit_test_teardown(test_env_log_level_wins, teardown),
        cmocka_unit_test_teardown(test_file_indexed_over_file_all, teardown),
        cmocka_unit_test_teardown(test_invalid_file_value_fails_even_if_env_overrides, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
