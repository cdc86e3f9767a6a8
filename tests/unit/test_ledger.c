/* The device ledger (src/core/ledger.c): the processor-sharing virtual clock
 * shared by the containers on one GPU, in simulated time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ledger.h"

#define MS 1000000ULL

static struct gs_ledger *fresh(char *path, size_t len)
{
    snprintf(path, len, "/tmp/gs-ledger-test-%d-XXXXXX", (int)getpid());
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char err[256];
    struct gs_ledger *l = gs_ledger_open(path, err, sizeof err);
    assert_non_null(l);
    return l;
}

static void two_containers_overlapping_get_half_each(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 1, 0, 11), b = gs_ledger_join(l, 200, 1, 0, 22);
    assert_true(a >= 0 && b >= 0 && a != b);
    double a0 = gs_ledger_window(l, a, +1, 1000 * MS);       /* a alone for 10 ms */
    double b0 = gs_ledger_window(l, b, +1, 1010 * MS);       /* both for 10 ms */
    double a1 = gs_ledger_window(l, a, -1, 1020 * MS);       /* b alone for 10 ms */
    double b1 = gs_ledger_window(l, b, -1, 1030 * MS);
    assert_true(a1 - a0 > 14.99 * MS && a1 - a0 < 15.01 * MS); /* 10 + 10/2 */
    assert_true(b1 - b0 > 14.99 * MS && b1 - b0 < 15.01 * MS);
    assert_int_equal(gs_ledger_others(l, 11), 1);
    gs_ledger_close(l);
    unlink(path);
}

static void processes_of_one_container_count_once(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 1, 0, 11), b = gs_ledger_join(l, 101, 1, 0, 11);
    double a0 = gs_ledger_window(l, a, +1, 1000 * MS);
    gs_ledger_window(l, b, +1, 1000 * MS);
    gs_ledger_window(l, a, +1, 1000 * MS); /* a second thread of a */
    double a1 = gs_ledger_window(l, a, -1, 1010 * MS);
    assert_true(a1 - a0 > 9.99 * MS && a1 - a0 < 10.01 * MS);
    assert_int_equal(gs_ledger_others(l, 11), 0);
    gs_ledger_close(l);
    unlink(path);
}

static int g_dead_pid;
static int alive_but(int32_t pid, uint64_t start_time, uint64_t pidns)
{
    (void)start_time;
    (void)pidns;
    return pid != g_dead_pid;
}

static void a_dead_member_with_open_windows_is_reaped(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 1, 0, 11), b = gs_ledger_join(l, 200, 1, 0, 22);
    gs_ledger_window(l, b, +1, 1000 * MS); /* b opens a window and dies */
    g_dead_pid = 200;
    double a0 = gs_ledger_window(l, a, +1, 1000 * MS);
    gs_ledger_reap(l, 1000 * MS, alive_but);
    double a1 = gs_ledger_window(l, a, -1, 1010 * MS);
    assert_true(a1 - a0 > 9.99 * MS); /* alone again: the whole GPU */
    assert_int_equal(gs_ledger_others(l, 11), 0);
    gs_ledger_close(l);
    unlink(path);
}

static void a_holder_killed_inside_the_lock_does_not_deadlock(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 1, 0, 11);
    pid_t child = fork();
    if (child == 0) {
        pthread_mutex_lock(&l->lock);
        l->active = 7; /* half-way through an update */
        _exit(0);
    }
    int st = 0;
    waitpid(child, &st, 0);
    double v0 = gs_ledger_window(l, a, +1, 1000 * MS); /* EOWNERDEAD: recounted, not stuck */
    assert_int_equal(l->active, 1);
    double v1 = gs_ledger_window(l, a, -1, 1010 * MS);
    assert_true(v1 - v0 > 9.99 * MS);
    gs_ledger_close(l);
    unlink(path);
}

static void a_file_of_another_layout_is_refused(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "/tmp/gs-ledger-bad-%d", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not a ledger", f);
    fclose(f);
    char err[256] = "";
    assert_null(gs_ledger_open(path, err, sizeof err));
    assert_non_null(strstr(err, "another gpuslice version"));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_containers_overlapping_get_half_each),
        cmocka_unit_test(processes_of_one_container_count_once),
        cmocka_unit_test(a_dead_member_with_open_windows_is_reaped),
        cmocka_unit_test(a_holder_killed_inside_the_lock_does_not_deadlock),
        cmocka_unit_test(a_file_of_another_layout_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
