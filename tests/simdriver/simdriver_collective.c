/*
 * Collective kernels through the driver API, between two processes on two
 * devices of one state file: the early rank's collective spins on its device
 * until the late rank arrives (busy in NVML meanwhile), both then run their
 * own work and end together, and the k-th collective matches the k-th.
 * Also cuFuncGetName, and the names a collective must have.
 *
 * The late rank launches only when the parent says so, so every wait is one
 * the parent held it back for: spans have lower bounds that a loaded machine
 * cannot break, and generous upper ones.
 */
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "sim_state.h"
#include "simtest.h"

#define N_US 2000 /* each collective's own work */
#define COLL_NAME "ncclDevKernel_AllReduce_sim:2000:2:0"
#define ROUNDS 3
#define HOLD_MS 300 /* the late rank's first collective waits this long */
#define GAP_MS 50   /* ... and each later one this long after the one before */
#define SLACK_MS 5000.0

static char g_path[256];

static int setup(void **state)
{
    simtest_fresh_state("collective", g_path, sizeof(g_path));
    setenv("GPUSLICE_SIM_DEVICES", "2", 1);
    if (cuInit(0) != CUDA_SUCCESS || nvmlInit_v2() != NVML_SUCCESS)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    nvmlShutdown();
    unlink(g_path);
    return 0;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* A function of a fresh module (any image will do). */
static CUresult get_function(CUfunction *f, const char *name)
{
    static const char image = 0;
    CUmodule m;
    CUresult rc = cuModuleLoadData(&m, &image);
    return rc != CUDA_SUCCESS ? rc : cuModuleGetFunction(f, m, name);
}

static CUresult launch(CUfunction f)
{
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
}

struct rank {
    pid_t pid;
    int to;   /* the late rank's go bytes; closing it lets a rank exit */
    int from; /* acknowledgements, then the report */
};

struct report {
    double span_ms[ROUNDS]; /* from just before each collective to its end */
    uint64_t end_ns;        /* when the last one ended (CLOCK_MONOTONIC) ... */
    uint64_t end_err_ns;    /* ... give or take this */
};

static void child_context(int dev)
{
    CUcontext ctx;
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CHILD_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    CHILD_CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
}

/* Records ev on the default stream; returns its time when the stream was
 * idle, give or take *err. */
static uint64_t record_idle(CUevent ev, uint64_t *err)
{
    CHILD_CHECK(cuEventRecord(ev, NULL) == CUDA_SUCCESS); /* the first call is slow: not timed */
    uint64_t t0 = simtest_now_ns();
    CHILD_CHECK(cuEventRecord(ev, NULL) == CUDA_SUCCESS);
    *err = simtest_now_ns() - t0;
    return t0;
}

/* A rank on device dev: 1 ms of work, then ROUNDS collectives bracketed by
 * events, queued at once (early) or each on a byte from the parent (late).
 * Acknowledges the queueing, reports once all are done, and exits when the
 * parent closes its pipe. */
static void run_rank(int dev, int late, int in, int out)
{
    child_context(dev);
    CUfunction work, coll;
    CHILD_CHECK(get_function(&work, "sleep_us:1000") == CUDA_SUCCESS);
    CHILD_CHECK(get_function(&coll, COLL_NAME) == CUDA_SUCCESS);
    CUevent ref, start[ROUNDS], end[ROUNDS];
    CHILD_CHECK(cuEventCreate(&ref, 0) == CUDA_SUCCESS);
    for (int k = 0; k < ROUNDS; k++)
        CHILD_CHECK(cuEventCreate(&start[k], 0) == CUDA_SUCCESS && cuEventCreate(&end[k], 0) == CUDA_SUCCESS);
    struct report r;
    memset(&r, 0, sizeof(r));
    uint64_t t_ref = record_idle(ref, &r.end_err_ns);
    CHILD_CHECK(launch(work) == CUDA_SUCCESS);
    char c = 'q';
    for (int k = 0; k < ROUNDS; k++) {
        if (late)
            CHILD_CHECK(read(in, &c, 1) == 1);
        CHILD_CHECK(cuEventRecord(start[k], NULL) == CUDA_SUCCESS);
        uint64_t t_launch = simtest_now_ns();
        CHILD_CHECK(launch(coll) == CUDA_SUCCESS);
        CHILD_CHECK(cuEventRecord(end[k], NULL) == CUDA_SUCCESS);
        /* The late rank's launch releases the collective, which ends N us
         * after the launch read the clock. Kept off the CPU longer than that
         * before end[k]'s record, the rank finds it done, and end[k] is
         * stamped when recorded (as a real device stamps it): up to this
         * much after the end. */
        uint64_t took = simtest_now_ns() - t_launch;
        if (late && k == ROUNDS - 1 && took > N_US * 1000ULL)
            r.end_err_ns += took - N_US * 1000ULL;
        if (late)
            CHILD_CHECK(write(out, &c, 1) == 1);
    }
    if (!late)
        CHILD_CHECK(write(out, &c, 1) == 1);
    CHILD_CHECK(cuEventSynchronize(end[ROUNDS - 1]) == CUDA_SUCCESS);
    for (int k = 0; k < ROUNDS; k++) {
        float ms = 0;
        CHILD_CHECK(cuEventElapsedTime(&ms, start[k], end[k]) == CUDA_SUCCESS);
        r.span_ms[k] = ms;
    }
    float to_end = 0;
    CHILD_CHECK(cuEventElapsedTime(&to_end, ref, end[ROUNDS - 1]) == CUDA_SUCCESS);
    r.end_ns = t_ref + (uint64_t)((double)to_end * 1e6);
    CHILD_CHECK(write(out, &r, sizeof(r)) == (ssize_t)sizeof(r));
    while (read(in, &c, 1) > 0) {
    }
    _exit(0);
}

static struct rank spawn_rank(int dev, int late)
{
    int to[2], from[2];
    assert_int_equal(pipe(to), 0);
    assert_int_equal(pipe(from), 0);
    pid_t parent = getpid(), pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* a failed check leaves a rank spinning: it must not outlive the test */
        CHILD_CHECK(prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() == parent);
        for (int fd = 3; fd < 256; fd++) /* other ranks' pipe ends: their EOF must come */
            if (fd != to[0] && fd != from[1])
                close(fd);
        run_rank(dev, late, to[0], from[1]);
    }
    close(to[0]);
    close(from[1]);
    return (struct rank){ pid, to[1], from[0] };
}

static void read_byte(const struct rank *r)
{
    char c;
    assert_int_equal(read(r->from, &c, 1), 1);
}

static struct report read_report(const struct rank *r)
{
    struct report rep;
    assert_int_equal(read(r->from, &rep, sizeof(rep)), sizeof(rep));
    return rep;
}

static void finish(struct rank *r)
{
    simtest_reap(r->pid, r->to, r->from);
}

static nvmlDevice_t nvml_dev(unsigned i)
{
    nvmlDevice_t d;
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(i, &d), NVML_SUCCESS);
    return d;
}

/* The newest NVML utilisation sample of pid on device 0, or -1. */
static int newest_sample(pid_t pid)
{
    nvmlProcessUtilizationSample_t s[SIM_UTIL_SAMPLES];
    unsigned int n = SIM_UTIL_SAMPLES;
    nvmlReturn_t rc = nvmlDeviceGetProcessUtilization(nvml_dev(0), s, &n, 0);
    assert_true(rc == NVML_SUCCESS || rc == NVML_ERROR_NOT_FOUND);
    int pct = -1;
    for (unsigned int i = 0; rc == NVML_SUCCESS && i < n; i++)
        if (s[i].pid == (unsigned int)pid)
            pct = (int)s[i].smUtil;
    return pct;
}

/* While the early rank spins, device 0 is busy, the time is its, and its
 * collective has not completed. The last full sample period began at least
 * 100 ms after the spin did. */
static void expect_spinning(const struct rank *early)
{
    nvmlUtilization_t u;
    assert_int_equal(nvmlDeviceGetUtilizationRates(nvml_dev(0), &u), NVML_SUCCESS);
    assert_int_equal(u.gpu, 100);
    assert_int_equal(newest_sample(early->pid), 100);
    struct pollfd p = { early->from, POLLIN, 0 };
    assert_int_equal(poll(&p, 1, 0), 0);
}

static void an_early_rank_spins_until_the_late_one_arrives(void **state)
{
    struct rank early = spawn_rank(0, 0), late = spawn_rank(1, 1);
    read_byte(&early); /* all queued: it reaches its first collective 1 ms later */
    sleep_ms(HOLD_MS);
    expect_spinning(&early);
    for (int k = 0; k < ROUNDS; k++) {
        if (k)
            sleep_ms(GAP_MS);
        assert_int_equal(write(late.to, "g", 1), 1);
        read_byte(&late); /* it has launched its k-th */
    }
    struct report a = read_report(&early), b = read_report(&late);
    /* the first waited for the late rank's launch, at least HOLD_MS after
     * the early one queued; each later one for the next launch */
    assert_true(a.span_ms[0] >= HOLD_MS && a.span_ms[0] < HOLD_MS + SLACK_MS);
    for (int k = 1; k < ROUNDS; k++)
        assert_true(a.span_ms[k] >= GAP_MS && a.span_ms[k] < GAP_MS + SLACK_MS);
    /* the late rank found its peer there: its own N us and nothing more
     * (float ms: a 1 ns tolerance) ... */
    for (int k = 0; k < ROUNDS; k++)
        assert_true(b.span_ms[k] >= N_US / 1e3 - 1e-6 && b.span_ms[k] < N_US / 1e3 + SLACK_MS);
    /* ... and both ended together, N us after the release */
    uint64_t diff = a.end_ns > b.end_ns ? a.end_ns - b.end_ns : b.end_ns - a.end_ns;
    assert_true(diff <= a.end_err_ns + b.end_err_ns + 1000);
    finish(&early);
    finish(&late);
}

static void a_lone_rank_spins_and_its_death_ends_the_spin(void **state)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        child_context(0);
        CUfunction coll;
        CHILD_CHECK(get_function(&coll, "ncclDevKernel_AllReduce_sim:0:2:7") == CUDA_SUCCESS);
        CHILD_CHECK(launch(coll) == CUDA_SUCCESS);
        sleep_ms(20);
        CHILD_CHECK(cuStreamQuery(NULL) == CUDA_ERROR_NOT_READY); /* no peer: spins on */
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the dead rank's spin is gone with it: device 0 goes idle */
    sleep_ms(250);
    nvmlUtilization_t u;
    assert_int_equal(nvmlDeviceGetUtilizationRates(nvml_dev(0), &u), NVML_SUCCESS);
    assert_int_equal(u.gpu, 0);
}

static void func_get_name_returns_the_name(void **state)
{
    CUcontext ctx;
    assert_int_equal(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    static const char image = 0;
    CUmodule m;
    CUfunction f, g;
    assert_int_equal(cuModuleLoadData(&m, &image), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&f, m, COLL_NAME), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&g, m, "_Z6kernelPf"), CUDA_SUCCESS);
    const char *name = NULL, *again = NULL;
    assert_int_equal(cuFuncGetName(&name, f), CUDA_SUCCESS);
    assert_string_equal(name, COLL_NAME);
    assert_int_equal(cuFuncGetName(&again, f), CUDA_SUCCESS);
    assert_ptr_equal(again, name); /* stable while the function lives */
    assert_int_equal(cuFuncGetName(&name, g), CUDA_SUCCESS);
    assert_string_equal(name, "_Z6kernelPf");
    assert_int_equal(cuFuncGetName(NULL, f), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuFuncGetName(&name, NULL), CUDA_ERROR_INVALID_VALUE);
    int not_a_function = 0;
    assert_int_equal(cuFuncGetName(&name, (CUfunction)(void *)&not_a_function), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
    assert_int_equal(cuFuncGetName(&name, f), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
}

/* A library's kernel is launched through its handle cast to a function and
 * named by cuKernelGetName only; its unload frees the handle for the next
 * kernel loaded. */
static void a_library_kernel_launches_and_its_handle_is_reused_after_the_unload(void **state)
{
    (void)state;
    CUcontext ctx;
    assert_int_equal(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    static const char image = 0;
    CUlibrary lib, lib2;
    CUkernel k, k2;
    const char *name = NULL;
    assert_int_equal(cuLibraryLoadData(&lib, &image, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
    assert_int_equal(cuLibraryGetKernel(&k, lib, "sleep_us:5"), CUDA_SUCCESS);
    assert_int_equal(launch((CUfunction)(void *)k), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(cuKernelGetName(&name, k), CUDA_SUCCESS);
    assert_string_equal(name, "sleep_us:5");
    assert_int_equal(cuFuncGetName(&name, (CUfunction)(void *)k), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuModuleUnload((CUmodule)(void *)lib), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuLibraryUnload(lib), CUDA_SUCCESS);
    assert_int_equal(cuLibraryUnload(lib), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuKernelGetName(&name, k), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuLibraryLoadData(&lib2, &image, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
    assert_int_equal(cuLibraryGetKernel(&k2, lib2, "ncclKernel_sleep_us:5"), CUDA_SUCCESS);
    assert_ptr_equal(k2, k);
    assert_int_equal(cuLibraryUnload(lib2), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
}

/* A context's destroy unloads the modules loaded in it, not the others'. */
static void a_destroyed_context_takes_its_modules_with_it(void **state)
{
    (void)state;
    CUcontext primary, own;
    static const char image = 0;
    CUmodule kept, gone;
    CUfunction f, g;
    const char *name = NULL;
    assert_int_equal(cuDevicePrimaryCtxRetain(&primary, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(primary), CUDA_SUCCESS);
    assert_int_equal(cuModuleLoadData(&kept, &image), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&f, kept, "sleep_us:1"), CUDA_SUCCESS);
    assert_int_equal(cuCtxCreate_v2(&own, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuModuleLoadData(&gone, &image), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&g, gone, "sleep_us:2"), CUDA_SUCCESS);
    assert_int_equal(cuCtxDestroy_v2(own), CUDA_SUCCESS);
    assert_int_equal(cuFuncGetName(&name, g), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuModuleUnload(gone), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuFuncGetName(&name, f), CUDA_SUCCESS);
    assert_string_equal(name, "sleep_us:1");
    assert_int_equal(cuModuleUnload(kept), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
}

static void a_collective_name_must_be_whole(void **state)
{
    static const char *const bad[] = {
        "ncclDevKernel_AllReduce_sim:10:1:0",
        "ncclDevKernel_AllReduce_sim:10:9:0",
        "ncclDevKernel_AllReduce_sim:10:2:8",
        "ncclDevKernel_AllReduce_sim:10:2",
        "ncclDevKernel_AllReduce_sim:10:2:0:1",
        "ncclDevKernel_AllReduce_sim:-1:2:0",
        "ncclDevKernel_AllReduce_sim: 10:2:0",
        "ncclDevKernel_AllReduce_sim:10:2:0x",
        "ncclDevKernel_AllReduce_sim:",
        "ncclDevKernel_AllReduce_sim:1000000001:2:0",
        "ncclDevKernel_AllReduce_sim:10:4294967298:0",
    };
    CUcontext ctx;
    assert_int_equal(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    static const char image = 0;
    CUmodule m;
    CUfunction f;
    assert_int_equal(cuModuleLoadData(&m, &image), CUDA_SUCCESS);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (cuModuleGetFunction(&f, m, bad[i]) != CUDA_ERROR_INVALID_VALUE)
            fail_msg("%s was accepted", bad[i]);
    assert_int_equal(cuModuleGetFunction(&f, m, "ncclDevKernel_AllReduce_sim:0:8:7"), CUDA_SUCCESS);
    /* without the colon it is any kernel: it takes no time */
    assert_int_equal(cuModuleGetFunction(&f, m, "ncclDevKernel_AllReduce_sim"), CUDA_SUCCESS);
    assert_int_equal(launch(f), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(NULL), CUDA_SUCCESS);
    assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_early_rank_spins_until_the_late_one_arrives),
        cmocka_unit_test(a_lone_rank_spins_and_its_death_ends_the_spin),
        cmocka_unit_test(func_get_name_returns_the_name),
        cmocka_unit_test(a_library_kernel_launches_and_its_handle_is_reused_after_the_unload),
        cmocka_unit_test(a_destroyed_context_takes_its_modules_with_it),
        cmocka_unit_test(a_collective_name_must_be_whole),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
