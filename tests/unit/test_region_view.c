/* region_view: a viewer reads a tenant's region as hostile input. Whatever
 * the file is (flipping size while read, a FIFO, a symlink, a directory, a
 * lying header), the reader returns an error and never crashes or hangs;
 * a valid region reads back whole, with a slot alive exactly while its
 * process lives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "region_view.h"

static char dir[] = "/tmp/gs-region-view-XXXXXX";
static char path[sizeof dir + 32];

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof path, "%s/c.region", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[sizeof dir + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A fresh, valid region with one device, at path. */
static void make_region(void)
{
    unlink(path);
    char err[256];
    struct gs_region *r = gs_region_open(path, 1, NULL, err, sizeof err);
    assert_non_null(r);
    assert_int_equal(gs_region_device(r, "GPU-test", 1 << 30), 0);
    gs_region_close(r, -1);
}

static void expect_refused(const char *why_part)
{
    char err[256] = "";
    struct gs_region_view *v = gs_region_view_open(path, err, sizeof err);
    assert_null(v);
    assert_non_null(strstr(err, why_part));
}

static void patch(off_t at, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, data, len, at), (ssize_t)len);
    close(fd);
}

/* Descriptor getters for gs_region_reserve, counting how often the
 * region asks. */
static int fd_asks;
static int own_fd = -1;

static int counted_fd(void)
{
    fd_asks++;
    return own_fd;
}

static int no_fd(void)
{
    fd_asks++;
    return -1;
}

static void test_valid_region_and_liveness(void **state)
{
    (void)state;
    make_region();
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char err[256];
        int fd = -1;
        struct gs_region *r = gs_region_open(path, 0, &fd, err, sizeof err);
        int slot = r ? gs_region_attach(r, fd) : -1;
        char c = slot >= 0 && gs_region_reserve(r, no_fd, slot, 0, 4096) == 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    char err[256];
    struct gs_region_view *v = gs_region_view_open(path, err, sizeof err);
    assert_non_null(v);
    int live = 0;
    assert_int_equal(v->r.ndevices, 1);
    assert_string_equal(v->r.dev[0].uuid, "GPU-test");
    assert_int_equal(gs_region_view_used(v, 0, &live), 4096);
    assert_int_equal(live, 1);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* Same snapshot, asked again: the slot's lock died with its holder. */
    assert_int_equal(gs_region_view_used(v, 0, &live), 0);
    assert_int_equal(live, 0);
    gs_region_view_free(v);
    close(ready[0]);
    close(ready[1]);
}

/* A reservation that fits never asks for the descriptor (no syscall on an
 * allocation's way); one that does not reclaims a dead process's slot
 * through it, and with no descriptor takes every slot for alive. */
static void test_a_dead_slot_is_reclaimed_only_when_the_limit_is_in_the_way(void **state)
{
    (void)state;
    make_region();
    const uint64_t mib = 1 << 20;
    char err[256];
    struct gs_region *r = gs_region_open(path, 0, &own_fd, err, sizeof err);
    assert_non_null(r);
    int slot = gs_region_attach(r, own_fd);
    assert_true(slot >= 0);
    /* a process that dies holding 768 MiB after we attached (attaching
     * reclaims the dead already gone) */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = -1;
        struct gs_region *mine = gs_region_open(path, 0, &fd, err, sizeof err);
        int s = mine ? gs_region_attach(mine, fd) : -1;
        _exit(s >= 0 && gs_region_reserve(mine, no_fd, s, 0, 768 * mib) == 0 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    fd_asks = 0;
    assert_int_equal(gs_region_reserve(r, counted_fd, slot, 0, 128 * mib), 0);
    assert_int_equal(fd_asks, 0);
    assert_int_equal(gs_region_reserve(r, no_fd, slot, 0, 512 * mib), -1);
    assert_int_equal(fd_asks, 1);
    assert_int_equal(r->dev[0].mem_used, 896 * mib);
    assert_int_equal(gs_region_reserve_overhead(r, counted_fd, slot, 0, 512 * mib), 0);
    assert_int_equal(fd_asks, 2);
    assert_int_equal(r->dev[0].mem_used, 640 * mib);
    assert_int_equal(gs_region_reserve(r, counted_fd, slot, 0, 512 * mib), -1);
    assert_int_equal(fd_asks, 3);
    gs_region_close(r, own_fd);
    own_fd = -1;
}

static void test_size_flips_while_read(void **state)
{
    (void)state;
    make_region();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a reader killed by SIGBUS must not leave us flipping */
        int fd = open(path, O_WRONLY);
        for (;;) {
            if (ftruncate(fd, sizeof(struct gs_region) / 2) != 0 || ftruncate(fd, sizeof(struct gs_region)) != 0 ||
                ftruncate(fd, sizeof(struct gs_region) + 4096) != 0 || ftruncate(fd, sizeof(struct gs_region)) != 0)
                _exit(1);
        }
    }
    int ok = 0, refused = 0;
    for (int i = 0; i < 2000; i++) {
        char err[256] = "";
        struct gs_region_view *v = gs_region_view_open(path, err, sizeof err);
        if (v) {
            assert_int_equal(v->r.ndevices, 1);
            ok++;
        } else {
            assert_true(err[0] != '\0');
            refused++;
        }
        gs_region_view_free(v);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_int_equal(ok + refused, 2000);
    /* Deterministic ends of the same race. */
    assert_int_equal(truncate(path, sizeof(struct gs_region) / 2), 0);
    expect_refused("not a region");
    assert_int_equal(truncate(path, sizeof(struct gs_region) + 1), 0);
    expect_refused("not a region");
}

static void test_fifo_symlink_directory(void **state)
{
    (void)state;
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0); /* no writer: a blocking open would hang */
    expect_refused("not a region");
    unlink(path);
    char target[sizeof path + 8];
    snprintf(target, sizeof target, "%s.real", path);
    rename(path, target);
    make_region();
    rename(path, target);
    assert_int_equal(symlink(target, path), 0);
    expect_refused("cannot open");
    unlink(path);
    assert_int_equal(mkdir(path, 0700), 0);
    expect_refused("not a region");
    rmdir(path);
}

static void test_lying_header_and_garbage(void **state)
{
    (void)state;
    make_region();
    uint32_t huge = 0xFFFFFFFFU;
    patch(offsetof(struct gs_region, ndevices), &huge, sizeof huge);
    expect_refused("corrupt header");

    make_region();
    uint32_t version = GS_REGION_VERSION - 1;
    patch(offsetof(struct gs_region, version), &version, sizeof version);
    expect_refused("layout version");

    make_region();
    char uuid[GS_REGION_UUID_LEN];
    memset(uuid, 'A', sizeof uuid); /* no terminating NUL */
    patch(offsetof(struct gs_region, dev), uuid, sizeof uuid);
    expect_refused("corrupt entry for device 0");

    make_region();
    uint64_t limit = UINT64_MAX - 5; /* would wrap `gpuslice top`'s sum of the limits on a GPU */
    patch(offsetof(struct gs_region, dev[0].mem_limit), &limit, sizeof limit);
    expect_refused("corrupt entry for device 0");

    make_region();
    int32_t pid = -7;
    patch(offsetof(struct gs_region, proc[3].pid), &pid, sizeof pid);
    expect_refused("corrupt process slot 3");

    make_region();
    uint64_t bytes = UINT64_MAX - 5; /* would wrap a sum of usage */
    patch(offsetof(struct gs_region, proc[9].mem_used[0]), &bytes, sizeof bytes);
    expect_refused("corrupt process slot 9");

    make_region();
    static unsigned char junk[sizeof(struct gs_region)];
    srand(7);
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)rand();
    patch(offsetof(struct gs_region, proc), junk, sizeof junk - offsetof(struct gs_region, proc));
    expect_refused("corrupt process slot");
    patch(0, junk, sizeof junk);
    expect_refused("not a gpuslice region");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_region_and_liveness),
        cmocka_unit_test(test_a_dead_slot_is_reclaimed_only_when_the_limit_is_in_the_way),
        cmocka_unit_test(test_size_flips_while_read),
        cmocka_unit_test(test_fifo_symlink_directory),
        cmocka_unit_test(test_lying_header_and_garbage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
