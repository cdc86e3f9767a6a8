/* Unit tests for gs_config_load: each variable's accepted values and rejections. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fake_env.h"
#include "limiter.h"

#define GIB (UINT64_C(1) << 30)

static char g_err[1024];

static int load(struct fake_env *e, struct gs_config *cfg)
{
    return gs_config_load(cfg, fake_env_get, e, g_err, sizeof(g_err));
}

static void load_ok(struct fake_env *e, struct gs_config *cfg)
{
    if (load(e, cfg) != 0)
        fail_msg("load failed: %s", g_err);
    assert_string_equal(g_err, "");
}

/* Loads e with the single variable name=value and expects exactly the message want. */
static void expect_reject(const char *name, const char *value, const char *want)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    struct gs_config before;

    memset(&cfg, 0xab, sizeof(cfg));
    before = cfg;
    fake_env_set(&e, name, value);
    assert_int_equal(load(&e, &cfg), -1);
    assert_string_equal(g_err, want);
    assert_memory_equal(&cfg, &before, sizeof(cfg)); /* *cfg untouched on failure */
}

static void test_defaults(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    int i;

    (void)state;
    memset(&cfg, 0xab, sizeof(cfg));
    load_ok(&e, &cfg);
    for (i = 0; i < GS_MAX_DEVICES; i++) {
        assert_int_equal(cfg.mem_limit[i], 0);
        assert_int_equal(cfg.sm_limit[i], 0);
    }
    assert_int_equal(cfg.compute_mode, GS_COMPUTE_CAP);
    /* The key table's defaults agree with the compute limiter's. */
    assert_int_equal(cfg.share_weight, GS_LIM_DEFAULT_WEIGHT);
    assert_int_equal(cfg.power_exp_milli, GS_LIM_DEFAULT_POWER_EXP);
    assert_int_equal(cfg.share_yield_us, GS_LIM_DEFAULT_YIELD_US);
    assert_int_equal(cfg.core_policy, GS_CORE_POLICY_DEFAULT);
    assert_int_equal(cfg.managed_policy, GS_MANAGED_COUNT);
    assert_int_equal(cfg.ctx_overhead, -1);
    assert_int_equal(cfg.log_level, 1);
    assert_string_equal(cfg.region_path, "");
    assert_string_equal(cfg.container_name, "");
    assert_int_equal(cfg.any_limit, 0);
}

static void test_hami_memory_limit(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    int i;

    (void)state;
    fake_env_set(&e, "CUDA_DEVICE_MEMORY_LIMIT", "4096m");
    load_ok(&e, &cfg);
    for (i = 0; i < GS_MAX_DEVICES; i++)
        assert_int_equal(cfg.mem_limit[i], 4 * GIB);
    assert_int_equal(cfg.any_limit, 1);

    fake_env_set(&e, "CUDA_DEVICE_MEMORY_LIMIT_1", "2g");
    fake_env_set(&e, "CUDA_DEVICE_MEMORY_LIMIT_15", "1GiB");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[0], 4 * GIB);
    assert_int_equal(cfg.mem_limit[1], 2 * GIB);
    assert_int_equal(cfg.mem_limit[14], 4 * GIB);
    assert_int_equal(cfg.mem_limit[15], GIB);
}

static void test_hami_indexed_only(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;

    (void)state;
    fake_env_set(&e, "CUDA_DEVICE_MEMORY_LIMIT_0", "12000m");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[0], UINT64_C(12000) << 20);
    assert_int_equal(cfg.mem_limit[1], 0);
    assert_int_equal(cfg.any_limit, 1);
}

static void test_hami_sm_limit(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;

    (void)state;
    fake_env_set(&e, "CUDA_DEVICE_SM_LIMIT", "30");
    fake_env_set(&e, "CUDA_DEVICE_SM_LIMIT_2", "50");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.sm_limit[0], 30);
    assert_int_equal(cfg.sm_limit[2], 50);
    assert_int_equal(cfg.sm_limit[15], 30);
    assert_int_equal(cfg.any_limit, 1);

    /* HAMi's "no limit" values: 0 and 100. */
    fake_env_set(&e, "CUDA_DEVICE_SM_LIMIT", "0");
    fake_env_set(&e, "CUDA_DEVICE_SM_LIMIT_2", "100");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.sm_limit[0], 0);
    assert_int_equal(cfg.sm_limit[2], 0);
    assert_int_equal(cfg.any_limit, 0);
}

static void test_shared_cache_and_region(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    static char longest[4096];

    (void)state;
    fake_env_set(&e, "CUDA_DEVICE_MEMORY_SHARED_CACHE", "/usr/local/vgpu/x.cache");
    load_ok(&e, &cfg);
    assert_string_equal(cfg.region_path, "/usr/local/vgpu/x.cache");
    assert_int_equal(cfg.any_limit, 0);

    memset(longest, 'a', sizeof(longest) - 1);
    longest[0] = '/';
    fake_env_set(&e, "GPUSLICE_REGION", longest); /* 4095 bytes: fits with its NUL */
    load_ok(&e, &cfg);
    assert_string_equal(cfg.region_path, longest);
}

/* Where the compute limiter finds the per-GPU ledgers: a path like the region's. */
static void test_ledger_dir(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    static char toolong[4097];
    char want[512];

    (void)state;
    load_ok(&e, &cfg);
    assert_string_equal(cfg.ledger_dir, "");
    fake_env_set(&e, "GPUSLICE_LEDGER_DIR", "/var/run/gpuslice-ledgers");
    load_ok(&e, &cfg);
    assert_string_equal(cfg.ledger_dir, "/var/run/gpuslice-ledgers");
    assert_string_equal(cfg.region_path, "");
    assert_int_equal(cfg.any_limit, 0);

    expect_reject("GPUSLICE_LEDGER_DIR", "ledgers",
                  "gpuslice: GPUSLICE_LEDGER_DIR='ledgers': must be an absolute path");
    expect_reject("GPUSLICE_LEDGER_DIR", "", "gpuslice: GPUSLICE_LEDGER_DIR='': empty value");
    expect_reject("GPUSLICE_LEDGER_DIR", "/run/a\nb",
                  "gpuslice: GPUSLICE_LEDGER_DIR='/run/a\\x0ab': control character in path");
    memset(toolong, 'a', sizeof(toolong) - 1);
    toolong[0] = '/';
    snprintf(want, sizeof(want), "gpuslice: GPUSLICE_LEDGER_DIR='/%.95s...': path longer than 4095 bytes", toolong + 1);
    expect_reject("GPUSLICE_LEDGER_DIR", toolong, want);
}

static void test_core_policy(void **state)
{
    static const struct {
        const char *v;
        enum gs_core_policy p;
    } cases[] = {
        { "default", GS_CORE_POLICY_DEFAULT },
        { "force", GS_CORE_POLICY_FORCE },
        { "FORCE", GS_CORE_POLICY_FORCE },
        { "Disable", GS_CORE_POLICY_DISABLE },
    };
    struct fake_env e = { 0 };
    struct gs_config cfg;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fake_env_set(&e, "GPU_CORE_UTILIZATION_POLICY", cases[i].v);
        load_ok(&e, &cfg);
        assert_int_equal(cfg.core_policy, cases[i].p);
    }
}

static void test_hami_log_level_mapping(void **state)
{
    static const int want[] = { 0, 1, 1, 2, 3 }; /* HAMi 0..4 -> ours */
    static const char *const vals[] = { "0", "1", "2", "3", "4" };
    struct fake_env e = { 0 };
    struct gs_config cfg;
    int i;

    (void)state;
    for (i = 0; i < 5; i++) {
        fake_env_set(&e, "LIBCUDA_LOG_LEVEL", vals[i]);
        load_ok(&e, &cfg);
        assert_int_equal(cfg.log_level, want[i]);
    }
}

static void test_our_memory_and_cores(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;

    (void)state;
    fake_env_set(&e, "GPUSLICE_MEMORY_LIMIT", "10GiB");
    fake_env_set(&e, "GPUSLICE_MEMORY_LIMIT_3", "1.5GiB");
    fake_env_set(&e, "GPUSLICE_CORES", "25");
    fake_env_set(&e, "GPUSLICE_CORES_3", "100");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[0], 10 * GIB);
    assert_int_equal(cfg.mem_limit[3], 3 * GIB / 2);
    assert_int_equal(cfg.sm_limit[0], 25);
    assert_int_equal(cfg.sm_limit[3], 100); /* ours keeps 100 as an explicit full share */
    assert_int_equal(cfg.any_limit, 1);

    fake_env_set(&e, "GPUSLICE_CORES", "1");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.sm_limit[0], 1);

    /* ours reads a bare number as bytes (docs/configuration.md, Sizes) */
    fake_env_set(&e, "GPUSLICE_MEMORY_LIMIT", "1073741824");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.mem_limit[0], GIB);
}

static void test_compute_mode_and_weight(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;

    (void)state;
    fake_env_set(&e, "GPUSLICE_COMPUTE_MODE", "share");
    fake_env_set(&e, "GPUSLICE_SHARE_WEIGHT", "1");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.compute_mode, GS_COMPUTE_SHARE);
    assert_int_equal(cfg.share_weight, 1);

    fake_env_set(&e, "GPUSLICE_COMPUTE_MODE", "CAP");
    fake_env_set(&e, "GPUSLICE_SHARE_WEIGHT", "10000");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.compute_mode, GS_COMPUTE_CAP);
    assert_int_equal(cfg.share_weight, 10000);
    assert_int_equal(cfg.share_yield_us, 0); /* off unless set */

    fake_env_set(&e, "GPUSLICE_SHARE_YIELD_US", "250");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.share_yield_us, 250);
}

static void test_power_exponent(void **state)
{
    static const struct {
        const char *v;
        unsigned milli;
    } ok[] = {
        { "0.38", 380 }, { ".5", 500 }, { "1", 1000 }, { "0", 0 }, { "1.000", 1000 }, { "0.125", 125 },
    };
    struct fake_env e = { 0 };
    struct gs_config cfg;
    size_t i;

    (void)state;
    load_ok(&e, &cfg);
    assert_int_equal(cfg.power_exp_milli, GS_LIM_DEFAULT_POWER_EXP);
    for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        fake_env_set(&e, "GPUSLICE_POWER_EXPONENT", ok[i].v);
        load_ok(&e, &cfg);
        assert_int_equal(cfg.power_exp_milli, ok[i].milli);
    }
}

static void test_managed_ctx_log_container(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;

    (void)state;
    fake_env_set(&e, "GPUSLICE_MANAGED", "ignore");
    fake_env_set(&e, "GPUSLICE_CTX_OVERHEAD", "300MiB");
    fake_env_set(&e, "GPUSLICE_LOG_LEVEL", "debug");
    fake_env_set(&e, "GPUSLICE_CONTAINER", "ns/pod/ctr-1 (gpu 0)");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.managed_policy, GS_MANAGED_IGNORE);
    assert_int_equal(cfg.ctx_overhead, 300 << 20);
    assert_int_equal(cfg.log_level, 3);
    assert_string_equal(cfg.container_name, "ns/pod/ctr-1 (gpu 0)");
    assert_int_equal(cfg.any_limit, 0);

    fake_env_set(&e, "GPUSLICE_MANAGED", "COUNT");
    fake_env_set(&e, "GPUSLICE_CTX_OVERHEAD", "AUTO");
    fake_env_set(&e, "GPUSLICE_LOG_LEVEL", "0");
    fake_env_set(&e, "GPUSLICE_CONTAINER", "");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.managed_policy, GS_MANAGED_COUNT);
    assert_int_equal(cfg.ctx_overhead, -1);
    assert_int_equal(cfg.log_level, 0);
    assert_string_equal(cfg.container_name, "");

    fake_env_set(&e, "GPUSLICE_CTX_OVERHEAD", "0");
    fake_env_set(&e, "GPUSLICE_LOG_LEVEL", "Info");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.ctx_overhead, 0);
    assert_int_equal(cfg.log_level, 2);

    fake_env_set(&e, "GPUSLICE_CTX_OVERHEAD", "9223372036854775807");
    fake_env_set(&e, "GPUSLICE_LOG_LEVEL", "warn");
    load_ok(&e, &cfg);
    assert_int_equal(cfg.ctx_overhead, INT64_MAX);
    assert_int_equal(cfg.log_level, 1);
}

static void test_label_length_limit(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    char label[128];

    (void)state;
    memset(label, 'x', sizeof(label) - 1);
    label[sizeof(label) - 1] = '\0';
    fake_env_set(&e, "GPUSLICE_CONTAINER", label); /* 127 bytes fit */
    load_ok(&e, &cfg);
    assert_string_equal(cfg.container_name, label);
}

static void test_reject_memory(void **state)
{
    (void)state;
    expect_reject("CUDA_DEVICE_MEMORY_LIMIT_1", "4GB",
                  "gpuslice: CUDA_DEVICE_MEMORY_LIMIT_1='4GB': ambiguous unit 'GB'; use 'GiB' (2^30) or 'G'");
    expect_reject(
        "CUDA_DEVICE_MEMORY_LIMIT", "0",
        "gpuslice: CUDA_DEVICE_MEMORY_LIMIT='0': a memory limit of 0 is not allowed (unset the variable for no limit)");
    expect_reject("GPUSLICE_MEMORY_LIMIT_7", "0.0G",
                  "gpuslice: GPUSLICE_MEMORY_LIMIT_7='0.0G': a memory limit of 0 is not allowed (unset the variable "
                  "for no limit)");
    expect_reject("GPUSLICE_MEMORY_LIMIT", "-1", "gpuslice: GPUSLICE_MEMORY_LIMIT='-1': sign not allowed");
    expect_reject("GPUSLICE_MEMORY_LIMIT", "lots",
                  "gpuslice: GPUSLICE_MEMORY_LIMIT='lots': not a number (expected digits, then an optional unit)");
    expect_reject("CUDA_DEVICE_MEMORY_LIMIT_15", "", "gpuslice: CUDA_DEVICE_MEMORY_LIMIT_15='': empty value");
    expect_reject("CUDA_DEVICE_MEMORY_LIMIT", "99999999999T",
                  "gpuslice: CUDA_DEVICE_MEMORY_LIMIT='99999999999T': too large (more than 2^64-1 bytes)");
    expect_reject("GPUSLICE_MEMORY_LIMIT", "1025TiB",
                  "gpuslice: GPUSLICE_MEMORY_LIMIT='1025TiB': a memory limit past 1024TiB, the most gpuslice "
                  "accounts, is not allowed");
    /* HAMi's variable: a bare number is neither guessed as bytes nor as MiB */
    expect_reject("CUDA_DEVICE_MEMORY_LIMIT", "4",
                  "gpuslice: CUDA_DEVICE_MEMORY_LIMIT='4': a number without a unit is ambiguous here (bytes or "
                  "MiB?); write 4MiB or 4B");
    expect_reject("CUDA_DEVICE_MEMORY_LIMIT_2", "1073741824",
                  "gpuslice: CUDA_DEVICE_MEMORY_LIMIT_2='1073741824': a number without a unit is ambiguous here "
                  "(bytes or MiB?); write 1073741824MiB or 1073741824B");
}

static void test_reject_compute(void **state)
{
    (void)state;
    expect_reject("CUDA_DEVICE_SM_LIMIT", "101",
                  "gpuslice: CUDA_DEVICE_SM_LIMIT='101': out of range (expected 0..100)");
    expect_reject("CUDA_DEVICE_SM_LIMIT_4", "30%",
                  "gpuslice: CUDA_DEVICE_SM_LIMIT_4='30%': not a decimal integer (expected 0..100)");
    expect_reject("CUDA_DEVICE_SM_LIMIT", "-5",
                  "gpuslice: CUDA_DEVICE_SM_LIMIT='-5': not a decimal integer (expected 0..100)");
    expect_reject("GPUSLICE_CORES", "0", "gpuslice: GPUSLICE_CORES='0': out of range (expected 1..100)");
    expect_reject("GPUSLICE_CORES_0", "101", "gpuslice: GPUSLICE_CORES_0='101': out of range (expected 1..100)");
    expect_reject("GPUSLICE_CORES", "99999999999999999999999",
                  "gpuslice: GPUSLICE_CORES='99999999999999999999999': out of range (expected 1..100)");
    expect_reject("GPUSLICE_CORES", "", "gpuslice: GPUSLICE_CORES='': empty value");
    expect_reject("GPUSLICE_COMPUTE_MODE", "shared",
                  "gpuslice: GPUSLICE_COMPUTE_MODE='shared': unknown value; expected one of: cap, share");
    expect_reject("GPUSLICE_POWER_EXPONENT", "1.5",
                  "gpuslice: GPUSLICE_POWER_EXPONENT='1.5': out of range (expected 0..1)");
    expect_reject("GPUSLICE_POWER_EXPONENT", "0.3805",
                  "gpuslice: GPUSLICE_POWER_EXPONENT='0.3805': at most 3 decimal places");
    expect_reject("GPUSLICE_POWER_EXPONENT", "0.",
                  "gpuslice: GPUSLICE_POWER_EXPONENT='0.': no digits after the decimal point");
    expect_reject("GPUSLICE_POWER_EXPONENT", "-0.2",
                  "gpuslice: GPUSLICE_POWER_EXPONENT='-0.2': not a decimal number between 0 and 1 (e.g. 0.38)");
    expect_reject("GPUSLICE_POWER_EXPONENT", "0.3x",
                  "gpuslice: GPUSLICE_POWER_EXPONENT='0.3x': not a decimal number between 0 and 1 (e.g. 0.38)");
    expect_reject("GPUSLICE_POWER_EXPONENT", "",
                  "gpuslice: GPUSLICE_POWER_EXPONENT='': not a decimal number between 0 and 1 (e.g. 0.38)");
    expect_reject("GPUSLICE_SHARE_WEIGHT", "0",
                  "gpuslice: GPUSLICE_SHARE_WEIGHT='0': out of range (expected 1..10000)");
    expect_reject("GPUSLICE_SHARE_WEIGHT", "10001",
                  "gpuslice: GPUSLICE_SHARE_WEIGHT='10001': out of range (expected 1..10000)");
    expect_reject("GPUSLICE_SHARE_YIELD_US", "100001",
                  "gpuslice: GPUSLICE_SHARE_YIELD_US='100001': out of range (expected 0..100000)");
    expect_reject("GPUSLICE_SHARE_YIELD_US", "250us",
                  "gpuslice: GPUSLICE_SHARE_YIELD_US='250us': not a decimal integer (expected 0..100000)");
    expect_reject(
        "GPU_CORE_UTILIZATION_POLICY", "forced",
        "gpuslice: GPU_CORE_UTILIZATION_POLICY='forced': unknown value; expected one of: default, force, disable");
    expect_reject("GPU_CORE_UTILIZATION_POLICY", "",
                  "gpuslice: GPU_CORE_UTILIZATION_POLICY='': empty value; expected one of: default, force, disable");
}

static void test_reject_other(void **state)
{
    static char toolong[4097];
    static char label[129];
    char want[512];

    (void)state;
    expect_reject("CUDA_DEVICE_MEMORY_SHARED_CACHE", "vgpu.cache",
                  "gpuslice: CUDA_DEVICE_MEMORY_SHARED_CACHE='vgpu.cache': must be an absolute path");
    expect_reject("GPUSLICE_REGION", "", "gpuslice: GPUSLICE_REGION='': empty value");
    memset(toolong, 'a', sizeof(toolong) - 1);
    toolong[0] = '/';
    snprintf(want, sizeof(want), "gpuslice: GPUSLICE_REGION='/%.95s...': path longer than 4095 bytes", toolong + 1);
    expect_reject("GPUSLICE_REGION", toolong, want);
    expect_reject("LIBCUDA_LOG_LEVEL", "5", "gpuslice: LIBCUDA_LOG_LEVEL='5': out of range (expected 0..4)");
    expect_reject("LIBCUDA_LOG_LEVEL", "debug",
                  "gpuslice: LIBCUDA_LOG_LEVEL='debug': not a decimal integer (expected 0..4)");
    expect_reject("GPUSLICE_LOG_LEVEL", "4", "gpuslice: GPUSLICE_LOG_LEVEL='4': out of range (expected 0..3)");
    expect_reject("GPUSLICE_LOG_LEVEL", "verbose",
                  "gpuslice: GPUSLICE_LOG_LEVEL='verbose': unknown value; expected one of: error, warn, info, debug");
    expect_reject("GPUSLICE_MANAGED", "none",
                  "gpuslice: GPUSLICE_MANAGED='none': unknown value; expected one of: count, ignore");
    expect_reject("GPUSLICE_CTX_OVERHEAD", "9223372036854775808",
                  "gpuslice: GPUSLICE_CTX_OVERHEAD='9223372036854775808': too large (at most 2^63-1 bytes)");
    expect_reject("GPUSLICE_CTX_OVERHEAD", "-1", "gpuslice: GPUSLICE_CTX_OVERHEAD='-1': sign not allowed");
    expect_reject("GPUSLICE_CTX_OVERHEAD", "automatic",
                  "gpuslice: GPUSLICE_CTX_OVERHEAD='automatic': not a number (expected digits, then an optional unit)");
    memset(label, 'x', sizeof(label) - 1);
    snprintf(want, sizeof(want), "gpuslice: GPUSLICE_CONTAINER='%.96s...': longer than 127 bytes", label);
    expect_reject("GPUSLICE_CONTAINER", label, want);
    expect_reject("GPUSLICE_CONTAINER", "evil\x1b[2J",
                  "gpuslice: GPUSLICE_CONTAINER='evil\\x1b[2J': only printable ASCII is allowed");
    expect_reject("GPUSLICE_CONFIG", "", "gpuslice: GPUSLICE_CONFIG='': empty value");
}

/* A bad value fails the load even when a higher-precedence variable overrides it. */
static void test_shadowed_invalid_value_still_fails(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;

    (void)state;
    fake_env_set(&e, "GPUSLICE_MEMORY_LIMIT", "8GiB");
    fake_env_set(&e, "CUDA_DEVICE_MEMORY_LIMIT", "4GB");
    assert_int_equal(load(&e, &cfg), -1);
    assert_string_equal(g_err,
                        "gpuslice: CUDA_DEVICE_MEMORY_LIMIT='4GB': ambiguous unit 'GB'; use 'GiB' (2^30) or 'G'");

    fake_env_set(&e, "CUDA_DEVICE_MEMORY_LIMIT", "4G");
    fake_env_set(&e, "GPUSLICE_MEMORY_LIMIT_2", "1G");
    fake_env_set(&e, "GPUSLICE_MEMORY_LIMIT", "8gb");
    assert_int_equal(load(&e, &cfg), -1);
    assert_string_equal(g_err, "gpuslice: GPUSLICE_MEMORY_LIMIT='8gb': ambiguous unit 'gb'; use 'GiB' (2^30) or 'G'");
}

static void test_message_escapes_and_truncates(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;
    char small[24];

    (void)state;
    fake_env_set(&e, "GPUSLICE_CORES", "5\n0");
    assert_int_equal(load(&e, &cfg), -1);
    assert_string_equal(g_err, "gpuslice: GPUSLICE_CORES='5\\x0a0': not a decimal integer (expected 1..100)");
    assert_null(strchr(g_err, '\n'));

    assert_int_equal(gs_config_load(&cfg, fake_env_get, &e, small, sizeof(small)), -1);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_int_equal(gs_config_load(&cfg, fake_env_get, &e, NULL, 0), -1);
}

static void test_null_arguments(void **state)
{
    struct fake_env e = { 0 };
    struct gs_config cfg;

    (void)state;
    assert_int_equal(gs_config_load(NULL, fake_env_get, &e, g_err, sizeof(g_err)), -1);
    assert_non_null(strstr(g_err, "internal error"));
    assert_int_equal(gs_config_load(&cfg, NULL, &e, g_err, sizeof(g_err)), -1);
    assert_non_null(strstr(g_err, "internal error"));
}

static void test_process_environment(void **state)
{
    struct gs_config cfg;

    (void)state;
    assert_int_equal(setenv("GPUSLICE_CORES_5", "42", 1), 0);
    assert_int_equal(gs_config_load(&cfg, gs_getenv_process, NULL, g_err, sizeof(g_err)), 0);
    assert_int_equal(cfg.sm_limit[5], 42);
    assert_int_equal(unsetenv("GPUSLICE_CORES_5"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_hami_memory_limit),
        cmocka_unit_test(test_hami_indexed_only),
        cmocka_unit_test(test_hami_sm_limit),
        cmocka_unit_test(test_shared_cache_and_region),
        cmocka_unit_test(test_ledger_dir),
        cmocka_unit_test(test_core_policy),
        cmocka_unit_test(test_hami_log_level_mapping),
        cmocka_unit_test(test_our_memory_and_cores),
        cmocka_unit_test(test_compute_mode_and_weight),
        cmocka_unit_test(test_power_exponent),
        cmocka_unit_test(test_managed_ctx_log_container),
        cmocka_unit_test(test_label_length_limit),
        cmocka_unit_test(test_reject_memory),
        cmocka_unit_test(test_reject_compute),
        cmocka_unit_test(test_reject_other),
        cmocka_unit_test(test_shadowed_invalid_value_still_fails),
        cmocka_unit_test(test_message_escapes_and_truncates),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_process_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
