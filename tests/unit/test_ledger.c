/* The device ledger (src/core/ledger.c): the processor-sharing virtual clock
 * shared by the containers on one GPU, in simulated time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
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

#define FAR (1000000 * MS) /* an expiry that never comes in these tests */

/* Opens a window that does not want the turn; the virtual clock then. */
static double open_at(struct gs_ledger *l, int slot, uint64_t now)
{
    double v = -1;
    uint32_t seq;
    assert_int_equal(gs_ledger_open_window(l, slot, now, FAR, 0, &v, &seq), 0);
    return v;
}

static void two_containers_overlapping_get_half_each(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 1, 0, 11, 100), b = gs_ledger_join(l, 200, 1, 0, 22, 100);
    assert_true(a >= 0 && b >= 0 && a != b);
    double a0 = open_at(l, a, 1000 * MS);       /* a alone for 10 ms */
    double b0 = open_at(l, b, 1010 * MS);       /* both for 10 ms */
    double a1 = gs_ledger_close_window(l, a, 1020 * MS);       /* b alone for 10 ms */
    double b1 = gs_ledger_close_window(l, b, 1030 * MS);
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
    int a = gs_ledger_join(l, 100, 1, 0, 11, 100), b = gs_ledger_join(l, 101, 1, 0, 11, 100);
    double a0 = open_at(l, a, 1000 * MS);
    open_at(l, b, 1000 * MS);
    open_at(l, a, 1000 * MS); /* a second thread of a */
    double a1 = gs_ledger_close_window(l, a, 1010 * MS);
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
    int a = gs_ledger_join(l, 100, 1, 0, 11, 100), b = gs_ledger_join(l, 200, 1, 0, 22, 100);
    open_at(l, b, 1000 * MS); /* b opens a window and dies */
    g_dead_pid = 200;
    double a0 = open_at(l, a, 1000 * MS);
    gs_ledger_reap(l, 1000 * MS, alive_but);
    double a1 = gs_ledger_close_window(l, a, 1010 * MS);
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
    int a = gs_ledger_join(l, 100, 1, 0, 11, 100);
    pid_t child = fork();
    if (child == 0) {
        pthread_mutex_lock(&l->lock);
        l->active = 7; /* half-way through an update */
        _exit(0);
    }
    int st = 0;
    waitpid(child, &st, 0);
    double v0 = open_at(l, a, 1000 * MS); /* EOWNERDEAD: recounted, not stuck */
    assert_int_equal(l->active, 1);
    double v1 = gs_ledger_close_window(l, a, 1010 * MS);
    assert_true(v1 - v0 > 9.99 * MS);
    gs_ledger_close(l);
    unlink(path);
}

static void a_window_past_its_expiry_stops_counting(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 1, 0, 11, 100), b = gs_ledger_join(l, 200, 1, 0, 22, 100);
    double v;
    uint32_t seq;
    /* a's window expires at 1010 ms: its thread went idle without closing it */
    assert_int_equal(gs_ledger_open_window(l, a, 1000 * MS, 1010 * MS, 0, &v, &seq), 0);
    double b0 = open_at(l, b, 1000 * MS);
    double b1 = gs_ledger_close_window(l, b, 1030 * MS);
    assert_true(b1 - b0 > 24.99 * MS && b1 - b0 < 25.01 * MS); /* 10/2 + 20 */
    assert_int_equal(l->active, 0);
    gs_ledger_close(l);
    unlink(path);
}

static void capped_containers_take_turns(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 1, 0, 11, 100), a2 = gs_ledger_join(l, 101, 1, 0, 11, 100);
    int b = gs_ledger_join(l, 200, 1, 0, 22, 100), c = gs_ledger_join(l, 300, 1, 0, 33, 100);
    double v;
    uint32_t seq = 0;
    assert_int_equal(gs_ledger_open_window(l, a, 1000 * MS, 1050 * MS, 1, &v, &seq), 0);
    /* b must wait (at most until a's turn expires); a's other process need not */
    assert_int_equal(gs_ledger_open_window(l, b, 1010 * MS, 1060 * MS, 1, &v, &seq), 40 * MS);
    uint32_t seq_b = seq;
    assert_int_equal(gs_ledger_open_window(l, a2, 1010 * MS, 1070 * MS, 1, &v, &seq), 0);
    assert_int_equal(l->active, 1); /* b's refused window does not count */
    /* a share-mode window (no turn) overlaps whatever holds the turn */
    assert_int_equal(gs_ledger_open_window(l, c, 1010 * MS, 1070 * MS, 0, &v, &seq), 0);
    gs_ledger_close_window(l, c, 1015 * MS);
    gs_ledger_close_window(l, a, 1020 * MS);
    assert_int_equal(gs_ledger_open_window(l, b, 1020 * MS, 1060 * MS, 1, &v, &seq), 50 * MS); /* a2 still open */
    gs_ledger_close_window(l, a2, 1025 * MS);
    assert_true(l->turn_seq != seq_b); /* released: waiters wake */
    assert_int_equal(gs_ledger_open_window(l, b, 1025 * MS, 1060 * MS, 1, &v, &seq), 0);
    assert_int_equal(gs_ledger_open_window(l, a, 1030 * MS, 1080 * MS, 1, &v, &seq), 30 * MS);
    gs_ledger_close(l);
    unlink(path);
}

static void an_expired_or_dead_holder_loses_the_turn(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 1, 0, 11, 100), b = gs_ledger_join(l, 200, 1, 0, 22, 100);
    double v;
    uint32_t seq;
    assert_int_equal(gs_ledger_open_window(l, a, 1000 * MS, 1020 * MS, 1, &v, &seq), 0);
    assert_true(gs_ledger_open_window(l, b, 1019 * MS, 1040 * MS, 1, &v, &seq) > 0);
    assert_int_equal(gs_ledger_open_window(l, b, 1020 * MS, 1040 * MS, 1, &v, &seq), 0); /* a stalled */
    assert_true(gs_ledger_open_window(l, a, 1021 * MS, 1040 * MS, 1, &v, &seq) > 0);
    g_dead_pid = 200; /* b dies holding the turn */
    gs_ledger_reap(l, 1022 * MS, alive_but);
    assert_int_equal(l->turn_container, 0);
    assert_int_equal(gs_ledger_open_window(l, a, 1022 * MS, 1040 * MS, 1, &v, &seq), 0);
    gs_ledger_close(l);
    unlink(path);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

struct waiter {
    struct gs_ledger *l;
    uint32_t seq;
    uint64_t waited;
};

static void *wait_for_turn(void *arg)
{
    struct waiter *w = arg;
    uint64_t t0 = mono_ns();
    gs_ledger_wait(w->l, w->seq, 5000 * MS);
    w->waited = mono_ns() - t0;
    return NULL;
}

static void a_waiter_wakes_when_the_turn_is_released(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 1, 0, 11, 100), b = gs_ledger_join(l, 200, 1, 0, 22, 100);
    double v;
    struct waiter w = {l, 0, 0};
    assert_int_equal(gs_ledger_open_window(l, a, 1000 * MS, FAR, 1, &v, &w.seq), 0);
    assert_true(gs_ledger_open_window(l, b, 1000 * MS, FAR, 1, &v, &w.seq) > 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_for_turn, &w), 0);
    usleep(50000);
    gs_ledger_close_window(l, a, 1001 * MS);
    pthread_join(th, NULL);
    assert_true(w.waited >= 40 * MS && w.waited < 2000 * MS); /* woken, not timed out */
    uint64_t t0 = mono_ns();
    gs_ledger_wait(l, l->turn_seq, 20 * MS); /* nobody releases: the timeout */
    assert_true(mono_ns() - t0 >= 15 * MS);
    gs_ledger_close(l);
    unlink(path);
}

static void share_mode_sees_the_others_demand_and_weights(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 1, 0, 11, 30), b = gs_ledger_join(l, 200, 1, 0, 22, 70);
    int b2 = gs_ledger_join(l, 201, 1, 0, 22, 70), c = gs_ledger_join(l, 300, 1, 0, 33, 50);
    assert_true(a >= 0 && c >= 0);
    assert_int_equal(gs_ledger_busy_weight(l, 11, 900 * MS), 0); /* nobody showed demand yet */
    double v;
    uint32_t seq;
    assert_int_equal(gs_ledger_open_window(l, b, 1000 * MS, 1010 * MS, 1, &v, &seq), 0);
    gs_ledger_touch(l, b2, 1001 * MS);                                 /* b's other process runs free */
    assert_true(gs_ledger_open_window(l, c, 1002 * MS, 1010 * MS, 1, &v, &seq) > 0); /* waiting is demand */
    assert_int_equal(gs_ledger_busy_weight(l, 11, 900 * MS), 70 + 50); /* b counted once */
    assert_int_equal(gs_ledger_busy_weight(l, 11, 1002 * MS), 50);     /* b's demand is older */
    assert_int_equal(gs_ledger_busy_weight(l, 22, 900 * MS), 50);      /* not its own */
    assert_true(gs_ledger_has_pid(l, 11, 201));
    assert_false(gs_ledger_has_pid(l, 22, 201)); /* its own container's pid */
    assert_false(gs_ledger_has_pid(l, 11, 999));
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
        cmocka_unit_test(a_window_past_its_expiry_stops_counting),
        cmocka_unit_test(capped_containers_take_turns),
        cmocka_unit_test(an_expired_or_dead_holder_loses_the_turn),
        cmocka_unit_test(a_waiter_wakes_when_the_turn_is_released),
        cmocka_unit_test(share_mode_sees_the_others_demand_and_weights),
        cmocka_unit_test(a_file_of_another_layout_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
