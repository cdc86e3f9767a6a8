/*
 * Configuration from the environment (read when a state is created), invalid
 * values failing closed, a state file another build left, and the
 * process-private state without a state file. Each case runs in a fresh
 * child: the parent never attaches.
 */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim_state.h"
#include "simtest.h"

static void clear_env(void)
{
    unsetenv("GPUSLICE_SIM_STATE");
    unsetenv("GPUSLICE_SIM_DEVICES");
    unsetenv("GPUSLICE_SIM_MEM");
    unsetenv("GPUSLICE_SIM_CTX_OVERHEAD");
    unsetenv("GPUSLICE_SIM_NVML_READ_US");
    unsetenv("GPUSLICE_SIM_NVML_READ_MEET");
    unsetenv("GPUSLICE_SIM_EVENT_NS");
    unsetenv("GPUSLICE_SIM_POWER_INSTANT");
}

static void parse_bytes(void **state)
{
    uint64_t v = 0;
    assert_int_equal(sim_parse_bytes("123", &v), 0);
    assert_int_equal(v, 123);
    assert_int_equal(sim_parse_bytes("80GiB", &v), 0);
    assert_int_equal(v, 80 * GIB);
    assert_int_equal(sim_parse_bytes("512M", &v), 0);
    assert_int_equal(v, 512 * MIB);
    assert_int_equal(sim_parse_bytes("4Ki", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(sim_parse_bytes("1TiB", &v), 0);
    assert_int_equal(v, 1024 * GIB);
    assert_int_equal(sim_parse_bytes("", &v), -1);
    assert_int_equal(sim_parse_bytes("abc", &v), -1);
    assert_int_equal(sim_parse_bytes("-1", &v), -1);
    assert_int_equal(sim_parse_bytes(" 1", &v), -1);
    assert_int_equal(sim_parse_bytes("1.5G", &v), -1);
    assert_int_equal(sim_parse_bytes("10GB", &v), -1);
    assert_int_equal(sim_parse_bytes("99999999999999999999", &v), -1);
    assert_int_equal(sim_parse_bytes("17179869184GiB", &v), -1); /* overflows */
}

/* Runs cuInit and nvmlInit in a child with one variable set; returns what
 * the child's stderr said and checks both inits failed. */
static void expect_invalid(const char *var, const char *value)
{
    int err[2];
    assert_int_equal(pipe(err), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(err[1], 2);
        clear_env();
        setenv(var, value, 1);
        CHILD_CHECK(cuInit(0) == CUDA_ERROR_INVALID_VALUE);
        CHILD_CHECK(nvmlInit_v2() != NVML_SUCCESS);
        int n = 0;
        CHILD_CHECK(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED);
        _exit(0);
    }
    close(err[1]);
    char buf[1024] = { 0 };
    size_t len = 0;
    ssize_t r;
    while ((r = read(err[0], buf + len, sizeof(buf) - 1 - len)) > 0)
        len += (size_t)r;
    close(err[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("%s=%s: child failed: %s", var, value, buf);
    if (!strstr(buf, var) || !strstr(buf, value))
        fail_msg("%s=%s: message does not name the variable and value: %s", var, value, buf);
}

static void invalid_values_fail_closed(void **state)
{
    expect_invalid("GPUSLICE_SIM_MEM", "abc");
    expect_invalid("GPUSLICE_SIM_MEM", "0");
    expect_invalid("GPUSLICE_SIM_MEM", "8GB");
    expect_invalid("GPUSLICE_SIM_DEVICES", "0");
    expect_invalid("GPUSLICE_SIM_DEVICES", "18");
    expect_invalid("GPUSLICE_SIM_DEVICES", "2x");
    expect_invalid("GPUSLICE_SIM_CTX_OVERHEAD", "-1");
    expect_invalid("GPUSLICE_SIM_TIMESLICE_US", "2ms");
    expect_invalid("GPUSLICE_SIM_TIMESLICE_US", "100001");
    expect_invalid("GPUSLICE_SIM_MPS", "2");
    expect_invalid("GPUSLICE_SIM_MPS", "yes");
    expect_invalid("GPUSLICE_SIM_PAGEABLE_ACCESS", "2");
    expect_invalid("GPUSLICE_SIM_PAGEABLE_ACCESS", "on");
    expect_invalid("GPUSLICE_SIM_POWER_INSTANT", "2");
    expect_invalid("GPUSLICE_SIM_POWER_INSTANT", "yes");
    expect_invalid("GPUSLICE_SIM_NVML_PERIOD_MS", "5");
    expect_invalid("GPUSLICE_SIM_NVML_PERIOD_MS", "2001");
    expect_invalid("GPUSLICE_SIM_NVML_PERIOD_MS", "1s");
    expect_invalid("GPUSLICE_SIM_NVML_READ_US", "1000001");
    expect_invalid("GPUSLICE_SIM_NVML_READ_US", "2ms");
    expect_invalid("GPUSLICE_SIM_NVML_READ_MEET", "17");
    expect_invalid("GPUSLICE_SIM_NVML_READ_MEET", "two");
    expect_invalid("GPUSLICE_SIM_EVENT_NS", "100001");
    expect_invalid("GPUSLICE_SIM_EVENT_NS", "1.5us");
}

static int run_child(void (*fn)(void))
{
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static char g_path[256];

static void child_three_small_devices(void)
{
    clear_env();
    setenv("GPUSLICE_SIM_STATE", g_path, 1);
    setenv("GPUSLICE_SIM_DEVICES", "3", 1);
    setenv("GPUSLICE_SIM_MEM", "1GiB", 1);
    setenv("GPUSLICE_SIM_CTX_OVERHEAD", "0", 1);
    int n = 0;
    size_t total = 0;
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CHILD_CHECK(cuDeviceGetCount(&n) == CUDA_SUCCESS && n == 3);
    CHILD_CHECK(cuDeviceTotalMem_v2(&total, 2) == CUDA_SUCCESS && total == GIB);
    unsigned int un = 0;
    CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetCount_v2(&un) == NVML_SUCCESS && un == 3);
    CUcontext c;
    CHILD_CHECK(cuCtxCreate_v2(&c, 0, 2) == CUDA_SUCCESS);
    nvmlDevice_t d;
    nvmlMemory_t m;
    CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(2, &d) == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetMemoryInfo(d, &m) == NVML_SUCCESS && m.used == 0); /* overhead 0 */
}

static void child_later_env_is_ignored(void)
{
    clear_env();
    setenv("GPUSLICE_SIM_STATE", g_path, 1);
    setenv("GPUSLICE_SIM_DEVICES", "1", 1);
    setenv("GPUSLICE_SIM_MEM", "garbage", 1); /* not read: the file exists */
    int n = 0;
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CHILD_CHECK(cuDeviceGetCount(&n) == CUDA_SUCCESS && n == 3);
}

/* A read of the per-process samples takes GPUSLICE_SIM_NVML_READ_US, as an
 * H200's took 1.7 ms (a lower bound only: a loaded machine adds to it). */
static void child_slow_sample_reads(void)
{
    clear_env();
    setenv("GPUSLICE_SIM_STATE", g_path, 1);
    setenv("GPUSLICE_SIM_NVML_READ_US", "30000", 1);
    nvmlDevice_t d;
    unsigned int n = 0;
    CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS);
    uint64_t t0 = simtest_now_ns();
    CHILD_CHECK(nvmlDeviceGetProcessUtilization(d, NULL, &n, 0) == NVML_ERROR_NOT_FOUND);
    CHILD_CHECK(simtest_now_ns() - t0 >= 30000000ULL);
}

static void sample_reads_take_the_time_configured(void **state)
{
    snprintf(g_path, sizeof(g_path), "/tmp/gpuslice-simtest-config-read-%d", (int)getpid());
    unlink(g_path);
    assert_int_equal(run_child(child_slow_sample_reads), 0);
    unlink(g_path);
}

/* One read of the per-process samples; when it returned. */
static void *read_samples_once(void *out)
{
    nvmlDevice_t d;
    unsigned int n = 0;
    if (nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS)
        nvmlDeviceGetProcessUtilization(d, NULL, &n, 0);
    *(uint64_t *)out = simtest_now_ns();
    return NULL;
}

/* The first GPUSLICE_SIM_NVML_READ_MEET reads meet: the first waits for the
 * second, then no read waits (threads here; the state is what processes
 * share too). */
static void child_reads_meet_once(void)
{
    clear_env();
    setenv("GPUSLICE_SIM_STATE", g_path, 1);
    setenv("GPUSLICE_SIM_NVML_READ_MEET", "2", 1);
    CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS);
    pthread_t t;
    uint64_t first_done = 0, second_done = 0, third_done = 0;
    CHILD_CHECK(pthread_create(&t, NULL, read_samples_once, &first_done) == 0);
    struct timespec gap = { 0, 200000000L };
    nanosleep(&gap, NULL);
    uint64_t second_in = simtest_now_ns();
    read_samples_once(&second_done);
    CHILD_CHECK(pthread_join(t, NULL) == 0);
    CHILD_CHECK(first_done >= second_in); /* it waited for the second */
    read_samples_once(&third_done);
    CHILD_CHECK(third_done - second_done < 2500000000ULL); /* well under the 5 s wait */
}

/* A read whose meeting nobody else comes to gives up after 5 s, and ends the
 * meeting: the next read goes straight through. */
static void child_a_read_alone_gives_up(void)
{
    clear_env();
    setenv("GPUSLICE_SIM_STATE", g_path, 1);
    setenv("GPUSLICE_SIM_NVML_READ_MEET", "2", 1);
    CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS);
    uint64_t t0 = simtest_now_ns(), first_done = 0, second_done = 0;
    read_samples_once(&first_done);
    CHILD_CHECK(first_done - t0 >= 5000000000ULL);
    read_samples_once(&second_done);
    CHILD_CHECK(second_done - first_done < 2500000000ULL);
}

static void sample_reads_meet_once(void **state)
{
    snprintf(g_path, sizeof(g_path), "/tmp/gpuslice-simtest-config-meet-%d", (int)getpid());
    unlink(g_path);
    assert_int_equal(run_child(child_reads_meet_once), 0);
    unlink(g_path);
    assert_int_equal(run_child(child_a_read_alone_gives_up), 0);
    unlink(g_path);
}

/* An event record takes GPUSLICE_SIM_EVENT_NS of the device, as one between
 * two kernels took an H200 1.3-1.6 us (bench/results/compute-2026-12-03e.md
 * §1): records back to back end that far apart. */
static void child_event_records_take_device_time(void)
{
    clear_env();
    setenv("GPUSLICE_SIM_STATE", g_path, 1);
    setenv("GPUSLICE_SIM_EVENT_NS", "100000", 1); /* 0.1 ms: far above a loaded host's noise */
    CUcontext c;
    CUevent e[3];
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS && cuCtxCreate_v2(&c, 0, 0) == CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        CHILD_CHECK(cuEventCreate(&e[i], 0) == CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        CHILD_CHECK(cuEventRecord(e[i], NULL) == CUDA_SUCCESS);
    CHILD_CHECK(cuEventSynchronize(e[2]) == CUDA_SUCCESS);
    float ms = 0;
    CHILD_CHECK(cuEventElapsedTime(&ms, e[0], e[2]) == CUDA_SUCCESS);
    CHILD_CHECK(ms >= 0.199f && ms < 50.0f); /* two records after the first */
    CHILD_CHECK(cuEventRecord((CUevent)(uintptr_t)0x1234, NULL) == CUDA_ERROR_INVALID_HANDLE);
}

static void event_records_take_the_device_time_configured(void **state)
{
    snprintf(g_path, sizeof(g_path), "/tmp/gpuslice-simtest-config-event-%d", (int)getpid());
    unlink(g_path);
    assert_int_equal(run_child(child_event_records_take_device_time), 0);
    unlink(g_path);
}

/* GPUSLICE_SIM_POWER_INSTANT=0: an NVML without the instantaneous power
 * field, whose own nvmlReturn says NOT_SUPPORTED; the mean still answers. */
static void child_no_instantaneous_power(void)
{
    clear_env();
    setenv("GPUSLICE_SIM_STATE", g_path, 1);
    setenv("GPUSLICE_SIM_POWER_INSTANT", "0", 1);
    nvmlDevice_t d;
    nvmlFieldValue_t v[2] = { { .fieldId = NVML_FI_DEV_POWER_INSTANT }, { .fieldId = NVML_FI_DEV_POWER_AVERAGE } };
    CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetFieldValues(d, 2, v) == NVML_SUCCESS);
    CHILD_CHECK(v[0].nvmlReturn == NVML_ERROR_NOT_SUPPORTED);
    CHILD_CHECK(v[1].nvmlReturn == NVML_SUCCESS && v[1].value.uiVal == 80000);
}

static void the_instantaneous_power_field_can_be_absent(void **state)
{
    snprintf(g_path, sizeof(g_path), "/tmp/gpuslice-simtest-config-power-%d", (int)getpid());
    unlink(g_path);
    assert_int_equal(run_child(child_no_instantaneous_power), 0);
    unlink(g_path);
}

static void config_is_read_when_the_state_is_created(void **state)
{
    snprintf(g_path, sizeof(g_path), "/tmp/gpuslice-simtest-config-%d", (int)getpid());
    unlink(g_path);
    assert_int_equal(run_child(child_three_small_devices), 0);
    assert_int_equal(run_child(child_later_env_is_ignored), 0);
    unlink(g_path);
}

static void child_foreign_file_refused(void)
{
    clear_env();
    setenv("GPUSLICE_SIM_STATE", g_path, 1);
    CHILD_CHECK(cuInit(0) == CUDA_ERROR_INVALID_VALUE);
}

static void child_foreign_file_replaced(void)
{
    clear_env();
    setenv("GPUSLICE_SIM_STATE", g_path, 1);
    int n = 0;
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CHILD_CHECK(cuDeviceGetCount(&n) == CUDA_SUCCESS && n >= 1);
}

static void write_foreign(void)
{
    FILE *f = fopen(g_path, "w");
    assert_non_null(f);
    fputs("not a state file\n", f);
    fclose(f);
}

/* A state file another build left (a rebuilt checkout's demo): refused while
 * a process holds a lock on it (a live user of that build), made anew once
 * none does. */
static void foreign_state_file_is_replaced_only_when_unused(void **state)
{
    snprintf(g_path, sizeof(g_path), "/tmp/gpuslice-simtest-config-foreign-%d", (int)getpid());
    write_foreign();
    int fd = open(g_path, O_RDWR);
    assert_true(fd >= 0);
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 100, .l_len = 1 };
    assert_int_equal(fcntl(fd, F_OFD_SETLK, &fl), 0); /* a live process of that build */
    assert_int_equal(run_child(child_foreign_file_refused), 0);
    close(fd);
    assert_int_equal(run_child(child_foreign_file_replaced), 0);
    struct stat sb;
    assert_int_equal(stat(g_path, &sb), 0);
    assert_true(sb.st_size > 4096); /* a state file now */
    unlink(g_path);
}

static void check_private_usage(void)
{
    nvmlDevice_t d;
    nvmlMemory_t m;
    CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetMemoryInfo(d, &m) == NVML_SUCCESS);
    CHILD_CHECK(m.total == 80 * GIB);
    CHILD_CHECK(m.used == 512 * MIB + 6 * MIB);
}

static void alloc_6mib(void)
{
    CUcontext c;
    CUdeviceptr p;
    CHILD_CHECK(cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS);
    CHILD_CHECK(cuCtxSetCurrent(c) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemAlloc_v2(&p, 5 * MIB + 1) == CUDA_SUCCESS);
}

static void child_private_cuda_first(void)
{
    clear_env();
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    alloc_6mib();
    CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS);
    check_private_usage();
}

static void child_private_nvml_first(void)
{
    clear_env();
    CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS);
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    alloc_6mib();
    check_private_usage();
}

static void private_state_is_shared_by_both_libraries(void **state)
{
    assert_int_equal(run_child(child_private_cuda_first), 0);
    assert_int_equal(run_child(child_private_nvml_first), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_bytes),
        cmocka_unit_test(invalid_values_fail_closed),
        cmocka_unit_test(config_is_read_when_the_state_is_created),
        cmocka_unit_test(sample_reads_take_the_time_configured),
        cmocka_unit_test(sample_reads_meet_once),
        cmocka_unit_test(event_records_take_the_device_time_configured),
        cmocka_unit_test(the_instantaneous_power_field_can_be_absent),
        cmocka_unit_test(foreign_state_file_is_replaced_only_when_unused),
        cmocka_unit_test(private_state_is_shared_by_both_libraries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
