/* Unit tests for gs_config_check_unknown: typos and bad device indexes in names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "config.h"

static char g_err[1024];

static void expect_clean(char **list)
{
    if (gs_config_check_unknown(list, g_err, sizeof(g_err)) != 0)
        fail_msg("rejected: %s", g_err);
    assert_string_equal(g_err, "");
}

static void expect_unknown(const char *entry, const char *want)
{
    char *list[] = { "PATH=/usr/bin", "GPUSLICE_CORES=5", (char *)entry, NULL };

    assert_int_equal(gs_config_check_unknown(list, g_err, sizeof(g_err)), -1);
    assert_string_equal(g_err, want);
}

static void test_clean_environments(void **state)
{
    char *empty[] = { NULL };
    char *known[] = {
        "CUDA_DEVICE_MEMORY_LIMIT=1G",
        "CUDA_DEVICE_MEMORY_LIMIT_0=1G",
        "CUDA_DEVICE_MEMORY_LIMIT_15=1G",
        "CUDA_DEVICE_SM_LIMIT=5",
        "CUDA_DEVICE_SM_LIMIT_9=5",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE=/x",
        "GPU_CORE_UTILIZATION_POLICY=force",
        "LIBCUDA_LOG_LEVEL=1",
        "GPUSLICE_MEMORY_LIMIT=1G",
        "GPUSLICE_MEMORY_LIMIT_10=1G",
        "GPUSLICE_CORES=1",
        "GPUSLICE_CORES_3=1",
        "GPUSLICE_COMPUTE_MODE=cap",
        "GPUSLICE_SHARE_WEIGHT=1",
        "GPUSLICE_REGION=/r",
        "GPUSLICE_MANAGED=count",
        "GPUSLICE_CTX_OVERHEAD=auto",
        "GPUSLICE_LOG_LEVEL=warn",
        "GPUSLICE_CONTAINER=c",
        "GPUSLICE_CONFIG=/c",
        "GPUSLICE_LEDGER_DIR=/l",
        /* other gpuslice programs' variables, exported for inspect, sim or kubectl-like use */
        "GPUSLICE_EXTENDER_URL=http://127.0.0.1:8888",
        "GPUSLICE_TRACE_DIR=/traces",
        "GPUSLICE_KUBE_TOKEN=t",
        "GPUSLICE_SERVICEACCOUNT_DIR=/sa",
        "GPUSLICE_STATE_DIR=/run/gpuslice",
        "GPUSLICE_LIB=/l.so",
        /* not ours: left alone */
        "CUDA_VISIBLE_DEVICES=0",
        "CUDA_OVERSUBSCRIBE=true",
        "CUDA_DEVICE_MEMORY_LIMITS=5",
        "MY_GPUSLICE_X=1",
        "NOEQUALS",
        NULL,
    };

    (void)state;
    assert_int_equal(gs_config_check_unknown(NULL, g_err, sizeof(g_err)), 0);
    expect_clean(empty);
    expect_clean(known);
}

static void test_typos(void **state)
{
    (void)state;
    expect_unknown("GPUSLICE_MEMROY_LIMIT=8GiB",
                   "gpuslice: unknown variable GPUSLICE_MEMROY_LIMIT='8GiB'; did you mean GPUSLICE_MEMORY_LIMIT?");
    expect_unknown("GPUSLICE_CORE=30", "gpuslice: unknown variable GPUSLICE_CORE='30'; did you mean GPUSLICE_CORES?");
    expect_unknown("gpuslice_cores=30", "gpuslice: unknown variable gpuslice_cores='30'; did you mean GPUSLICE_CORES?");
    expect_unknown("GPUSLICE_MEMORY_LIMT_1=1G",
                   "gpuslice: unknown variable GPUSLICE_MEMORY_LIMT_1='1G'; did you mean GPUSLICE_MEMORY_LIMIT_1?");
    expect_unknown("GPUSLICE_TURBO=1", "gpuslice: unknown variable GPUSLICE_TURBO='1' (see docs/configuration.md)");
    expect_unknown("GPUSLICE_", "gpuslice: unknown variable GPUSLICE_='' (see docs/configuration.md)");
    expect_unknown("GPUSLICE_X=a\nb", "gpuslice: unknown variable GPUSLICE_X='a\\x0ab' (see docs/configuration.md)");
}

static void test_bad_indexes(void **state)
{
    (void)state;
    expect_unknown("CUDA_DEVICE_MEMORY_LIMIT_99=1G",
                   "gpuslice: CUDA_DEVICE_MEMORY_LIMIT_99='1G': device index must be 0..15 (no leading zeros)");
    expect_unknown("CUDA_DEVICE_MEMORY_LIMIT_16=1G",
                   "gpuslice: CUDA_DEVICE_MEMORY_LIMIT_16='1G': device index must be 0..15 (no leading zeros)");
    expect_unknown("CUDA_DEVICE_SM_LIMIT_01=5",
                   "gpuslice: CUDA_DEVICE_SM_LIMIT_01='5': device index must be 0..15 (no leading zeros)");
    expect_unknown("CUDA_DEVICE_SM_LIMIT_-1=5",
                   "gpuslice: CUDA_DEVICE_SM_LIMIT_-1='5': device index must be 0..15 (no leading zeros)");
    expect_unknown("GPUSLICE_CORES_x=5",
                   "gpuslice: GPUSLICE_CORES_x='5': device index must be 0..15 (no leading zeros)");
    expect_unknown("GPUSLICE_MEMORY_LIMIT_=1G",
                   "gpuslice: GPUSLICE_MEMORY_LIMIT_='1G': device index must be 0..15 (no leading zeros)");
}

static void test_error_buffer(void **state)
{
    char *list[] = { "GPUSLICE_NOPE=1", NULL };
    char small[10];

    (void)state;
    assert_int_equal(gs_config_check_unknown(list, NULL, 0), -1);
    assert_int_equal(gs_config_check_unknown(list, small, sizeof(small)), -1);
    assert_int_equal(strlen(small), sizeof(small) - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_environments),
        cmocka_unit_test(test_typos),
        cmocka_unit_test(test_bad_indexes),
        cmocka_unit_test(test_error_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
