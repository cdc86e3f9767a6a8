/* Unit tests for the config file: syntax, and every error with its file:line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "fake_env.h"
#include "tmpfile_util.h"

#define GIB (UINT64_C(1) << 30)

static char g_err[1024];
static struct gs_config g_cfg;

static int teardown(void **state)
{
    (void)state;
    tmpfile_cleanup();
    return 0;
}

static int load_path(const char *path)
{
    struct fake_env e = { 0 };

    fake_env_set(&e, "GPUSLICE_CONFIG", path);
    return gs_config_load(&g_cfg, fake_env_get, &e, g_err, sizeof(g_err));
}

/* Writes text to a file, loads it, and expects "gpuslice: <path>:<detail>". */
static void expect_file_err(const char *text, size_t len, const char *detail)
{
    const char *path = tmpfile_write(text, len);
    char want[1024];

    assert_int_equal(load_path(path), -1);
    snprintf(want, sizeof(want), "gpuslice: %s:%s", path, detail);
    assert_string_equal(g_err, want);
}

#define EXPECT_FILE_ERR(text, detail) expect_file_err(text, sizeof(text) - 1, detail)

static void test_syntax_accepted(void **state)
{
    static const char text[] = "# gpuslice config\n"
                               "\n"
                               "   # indented comment\n"
                               "GPUSLICE_MEMORY_LIMIT=4GiB\n"
                               "  GPUSLICE_CORES = 25  \r\n"
                               "\tGPUSLICE_CONTAINER=team a/job 7\n"
                               "GPUSLICE_LOG_LEVEL=info"; /* no trailing newline */

    (void)state;
    assert_int_equal(load_path(tmpfile_write_str(text)), 0);
    assert_int_equal(g_cfg.mem_limit[5], 4 * GIB);
    assert_int_equal(g_cfg.sm_limit[5], 25);
    assert_string_equal(g_cfg.container_name, "team a/job 7");
    assert_int_equal(g_cfg.log_level, 2);
}

static void test_every_name_allowed_in_file(void **state)
{
    static const char text[] = "CUDA_DEVICE_MEMORY_LIMIT=1G\nCUDA_DEVICE_MEMORY_LIMIT_15=2G\n"
                               "CUDA_DEVICE_SM_LIMIT=40\nCUDA_DEVICE_SM_LIMIT_0=60\n"
                               "CUDA_DEVICE_MEMORY_SHARED_CACHE=/a\nGPU_CORE_UTILIZATION_POLICY=force\n"
                               "LIBCUDA_LOG_LEVEL=3\nGPUSLICE_MEMORY_LIMIT_1=3G\nGPUSLICE_CORES_1=20\n"
                               "GPUSLICE_COMPUTE_MODE=share\nGPUSLICE_SHARE_WEIGHT=300\nGPUSLICE_REGION=/b\n"
                               "GPUSLICE_MANAGED=ignore\nGPUSLICE_CTX_OVERHEAD=256M\nGPUSLICE_CONTAINER=x\n";

    (void)state;
    assert_int_equal(load_path(tmpfile_write_str(text)), 0);
    assert_int_equal(g_cfg.mem_limit[0], GIB);
    assert_int_equal(g_cfg.mem_limit[1], 3 * GIB);
    assert_int_equal(g_cfg.mem_limit[15], 2 * GIB);
    assert_int_equal(g_cfg.sm_limit[0], 60);
    assert_int_equal(g_cfg.sm_limit[1], 20);
    assert_int_equal(g_cfg.sm_limit[2], 40);
    assert_int_equal(g_cfg.core_policy, GS_CORE_POLICY_FORCE);
    assert_int_equal(g_cfg.log_level, 2);
    assert_int_equal(g_cfg.compute_mode, GS_COMPUTE_SHARE);
    assert_int_equal(g_cfg.share_weight, 300);
    assert_string_equal(g_cfg.region_path, "/b");
    assert_int_equal(g_cfg.managed_policy, GS_MANAGED_IGNORE);
    assert_int_equal(g_cfg.ctx_overhead, 256 << 20);
    assert_string_equal(g_cfg.container_name, "x");
}

static void test_empty_file(void **state)
{
    (void)state;
    assert_int_equal(load_path(tmpfile_write("", 0)), 0);
    assert_int_equal(g_cfg.any_limit, 0);
    assert_int_equal(g_cfg.share_weight, 100);
}

static void test_syntax_errors(void **state)
{
    (void)state;
    EXPECT_FILE_ERR("# ok\n\nGPUSLICE_CORES 25\n", "3: missing '=' in 'GPUSLICE_CORES 25' (expected KEY=VALUE)");
    EXPECT_FILE_ERR("=5\n", "1: missing key before '='");
    EXPECT_FILE_ERR("GPUSLICE_CORES=5\nGPUSLICE_MEMROY_LIMIT=4G\n",
                    "2: unknown key 'GPUSLICE_MEMROY_LIMIT'; did you mean GPUSLICE_MEMORY_LIMIT?");
    EXPECT_FILE_ERR("NVIDIA_VISIBLE_DEVICES=all\n", "1: unknown key 'NVIDIA_VISIBLE_DEVICES'");
    EXPECT_FILE_ERR("\n\nCUDA_DEVICE_MEMORY_LIMIT_16=1G\n",
                    "3: CUDA_DEVICE_MEMORY_LIMIT_16: device index must be 0..15");
    EXPECT_FILE_ERR("GPUSLICE_CORES_x=1\n", "1: GPUSLICE_CORES_x: device index must be 0..15");
    EXPECT_FILE_ERR("GPUSLICE_CORES=5\n# again\nGPUSLICE_CORES = 6\n",
                    "3: duplicate key 'GPUSLICE_CORES' (first set on line 1)");
    EXPECT_FILE_ERR("GPUSLICE_CONFIG=/etc/other.conf\n", "1: GPUSLICE_CONFIG is only read from the environment");
    EXPECT_FILE_ERR("GPUSLICE_CORES=5\nGPUSLICE_CORES_2=5\0\n", "2: NUL byte in line (not a text file?)");
}

static void test_value_errors_name_file_and_line(void **state)
{
    (void)state;
    EXPECT_FILE_ERR("# limits\nCUDA_DEVICE_MEMORY_LIMIT_1=4GB\n",
                    "2: CUDA_DEVICE_MEMORY_LIMIT_1='4GB': ambiguous unit 'GB'; use 'GiB' (2^30) or 'G'");
    EXPECT_FILE_ERR("GPUSLICE_MEMORY_LIMIT=\n", "1: GPUSLICE_MEMORY_LIMIT='': empty value");
    EXPECT_FILE_ERR("\n\n\nGPUSLICE_COMPUTE_MODE=fair\n",
                    "4: GPUSLICE_COMPUTE_MODE='fair': unknown value; expected one of: cap, share");
    EXPECT_FILE_ERR("GPUSLICE_CORES=25 # quarter\n",
                    "1: GPUSLICE_CORES='25 # quarter': not a decimal integer (expected 1..100)");
}

static void test_line_length_limit(void **state)
{
    size_t n = 8192;
    char *text = malloc(n + 32);

    (void)state;
    assert_non_null(text);
    /* A comment line of exactly 8192 bytes is fine... */
    memset(text, '#', n);
    memcpy(text + n, "\nGPUSLICE_CORES=9\n", 18);
    assert_int_equal(load_path(tmpfile_write(text, n + 18)), 0);
    assert_int_equal(g_cfg.sm_limit[0], 9);
    /* ...one more byte is not, and the line number is reported. */
    memcpy(text, "GPUSLICE_CORES=1\n", 17);
    memset(text + 17, '#', n + 1);
    expect_file_err(text, 17 + n + 1, "2: line longer than 8192 bytes");
    free(text);
}

static void test_file_size_limit(void **state)
{
    size_t n = 65537;
    char *text = malloc(n);
    const char *path;
    char want[512];

    (void)state;
    assert_non_null(text);
    memset(text, '\n', n);
    path = tmpfile_write(text, n);
    assert_int_equal(load_path(path), -1);
    snprintf(want, sizeof(want), "gpuslice: GPUSLICE_CONFIG='%s': larger than 65536 bytes", path);
    assert_string_equal(g_err, want);
    assert_int_equal(load_path(tmpfile_write(text, n - 1)), 0);
    free(text);
}

static void test_unopenable_files(void **state)
{
    char dir[] = "/tmp/gs_unit_dirXXXXXX";
    char fifo[sizeof(dir) + 8];

    (void)state;
    assert_int_equal(load_path("/nonexistent/gpuslice.conf"), -1);
    assert_string_equal(
        g_err, "gpuslice: GPUSLICE_CONFIG='/nonexistent/gpuslice.conf': cannot open: No such file or directory");

    assert_non_null(mkdtemp(dir));
    assert_int_equal(load_path(dir), -1);
    assert_non_null(strstr(g_err, "': not a regular file"));
    assert_non_null(strstr(g_err, dir));

    /* A FIFO must be refused, not block the process waiting for a writer. */
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(load_path(fifo), -1);
    assert_non_null(strstr(g_err, "': not a regular file"));
    unlink(fifo);
    rmdir(dir);
}

static void test_unreadable_file(void **state)
{
    const char *path = tmpfile_write_str("GPUSLICE_CORES=5\n");

    (void)state;
    if (geteuid() == 0)
        skip(); /* root reads through mode 000 */
    assert_int_equal(chmod(path, 0), 0);
    assert_int_equal(load_path(path), -1);
    assert_non_null(strstr(g_err, "cannot open: Permission denied"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_syntax_accepted, teardown),
        cmocka_unit_test_teardown(test_every_name_allowed_in_file, teardown),
        cmocka_unit_test_teardown(test_empty_file, teardown),
        cmocka_unit_test_teardown(test_syntax_errors, teardown),
        cmocka_unit_test_teardown(test_value_errors_name_file_and_line, teardown),
        cmocka_unit_test_teardown(test_line_length_limit, teardown),
        cmocka_unit_test_teardown(test_file_size_limit, teardown),
        cmocka_unit_test(test_unopenable_files),
        cmocka_unit_test_teardown(test_unreadable_file, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
