/*
 * Several processes on one state file: shared usage, cross-process OOM,
 * memory freed at process death (SIGKILL included, zombie or not), PID reuse,
 * processes of two pid namespaces,
 * a lock holder dying, IPC between processes, and gpuslice-simctl's output.
 */
#define _GNU_SOURCE /* unshare */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "sim_state.h"
#include "simtest.h"

static char g_path[256];

static int setup(void **state)
{
    simtest_fresh_state("multiprocess", g_path, sizeof(g_path));
    setenv("GPUSLICE_SIM_MEM", "16GiB", 1);
    setenv("GPUSLICE_SIM_CTX_OVERHEAD", "512MiB", 1);
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

static nvmlDevice_t dev0(void)
{
    nvmlDevice_t d;
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_SUCCESS);
    return d;
}

static uint64_t nvml_used(void)
{
    nvmlMemory_t m;
    assert_int_equal(nvmlDeviceGetMemoryInfo(dev0(), &m), NVML_SUCCESS);
    return m.used;
}

/* NVML's view of one process's usage, or -1 if it is not listed. */
static long long nvml_proc_used(pid_t pid)
{
    nvmlProcessInfo_t info[SIM_MAX_PROCS];
    unsigned int n = SIM_MAX_PROCS;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(dev0(), &n, info), NVML_SUCCESS);
    for (unsigned int i = 0; i < n; i++)
        if (info[i].pid == (unsigned int)pid)
            return (long long)info[i].usedGpuMemory;
    return -1;
}

struct child {
    pid_t pid;
    int go;    /* parent closes it to let the child exit */
    int ready; /* child writes its report here */
};

struct report {
    CUresult alloc_rc;
    size_t free_b;
    CUdeviceptr ptr;
    CUipcMemHandle ipc;
};

/* What a child does: retain the primary context, allocate `bytes` (if
 * any), report, and wait for the parent before exiting. */
static void child_main(uint64_t bytes, int go, int ready)
{
    struct report r = { 0 };
    CUcontext ctx;
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CHILD_CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHILD_CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    if (bytes) {
        r.alloc_rc = cuMemAlloc_v2(&r.ptr, bytes);
        if (r.alloc_rc == CUDA_SUCCESS)
            CHILD_CHECK(cuIpcGetMemHandle(&r.ipc, r.ptr) == CUDA_SUCCESS);
    }
    size_t total;
    CHILD_CHECK(cuMemGetInfo_v2(&r.free_b, &total) == CUDA_SUCCESS);
    CHILD_CHECK(write(ready, &r, sizeof(r)) == (ssize_t)sizeof(r));
    char c;
    while (read(go, &c, 1) > 0) {
    }
    _exit(0);
}

/* Runs child_main in a pid namespace of its own with a /proc of its own, as
 * a container's process: pid 1 there, unable to see the parent's /proc. The
 * go-between forks it and exits with it; killed, it takes the child along. */
static void child_in_own_pidns(uint64_t bytes, int go, int ready)
{
    CHILD_CHECK(unshare(CLONE_NEWPID | CLONE_NEWNS) == 0);
    pid_t pid = fork();
    CHILD_CHECK(pid >= 0);
    if (pid == 0) {
        CHILD_CHECK(prctl(PR_SET_PDEATHSIG, SIGKILL) == 0);
        CHILD_CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
        CHILD_CHECK(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0);
        CHILD_CHECK(getpid() == 1);
        child_main(bytes, go, ready);
    }
    close(go);
    close(ready);
    int status = 0;
    CHILD_CHECK(waitpid(pid, &status, 0) == pid);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

/* A child running child_main, in a pid namespace of its own or ours. */
static struct child spawn_as(uint64_t bytes, int own_pidns)
{
    int go[2], ready[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Drop other children's pipe ends, or their "go" would never reach EOF. */
        for (int fd = 3; fd < 256; fd++)
            if (fd != go[0] && fd != ready[1])
                close(fd);
        if (own_pidns)
            child_in_own_pidns(bytes, go[0], ready[1]);
        child_main(bytes, go[0], ready[1]);
    }
    close(go[0]);
    close(ready[1]);
    return (struct child){ pid, go[1], ready[0] };
}

static struct child spawn(uint64_t bytes)
{
    return spawn_as(bytes, 0);
}

static struct report wait_ready(const struct child *c)
{
    struct report r;
    assert_int_equal(read(c->ready, &r, sizeof(r)), sizeof(r));
    return r;
}

static void finish(struct child *c)
{
    simtest_reap(c->pid, c->go, c->ready);
}

static void usage_is_shared_by_all_processes(void **state)
{
    assert_int_equal(nvml_used(), 0);
    struct child a = spawn(1 * GIB), b = spawn(2 * GIB);
    struct report ra = wait_ready(&a), rb = wait_ready(&b);
    assert_int_equal(ra.alloc_rc, CUDA_SUCCESS);
    assert_int_equal(rb.alloc_rc, CUDA_SUCCESS);
    assert_int_equal(nvml_used(), 2 * 512 * MIB + 3 * GIB);
    assert_int_equal(nvml_proc_used(a.pid), 512 * MIB + 1 * GIB);
    assert_int_equal(nvml_proc_used(b.pid), 512 * MIB + 2 * GIB);
    /* Whoever reported last saw both processes in cuMemGetInfo. */
    size_t lowest = ra.free_b < rb.free_b ? ra.free_b : rb.free_b;
    assert_int_equal(lowest, 16 * GIB - (2 * 512 * MIB + 3 * GIB));
    finish(&a);
    finish(&b);
    assert_int_equal(nvml_used(), 0);
    assert_int_equal(nvml_proc_used(a.pid), -1);
}

static void allocation_fails_when_another_process_holds_the_memory(void **state)
{
    struct child a = spawn(12 * GIB);
    assert_int_equal(wait_ready(&a).alloc_rc, CUDA_SUCCESS);
    struct child b = spawn(4 * GIB); /* 12.5 + 0.5 + 4 > 16 */
    assert_int_equal(wait_ready(&b).alloc_rc, CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(nvml_proc_used(b.pid), 512 * MIB);
    finish(&a);
    finish(&b);
    assert_int_equal(nvml_used(), 0);
}

static void sigkill_frees_memory_at_once(void **state)
{
    struct child a = spawn(5 * GIB);
    assert_int_equal(wait_ready(&a).alloc_rc, CUDA_SUCCESS);
    assert_int_equal(nvml_used(), 512 * MIB + 5 * GIB);
    assert_int_equal(kill(a.pid, SIGKILL), 0);
    /* Not reaped yet: a zombie holds no GPU memory either. */
    for (int i = 0; i < 1000 && nvml_used() != 0; i++)
        usleep(1000);
    assert_int_equal(nvml_used(), 0);
    assert_int_equal(nvml_proc_used(a.pid), -1);
    int status;
    close(a.go);
    close(a.ready);
    assert_int_equal(waitpid(a.pid, &status, 0), a.pid);
    assert_true(WIFSIGNALED(status));
}

static struct sim_state *map_state(void)
{
    int fd = open(g_path, O_RDWR);
    assert_true(fd >= 0);
    void *p = mmap(NULL, sizeof(struct sim_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    assert_true(p != MAP_FAILED);
    return p;
}

static void lock_raw(struct sim_state *st)
{
    int rc = pthread_mutex_lock(&st->lock);
    if (rc == EOWNERDEAD)
        pthread_mutex_consistent(&st->lock);
    else
        assert_int_equal(rc, 0);
}

static void reused_pid_is_not_mistaken_for_the_old_process(void **state)
{
    struct sim_state *st = map_state();
    lock_raw(st);
    /* A slot left by an earlier process that had our pid: same pid, other start time. */
    int slot = SIM_MAX_PROCS - 1;
    assert_int_equal(st->procs[slot].pid, 0);
    st->procs[slot].pid = getpid();
    st->procs[slot].start_time = 12345;
    st->procs[slot].used[0] = 3 * GIB;
    st->procs[slot].contexts[0] = 1;
    pthread_mutex_unlock(&st->lock);
    assert_int_equal(nvml_used(), 0);
    assert_int_equal(st->procs[slot].pid, 0);
    munmap(st, sizeof(*st));
}

static void lock_holder_death_is_recovered(void **state)
{
    struct child a = spawn(1 * GIB);
    assert_int_equal(wait_ready(&a).alloc_rc, CUDA_SUCCESS);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct sim_state *st = map_state();
        lock_raw(st);
        for (int i = 0; i < SIM_MAX_PROCS; i++) /* a half-done update: counters out of step */
            if (st->procs[i].pid == a.pid)
                st->procs[i].used[0] += 7 * MIB;
        raise(SIGKILL);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    /* The next locker repairs the counters from the tables. */
    assert_int_equal(nvml_used(), 512 * MIB + 1 * GIB);
    finish(&a);
    assert_int_equal(nvml_used(), 0);
}

static void ipc_import_charges_nothing_new(void **state)
{
    CUcontext ctx;
    assert_int_equal(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    struct child a = spawn(3 * MIB);
    struct report ra = wait_ready(&a);
    assert_int_equal(ra.alloc_rc, CUDA_SUCCESS);
    uint64_t before = nvml_used();
    CUdeviceptr p1, p2;
    assert_int_equal(cuIpcOpenMemHandle_v2(&p1, ra.ipc, 1), CUDA_SUCCESS);
    assert_int_equal(cuIpcOpenMemHandle(&p2, ra.ipc, 0), CUDA_SUCCESS);
    assert_int_equal(p1, p2); /* opened twice: same mapping */
    assert_int_equal(nvml_used(), before);
    CUdeviceptr base;
    size_t size;
    assert_int_equal(cuMemGetAddressRange_v2(&base, &size, p1 + 10), CUDA_SUCCESS);
    assert_int_equal(base, p1);
    assert_int_equal(size, 3 * MIB);
    assert_int_equal(cuIpcCloseMemHandle(p1), CUDA_SUCCESS);
    assert_int_equal(cuIpcCloseMemHandle(p1), CUDA_SUCCESS);
    assert_int_equal(cuIpcCloseMemHandle(p1), CUDA_ERROR_INVALID_VALUE);
    finish(&a);
    /* The exporter is gone: its handle no longer opens. */
    assert_int_equal(cuIpcOpenMemHandle_v2(&p1, ra.ipc, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    assert_int_equal(nvml_used(), 0);
}

static void forked_child_starts_without_cuda_state(void **state)
{
    CUcontext ctx;
    assert_int_equal(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    pid_t pid = fork();
    if (pid == 0) {
        CUdeviceptr p;
        CHILD_CHECK(cuMemAlloc_v2(&p, 1) == CUDA_ERROR_NOT_INITIALIZED);
        CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
        CHILD_CHECK(cuMemAlloc_v2(&p, 1) == CUDA_ERROR_INVALID_CONTEXT);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(nvml_proc_used(getpid()), 512 * MIB);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
}

/* Two containers' processes, each pid 1 of its own pid namespace with its
 * own /proc: neither is taken for the other or for dead; NVML reports a pid
 * that is neither's own (the real driver reports host pids); a killed one
 * is freed. */
static void processes_in_two_pid_namespaces_are_told_apart(void **state)
{
    if (geteuid() != 0) {
        skip(); /* unshare(CLONE_NEWPID) and mounting /proc need root */
    }
    struct child a = spawn_as(1 * GIB, 1), b = spawn_as(2 * GIB, 1);
    assert_int_equal(wait_ready(&a).alloc_rc, CUDA_SUCCESS);
    assert_int_equal(wait_ready(&b).alloc_rc, CUDA_SUCCESS);
    assert_int_equal(nvml_used(), 2 * 512 * MIB + 3 * GIB);
    nvmlProcessInfo_t info[SIM_MAX_PROCS];
    unsigned int n = SIM_MAX_PROCS;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(dev0(), &n, info), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_not_equal(info[0].pid, info[1].pid);
    for (unsigned int i = 0; i < n; i++)
        assert_true(info[i].pid >= SIM_FOREIGN_PID_BASE && info[i].pid < SIM_FOREIGN_PID_BASE + SIM_MAX_PROCS);
    assert_int_equal(kill(a.pid, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(a.pid, &status, 0), a.pid);
    close(a.go);
    close(a.ready);
    /* The go-between is gone; its child dies of it (PR_SET_PDEATHSIG) soon after. */
    for (int i = 0; i < 1000 && nvml_used() != 512 * MIB + 2 * GIB; i++)
        usleep(10000);
    assert_int_equal(nvml_used(), 512 * MIB + 2 * GIB);
    finish(&b);
    assert_int_equal(nvml_used(), 0);
}

static void simctl_prints_the_state(void **state)
{
    struct child a = spawn(10 * MIB);
    assert_int_equal(wait_ready(&a).alloc_rc, CUDA_SUCCESS);
    char cmd[512], line[256], want_proc[128];
    snprintf(cmd, sizeof(cmd), "%s %s", SIMCTL_PATH, g_path);
    snprintf(want_proc, sizeof(want_proc), "process %d device 0 used %llu contexts 1\n", (int)a.pid,
             512 * MIB + 10 * MIB);
    char want_dev[256];
    snprintf(want_dev, sizeof(want_dev),
             "device 0 uuid GPU-00000000-5151-0000-0000-000000000000 total %llu used %llu free "
             "%llu\n",
             16 * GIB, 522 * MIB, 16 * GIB - 522 * MIB);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    int saw_dev = 0, saw_proc = 0;
    while (fgets(line, sizeof(line), f)) {
        saw_dev |= strcmp(line, want_dev) == 0;
        saw_proc |= strcmp(line, want_proc) == 0;
    }
    assert_int_equal(pclose(f), 0);
    assert_true(saw_dev);
    assert_true(saw_proc);
    finish(&a);
}

/* Processes and threads allocating at once never overshoot and leave no residue. */
static void *churn_thread(void *arg)
{
    CUcontext ctx = arg;
    if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return (void *)1;
    for (int i = 0; i < 300; i++) {
        CUdeviceptr small, big;
        if (cuMemAlloc_v2(&small, 1000) != CUDA_SUCCESS)
            return (void *)2;
        CUresult rc = cuMemAlloc_v2(&big, 3 * GIB); /* not all of these fit at once */
        if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_OUT_OF_MEMORY)
            return (void *)3;
        size_t f, t;
        if (cuMemGetInfo_v2(&f, &t) != CUDA_SUCCESS || f > t)
            return (void *)4;
        if (rc == CUDA_SUCCESS && cuMemFree_v2(big) != CUDA_SUCCESS)
            return (void *)5;
        if (cuMemFree_v2(small) != CUDA_SUCCESS)
            return (void *)6;
    }
    return NULL;
}

static void concurrent_allocators_stay_consistent(void **state)
{
    pid_t pids[4];
    for (int p = 0; p < 4; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            CUcontext ctx;
            CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
            CHILD_CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
            pthread_t th[3];
            for (int i = 0; i < 3; i++)
                CHILD_CHECK(pthread_create(&th[i], NULL, churn_thread, ctx) == 0);
            for (int i = 0; i < 3; i++) {
                void *ret = (void *)1;
                CHILD_CHECK(pthread_join(th[i], &ret) == 0);
                CHILD_CHECK(ret == NULL);
            }
            CHILD_CHECK(cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS);
            _exit(0);
        }
        assert_true(pids[p] > 0);
    }
    for (int p = 0; p < 4; p++) {
        int status;
        assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    assert_int_equal(nvml_used(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(usage_is_shared_by_all_processes),
        cmocka_unit_test(allocation_fails_when_another_process_holds_the_memory),
        cmocka_unit_test(sigkill_frees_memory_at_once),
        cmocka_unit_test(reused_pid_is_not_mistaken_for_the_old_process),
        cmocka_unit_test(lock_holder_death_is_recovered),
        cmocka_unit_test(ipc_import_charges_nothing_new),
        cmocka_unit_test(forked_child_starts_without_cuda_state),
        cmocka_unit_test(processes_in_two_pid_namespaces_are_told_apart),
        cmocka_unit_test(simctl_prints_the_state),
        cmocka_unit_test(concurrent_allocators_stay_consistent),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
