/* The device ledger (src/core/ledger.c): the turns the containers on one
 * GPU take, in simulated time (and real time where a futex waiter wakes). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ledger.h"
#include "procinfo.h"

#define MS 1000000ULL

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

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
#define HALF                                                                                                           \
    500000U /* each container's claim: half the GPU, so that of two
                            * contending containers 11 has [0, 25) ms of each 50 ms
                            * frame and 22 [25, 50) (turn_frame.h) */

/* Opens a window that must not wait. */
/* gs_ledger_pid_named's test: the container ctx names. */
static int is_container(uint64_t c, void *ctx)
{
    return c == *(const uint64_t *)ctx;
}

static void open_now(struct gs_ledger *l, int slot, uint64_t now, uint64_t until)
{
    struct gs_ledger_turn turn = { .claim_ppm = HALF };
    assert_int_equal(gs_ledger_open_window(l, slot, now, until, &turn), 0);
    assert_true(turn.took);
}

static uint64_t try_open(struct gs_ledger *l, int slot, uint64_t now, uint64_t until)
{
    struct gs_ledger_turn turn = { .claim_ppm = HALF };
    return gs_ledger_open_window(l, slot, now, until, &turn);
}

static void containers_take_turns(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 11, 100), a2 = gs_ledger_join(l, 101, 11, 100);
    int b = gs_ledger_join(l, 200, 22, 100);
    struct gs_ledger_turn turn = { .claim_ppm = HALF, .took = 1 };
    open_now(l, a, 1000 * MS, 1050 * MS);
    /* b must wait (at most until a's turn expires); a's other process need not */
    assert_int_equal(gs_ledger_open_window(l, b, 1010 * MS, 1060 * MS, &turn), 40 * MS);
    assert_false(turn.took);
    assert_int_equal(turn.holder, 11); /* whose turn it waits for (the debug log names it) */
    uint32_t seq_b = turn.seq;
    open_now(l, a2, 1010 * MS, 1070 * MS); /* b contends now: a2's hold ends with 11's slot (+2 ms) */
    gs_ledger_close_window(l, a, 1010 * MS, 0);
    assert_int_equal(try_open(l, b, 1020 * MS, 1060 * MS), 7 * MS); /* a2 still open: to its own hold, 1027 */
    gs_ledger_close_window(l, a2, 1020 * MS, 0);
    assert_true(l->f->turn_seq != seq_b);                            /* released: waiters wake */
    open_now(l, b, 1025 * MS, 1060 * MS);                            /* 22's slot */
    assert_int_equal(try_open(l, a, 1030 * MS, 1080 * MS), 22 * MS); /* b holds it to its slot's end + 2 ms */
    assert_int_equal(gs_ledger_others(l, 11), 1);
    assert_int_equal(gs_ledger_others(l, 22), 2);
    gs_ledger_close(l);
    unlink(path);
}

static void a_draining_holder_keeps_its_turn(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 11, 100), b = gs_ledger_join(l, 200, 22, 100);
    open_now(l, a, 1000 * MS, 1020 * MS);
    assert_int_equal(gs_ledger_extend(l, b, 1000 * MS, 1500 * MS), 0); /* not b's turn to extend */
    assert_int_equal(l->f->turn_until_ns, 1020 * MS);
    assert_int_equal(gs_ledger_extend(l, a, 1000 * MS, 1100 * MS), 1); /* a waits for its work to drain */
    assert_int_equal(try_open(l, b, 1050 * MS, 1080 * MS), 50 * MS);   /* past a's planned expiry */
    gs_ledger_close_window(l, a, 1050 * MS, 1);
    assert_int_equal(try_open(l, b, 1060 * MS, 1080 * MS), 15 * MS); /* a contends: 22's slot comes then */
    open_now(l, b, 1075 * MS, 1080 * MS);
    gs_ledger_close(l);
    unlink(path);
}

/* One process of container 11 with a thread whose window sits open for
 * good (a training process's autograd thread between steps) and another
 * that drains: the drain's extension ends with the drain, the turn held
 * only as long as the open windows took it as they opened. Before, it was
 * held for the whole extension (a second): the neighbour waited 150 ms
 * at each of its windows for that long. */
static void a_drains_extension_ends_with_the_drain(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 11, 100), b = gs_ledger_join(l, 200, 22, 100);
    open_now(l, a, 1000 * MS, 1002 * MS); /* the idle thread's window, never closed */
    open_now(l, a, 1010 * MS, 1020 * MS);
    assert_int_equal(gs_ledger_extend(l, a, 1025 * MS, 2025 * MS), 1); /* it waits for its work to drain */
    struct gs_ledger_turn turn = { .claim_ppm = HALF };
    assert_int_equal(gs_ledger_open_window(l, b, 1026 * MS, 1060 * MS, &turn), 999 * MS);
    gs_ledger_close_window(l, a, 1030 * MS, 1); /* drained */
    assert_true(l->f->turn_seq != turn.seq);    /* released: the waiters wake */
    open_now(l, b, 1030 * MS, 1035 * MS);       /* at once: 22's slot is [25, 50) of the frame */
    gs_ledger_close_window(l, b, 1035 * MS, 0);
    /* a window of another thread still within its own hold keeps the turn that long */
    open_now(l, a, 1100 * MS, 1150 * MS);
    open_now(l, a, 1105 * MS, 1110 * MS);
    assert_int_equal(gs_ledger_extend(l, a, 1110 * MS, 2110 * MS), 1);
    assert_true(try_open(l, b, 1111 * MS, 1120 * MS) > 100 * MS);
    uint32_t seq = l->f->turn_seq;
    gs_ledger_close_window(l, a, 1120 * MS, 1);
    assert_true(l->f->turn_seq != seq);               /* shortened: the waiters look again */
    assert_int_equal(l->f->turn_until_ns, 1127 * MS); /* the live window's slot end (1125) + 2 ms */
    assert_int_equal(try_open(l, b, 1121 * MS, 1130 * MS), 6 * MS);
    /* while one thread drains, another's close keeps the drain's extension */
    gs_ledger_close_window(l, a, 1130 * MS, 0);
    open_now(l, a, 1200 * MS, 1210 * MS);
    open_now(l, a, 1201 * MS, 1210 * MS);
    assert_int_equal(gs_ledger_extend(l, a, 1215 * MS, 2215 * MS), 1);
    gs_ledger_close_window(l, a, 1216 * MS, 0); /* the other thread's window, not drained */
    assert_int_equal(l->f->turn_until_ns, 2215 * MS);
    gs_ledger_close_window(l, a, 1240 * MS, 1); /* the drain ends: only the idle window is left */
    assert_int_equal(l->f->turn_container, 0);
    gs_ledger_close(l);
    unlink(path);
}

/* A hold belongs to its turn: a window of an earlier turn that took the turn
 * far ahead and closed early keeps no later turn of its container held
 * past that turn's own windows. */
static void a_hold_of_an_earlier_turn_holds_no_later_one(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 11, 100);
    open_now(l, a, 1000 * MS, 2000 * MS);
    gs_ledger_close_window(l, a, 1010 * MS, 0); /* early: the turn is released */
    assert_int_equal(l->f->turn_container, 0);
    open_now(l, a, 1020 * MS, 1022 * MS); /* an idle thread's window, never closed */
    open_now(l, a, 1025 * MS, 1030 * MS);
    assert_int_equal(gs_ledger_extend(l, a, 1031 * MS, 2031 * MS), 1);
    gs_ledger_close_window(l, a, 1040 * MS, 1);
    assert_int_equal(l->f->turn_container, 0); /* not held to 2000 */
    gs_ledger_close(l);
    unlink(path);
}

/* What a member's death looks like to the others: its slot's description
 * closes (the kernel does that when a process dies, in any pid namespace). */
static void die(struct gs_ledger *l, int slot)
{
    close(l->slot_fd[slot]);
    l->slot_fd[slot] = -1;
}

static void an_expired_or_dead_holder_loses_the_turn(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 11, 100), b = gs_ledger_join(l, 200, 22, 100);
    open_now(l, a, 1000 * MS, 1020 * MS);
    assert_true(try_open(l, b, 1019 * MS, 1040 * MS) > 0);
    open_now(l, b, 1025 * MS, 1040 * MS); /* a stalled (and it is 22's slot) */
    assert_true(try_open(l, a, 1026 * MS, 1040 * MS) > 0);
    die(l, b);                            /* b dies holding the turn */
    open_now(l, a, 1027 * MS, 1040 * MS); /* at once, not at b's expiry: the dead claim no slot */
    gs_ledger_reap(l);
    assert_int_equal(gs_ledger_others(l, 11), 0);
    gs_ledger_close(l);
    unlink(path);
}

static void a_forged_member_or_turn_blocks_no_one(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 11, 100);
    /* a tenant writes a member of container 77 with windows open into a
     * slot it does not hold, and hands 77 the turn */
    l->f->m[40] = (struct gs_ledger_member){ .container = 77, .active_ns = 1000 * MS, .open = 3, .weight = 65535 };
    l->f->turn_container = 77;
    l->f->turn_until_ns = 1500 * MS;
    open_now(l, a, 1000 * MS, 1010 * MS); /* nobody alive holds 77's windows */
    assert_int_equal(l->f->turn_container, 11);
    gs_ledger_close_window(l, a, 1000 * MS, 0);
    /* a turn that reaches beyond any window's hold is forged, whoever holds it */
    int b = gs_ledger_join(l, 200, 22, 100);
    open_now(l, b, 1025 * MS, 1030 * MS);
    l->f->turn_until_ns = UINT64_MAX - 1;
    open_now(l, a, 1050 * MS, 1060 * MS);
    gs_ledger_close_window(l, a, 1050 * MS, 0);
    /* garbage open counts and weights are bounded where they are read */
    l->f->m[b].open = 0xffffffffU;
    assert_int_equal(gs_ledger_busy_weight(l, 11, 900 * MS), 100 + GS_LIM_MAX_WEIGHT); /* the legal ceiling */
    gs_ledger_reap(l);
    assert_int_equal(l->f->m[40].container, 0); /* the forged slot is freed */
    assert_int_equal(gs_ledger_busy_weight(l, 11, 900 * MS), 100);
    gs_ledger_close(l);
    unlink(path);
}

static void a_process_that_holds_the_lock_or_dies_in_it_stalls_no_one(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 11, 100);
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t child = fork();
    if (child == 0) {
        char err[256];
        struct gs_ledger *h = gs_ledger_open(path, err, sizeof err);
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)1 << 20, .l_len = 1 };
        if (!h || fcntl(h->fd, F_OFD_SETLK, &fl) != 0)
            _exit(1);
        h->f->turn_container = 99; /* half-way through taking the turn */
        h->f->turn_until_ns = FAR;
        (void)!write(go[1], "x", 1);
        pause(); /* holds the lock until killed */
        _exit(0);
    }
    char c;
    assert_int_equal(read(go[0], &c, 1), 1);
    struct gs_ledger_turn turn = { .took = 1 };
    uint64_t t0 = mono_ns();
    assert_int_equal(gs_ledger_open_window(l, a, 1000 * MS, 1010 * MS, &turn), 0);
    assert_false(turn.took); /* opened without the turn, after a few ms at most */
    assert_true(mono_ns() - t0 < 1000 * MS);
    /* a process that joins meanwhile is told to try again, not that the ledger is full */
    errno = 0;
    assert_int_equal(gs_ledger_join(l, 200, 22, 100), -1);
    assert_int_equal(errno, EAGAIN);
    kill(child, SIGKILL);
    int st = 0;
    waitpid(child, &st, 0);
    open_now(l, a, 1000 * MS, 1010 * MS); /* the kernel dropped its lock; its forged turn is ignored */
    assert_int_equal(l->f->turn_container, 11);
    assert_true(gs_ledger_join(l, 200, 22, 100) >= 0); /* the later try */
    close(go[0]);
    close(go[1]);
    gs_ledger_close(l);
    unlink(path);
}

static void *lock_and_release(void *arg)
{
    struct gs_ledger *l = arg;
    int rc = gs_ledger_lock(l);
    if (rc == 0)
        gs_ledger_unlock(l);
    return (void *)(intptr_t)rc;
}

/* The ledger's lock is an OFD lock, which the process's threads share
 * through its one description: another thread of the holder waits too. */
static void another_thread_of_the_holder_waits_for_the_lock(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    assert_int_equal(gs_ledger_lock(l), 0);
    pthread_t t;
    void *rc = NULL;
    assert_int_equal(pthread_create(&t, NULL, lock_and_release, l), 0);
    assert_int_equal(pthread_join(t, &rc), 0);
    assert_int_equal((intptr_t)rc, -1);
    gs_ledger_unlock(l);
    assert_int_equal(pthread_create(&t, NULL, lock_and_release, l), 0);
    assert_int_equal(pthread_join(t, &rc), 0);
    assert_int_equal((intptr_t)rc, 0);
    gs_ledger_close(l);
    unlink(path);
}

/* Takes and lets go of the ledger's lock until cancelled (each try waits
 * while another process holds it): however late the cancel comes, it ends
 * the thread. */
static void *lock_until_cancelled(void *arg)
{
    struct gs_ledger *l = arg;
    for (;;) {
        if (gs_ledger_lock(l) == 0)
            gs_ledger_unlock(l);
        pthread_testcancel();
    }
    return NULL;
}

/* A thread cancelled while it waits for the ledger's lock (another process
 * holds it) gave up the handle's mutex only at its release: cancelled in
 * the wait's sleep, it kept it, and the process's other threads found the
 * ledger locked for good. */
static void a_thread_cancelled_in_the_lock_leaves_it_to_the_others(void **state)
{
    (void)state;
    char path[128], err[256];
    struct gs_ledger *l = fresh(path, sizeof path);
    struct gs_ledger *other = gs_ledger_open(path, err, sizeof err); /* another description: another process's */
    assert_non_null(other);
    assert_int_equal(gs_ledger_lock(other), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, lock_until_cancelled, l), 0);
    /* cancelled once it holds the mutex, so the wait is its next cancellation point */
    while (pthread_mutex_trylock(&l->lock_mutex) == 0)
        pthread_mutex_unlock(&l->lock_mutex);
    assert_int_equal(pthread_cancel(t), 0);
    void *rc = NULL;
    assert_int_equal(pthread_join(t, &rc), 0);
    assert_ptr_equal(rc, PTHREAD_CANCELED);
    gs_ledger_unlock(other);
    assert_int_equal(gs_ledger_lock(l), 0);
    gs_ledger_unlock(l);
    gs_ledger_close(other);
    gs_ledger_close(l);
    unlink(path);
}

/* A process dies holding the ledger's lock and a member slot, and leaves a
 * forked child running (a data loader's worker): the child's descriptors,
 * inherited, shared the parent's descriptions and kept both held for as
 * long as it lived. */
static void a_forked_child_keeps_neither_its_dead_parents_slot_nor_lock(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t parent = fork();
    if (parent == 0) {
        char err[256];
        struct gs_ledger *h = gs_ledger_open(path, err, sizeof err);
        if (!h || gs_ledger_join(h, 100, 11, 100) < 0 || gs_ledger_lock(h) != 0)
            _exit(1);
        pid_t kid = fork();
        if (kid == 0) {
            gs_ledger_fork_child(h); /* the interposer's fork handler */
            kid = getpid();
            (void)!write(go[1], &kid, sizeof kid);
            pause();
            _exit(0);
        }
        _exit(kid > 0 ? 0 : 1); /* dies holding both */
    }
    int st = 0;
    assert_int_equal(waitpid(parent, &st, 0), parent);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pid_t kid = 0;
    assert_int_equal(read(go[0], &kid, sizeof kid), sizeof kid);
    assert_true(kid > 0);
    gs_ledger_reap(l); /* takes the lock, frees the dead slot */
    assert_int_equal(gs_ledger_others(l, 22), 0);
    assert_true(gs_ledger_join(l, 200, 22, 100) >= 0);
    kill(kid, SIGKILL);
    close(go[0]);
    close(go[1]);
    gs_ledger_close(l);
    unlink(path);
}

/* A ledger cut short is sized back and mapped again in place; not where
 * its path names another file now (joined afresh instead), nor while
 * another process holds its flock (tried again later). */
static void a_ledger_cut_short_is_mapped_again_unless_replaced_or_locked(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 11, 100);
    assert_true(a >= 0);
    assert_int_equal(truncate(path, 0), 0);
    assert_int_equal(gs_ledger_map_again(l), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, sizeof *l->f);
    gs_ledger_heal(l, a, 11, 100, 100);
    assert_int_equal(l->f->m[a].container, 11); /* the file's pages, shared */
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0); /* another process's first lay-out */
    errno = 0;
    assert_int_equal(gs_ledger_map_again(l), -1);
    assert_int_equal(errno, EAGAIN);
    close(fd);
    assert_int_equal(unlink(path), 0); /* replaced */
    fd = open(path, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
    errno = 0;
    assert_int_equal(gs_ledger_map_again(l), -1);
    assert_int_equal(errno, ESTALE);
    gs_ledger_close(l);
    unlink(path);
}

static void a_full_ledger_says_so(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++)
        assert_int_equal(gs_ledger_join(l, 100 + i, 11, 100), i);
    errno = 0;
    assert_int_equal(gs_ledger_join(l, 999, 22, 100), -1);
    assert_int_equal(errno, ENOSPC); /* not worth trying again at once, unlike a held lock */
    gs_ledger_close(l);
    unlink(path);
}

/* The flock that guards a ledger's first lay-out, held by another
 * description: an empty file cannot be opened (try later), a laid-out one
 * can; the node agent's lay-out keeps a valid file and refuses junk. */
static void a_held_layout_lock_keeps_out_only_an_empty_ledger(void **state)
{
    (void)state;
    char path[128], err[256];
    snprintf(path, sizeof path, "/tmp/gs-ledger-test-%d-XXXXXX", (int)getpid());
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    int holder = open(path, O_RDWR);
    assert_int_equal(flock(holder, LOCK_EX), 0);
    errno = 0;
    assert_null(gs_ledger_open(path, err, sizeof err));
    assert_int_equal(errno, EAGAIN);
    assert_non_null(strstr(err, "not laid out"));
    assert_int_equal(gs_ledger_lay_out(fd), -1); /* the agent's lay-out waits no longer */
    assert_int_equal(errno, EAGAIN);
    flock(holder, LOCK_UN);
    assert_int_equal(gs_ledger_lay_out(fd), 0);
    assert_int_equal(flock(holder, LOCK_EX), 0);
    struct gs_ledger *l = gs_ledger_open(path, err, sizeof err); /* laid out: no lock needed */
    assert_non_null(l);
    assert_true(gs_ledger_join(l, 100, 11, 100) >= 0);
    assert_int_equal(gs_ledger_lay_out(fd), -1); /* still held */
    flock(holder, LOCK_UN);
    assert_int_equal(gs_ledger_lay_out(fd), 0); /* a valid ledger is kept, members and all */
    assert_int_equal(l->f->m[0].container, 11);
    gs_ledger_close(l);
    uint32_t other_version = GS_LEDGER_VERSION + 1;
    assert_int_equal(pwrite(fd, &other_version, sizeof other_version, offsetof(struct gs_ledger_file, version)),
                     (ssize_t)sizeof other_version);
    assert_int_equal(gs_ledger_lay_out(fd), -1); /* another version's: the agent decides */
    assert_int_equal(errno, EINVAL);
    assert_int_equal(pwrite(fd, "junk", 4, 0), 4);
    assert_int_equal(gs_ledger_lay_out(fd), 0); /* written over: laid out afresh, as an opener would */
    close(holder);
    close(fd);
    unlink(path);
}

/* A tenant writes garbage over the whole file: the member that owns a slot
 * restores its record and the header; a process that opens the file
 * meanwhile, lock held, is told to try again. */
static void a_member_restores_what_was_written_over_it(void **state)
{
    (void)state;
    char path[128], err[256];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 11, 30);
    assert_true(a >= 0);
    int fd = open(path, O_RDWR);
    char junk[512];
    memset(junk, 0xa5, sizeof junk);
    assert_int_equal(pwrite(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
    assert_int_not_equal(l->f->m[a].container, 11);
    assert_int_equal(flock(fd, LOCK_EX), 0);
    errno = 0;
    assert_null(gs_ledger_open(path, err, sizeof err)); /* not laid out, and the lock held */
    assert_int_equal(errno, EAGAIN);
    gs_ledger_heal(l, a, 11, 100, 30);
    assert_int_equal(l->f->m[a].container, 11);
    assert_int_equal(l->f->m[a].weight, 30);
    assert_int_equal(l->f->m[a].pidns, gs_proc_pidns());
    struct gs_ledger *later = gs_ledger_open(path, err, sizeof err); /* the header is ours again */
    assert_non_null(later);
    struct gs_ledger_claim cl[GS_LEDGER_MEMBERS];
    gs_ledger_touch(l, a, 1000 * MS);
    gs_ledger_reap(later); /* the forged members the garbage made: nobody holds their bytes */
    assert_int_equal(gs_ledger_claims(later, 22, 900 * MS, 900 * MS, cl, GS_LEDGER_MEMBERS), 1);
    assert_int_equal(cl[0].container, 11);
    gs_ledger_close(later);
    close(fd);
    gs_ledger_close(l);
    unlink(path);
}

struct waiter {
    struct gs_ledger *l;
    uint32_t seq;
    uint64_t woke;
};

static void *wait_for_turn(void *arg)
{
    struct waiter *w = arg;
    gs_ledger_wait(w->l, w->seq, 5000 * MS);
    w->woke = mono_ns();
    return NULL;
}

static void a_waiter_wakes_when_the_turn_is_released(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 11, 100), b = gs_ledger_join(l, 200, 22, 100);
    struct waiter w = { l, 0, 0 };
    open_now(l, a, 1000 * MS, FAR);
    struct gs_ledger_turn turn;
    assert_true(gs_ledger_open_window(l, b, 1000 * MS, FAR, &turn) > 0);
    w.seq = turn.seq;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_for_turn, &w), 0);
    usleep(50000);
    uint64_t released = mono_ns();
    gs_ledger_close_window(l, a, 1000 * MS, 0);
    pthread_join(th, NULL);
    /* Woken by the release, not timed out. Against the release, not the
     * thread's start: on a loaded machine the thread started 10 ms late. */
    assert_true(w.woke >= released && w.woke - released < 2000 * MS);
    uint64_t t0 = mono_ns();
    gs_ledger_wait(l, l->f->turn_seq, 20 * MS); /* nobody releases: the timeout */
    assert_true(mono_ns() - t0 >= 15 * MS);
    gs_ledger_close(l);
    unlink(path);
}

static void share_mode_sees_the_others_demand_and_weights(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 11, 30), b = gs_ledger_join(l, 200, 22, 70);
    int b2 = gs_ledger_join(l, 201, 22, 70), c = gs_ledger_join(l, 300, 33, 50);
    assert_true(a >= 0 && c >= 0);
    assert_int_equal(gs_ledger_busy_weight(l, 11, 900 * MS), 0); /* nobody showed demand yet */
    open_now(l, b, 1000 * MS, 1010 * MS);
    gs_ledger_touch(l, b2, 1001 * MS);                                 /* b's other process runs free */
    assert_true(try_open(l, c, 1002 * MS, 1010 * MS) > 0);             /* waiting is demand */
    assert_int_equal(gs_ledger_busy_weight(l, 11, 900 * MS), 70 + 50); /* b counted once */
    assert_int_equal(gs_ledger_busy_weight(l, 11, 1002 * MS), 50);     /* b's demand is older */
    assert_int_equal(gs_ledger_busy_weight(l, 22, 900 * MS), 50);      /* not its own */
    uint64_t only = 22;
    assert_true(gs_ledger_pid_named(l, 11, 201, is_container, &only));
    assert_false(gs_ledger_pid_named(l, 22, 201, is_container, &only)); /* its own container's pid */
    assert_false(gs_ledger_pid_named(l, 11, 999, is_container, &only));
    only = 33; /* b's pid, but b's container does not count */
    assert_false(gs_ledger_pid_named(l, 11, 201, is_container, &only));
    /* the same as claims, with whose they are: b once, its most recent
     * use and demand; a member's forged use or weight comes back in the
     * legal range */
    gs_ledger_publish(l, b2, 400000, 0);
    gs_ledger_publish(l, c, 0, 1005 * MS); /* c waited for tokens */
    l->f->m[c].use_ppm = 0xffffffffU;
    l->f->m[c].weight = 65535;
    struct gs_ledger_claim cl[GS_LEDGER_MEMBERS];
    assert_int_equal(gs_ledger_claims(l, 11, 900 * MS, 1002 * MS, cl, GS_LEDGER_MEMBERS), 2);
    assert_int_equal(cl[0].container, 22);
    assert_int_equal(cl[0].d.weight, 70);
    assert_int_equal(cl[0].d.use_ppm, 400000);
    assert_false(cl[0].d.wants_more);
    assert_int_equal(cl[0].active_ns, 1001 * MS); /* b's other process, the later */
    assert_int_equal(cl[1].container, 33);
    assert_int_equal(cl[1].active_ns, 1002 * MS);
    assert_int_equal(cl[1].d.weight, GS_LIM_MAX_WEIGHT);
    assert_int_equal(cl[1].d.use_ppm, GS_LIM_PPM);
    assert_true(cl[1].d.wants_more);
    assert_int_equal(gs_ledger_claims(l, 11, 900 * MS, 1002 * MS, cl, 1), 1); /* at most max */
    gs_ledger_close(l);
    unlink(path);
}

/* NVML names a process of another pid namespace by its host pid, which no
 * member names: how many members number their pids elsewhere says how many
 * such pids may be members'. */
static void members_numbering_their_pids_in_another_namespace_are_counted(void **state)
{
    (void)state;
    char path[128], err[256];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 1, 11, 30);
    assert_int_not_equal(l->pidns, 0); /* /proc says the joiner's */
    struct gs_ledger *pod = gs_ledger_open(path, err, sizeof err);
    assert_non_null(pod);
    int b = gs_ledger_join(pod, 1, 22, 70); /* the neighbour, in our namespace first */
    assert_true(a >= 0 && b >= 0);
    assert_int_equal(l->f->m[a].pidns, l->pidns);
    uint64_t any = 22;
    assert_int_equal(gs_ledger_pidns_others(l, 11, l->pidns, is_container, &any), 0);
    pod->pidns = l->pidns + 1; /* a pod's own pid namespace */
    gs_ledger_heal(pod, b, 22, 1, 70);
    assert_int_equal(gs_ledger_pidns_others(l, 11, l->pidns, is_container, &any), 1);
    struct gs_ledger *second = gs_ledger_open(path, err, sizeof err); /* a second process of that pod */
    assert_non_null(second);
    int c = gs_ledger_join(second, 2, 22, 70);
    assert_true(c >= 0);
    second->pidns = pod->pidns;
    gs_ledger_heal(second, c, 22, 2, 70);
    assert_int_equal(gs_ledger_pidns_others(l, 11, l->pidns, is_container, &any), 2);
    assert_int_equal(gs_ledger_pidns_others(l, 22, l->pidns, is_container, &any), 0); /* its own container */
    any = 33; /* a container that does not count */
    assert_int_equal(gs_ledger_pidns_others(l, 11, l->pidns, is_container, &any), 0);
    any = 22;
    gs_ledger_close(second); /* gone: its pid is nobody's */
    l->f->m[b].pidns = 0;    /* one that does not say counts as elsewhere, ours unknown too */
    assert_int_equal(gs_ledger_pidns_others(l, 11, 0, is_container, &any), 1);
    gs_ledger_close(pod);
    assert_int_equal(gs_ledger_pidns_others(l, 11, l->pidns, is_container, &any), 0);
    gs_ledger_close(l);
    unlink(path);
}

/* Writes len bytes of a ledger file at path: the header of layout
 * version `version`, zeros after it. */
static void ledger_file(const char *path, uint32_t version, size_t len)
{
    struct gs_ledger_file head = { .magic = GS_LEDGER_MAGIC, .version = version, .size = sizeof head };
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < len; i++)
        fputc(i < sizeof head ? ((const unsigned char *)&head)[i] : 0, f);
    fclose(f);
}

static off_t size_of(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

static void a_file_of_another_layout_is_refused_and_one_cut_short_or_grown_sized_back(void **state)
{
    (void)state;
    char path[128], err[256] = "";
    snprintf(path, sizeof path, "/tmp/gs-ledger-bad-%d", (int)getpid());
    ledger_file(path, GS_LEDGER_VERSION - 1, 4000);
    assert_null(gs_ledger_open(path, err, sizeof err));
    assert_non_null(strstr(err, "another gpuslice version"));
    assert_int_equal(size_of(path), 4000); /* left as it is */
    int fd = open(path, O_RDWR);
    assert_int_equal(gs_ledger_lay_out(fd), -1);
    close(fd);
    assert_int_equal(size_of(path), 4000);
    /* ours, cut short or grown by a tenant: sized back, its layout kept */
    for (size_t len = 100; len <= sizeof(struct gs_ledger_file) * 2; len += sizeof(struct gs_ledger_file)) {
        ledger_file(path, GS_LEDGER_VERSION, len);
        struct gs_ledger *l = gs_ledger_open(path, err, sizeof err);
        assert_non_null(l);
        assert_int_equal(size_of(path), (off_t)sizeof(struct gs_ledger_file));
        assert_true(gs_ledger_join(l, 100, 11, 100) >= 0);
        gs_ledger_close(l);
    }
    /* garbage of another size: the node agent makes such a file afresh
     * (lay_out refuses it), an opener lays it out */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not a ledger", f);
    fclose(f);
    fd = open(path, O_RDWR);
    assert_int_equal(gs_ledger_lay_out(fd), -1);
    close(fd);
    struct gs_ledger *l = gs_ledger_open(path, err, sizeof err);
    assert_non_null(l);
    assert_int_equal(size_of(path), (off_t)sizeof(struct gs_ledger_file));
    assert_int_equal(l->f->magic, GS_LEDGER_MAGIC);
    gs_ledger_close(l);
    unlink(path);
}

/* A member in a pid namespace of its own (pid 1 there, like a container's
 * first process) holds the turn while it lives and loses it when it dies:
 * liveness never compares pids. Needs root (CI runs as root). */
static void a_member_in_another_pid_namespace_is_alive_until_it_dies(void **state)
{
    (void)state;
    char path[128], err[256];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 11, 100);
    /* opened here, joined in the namespace below: the member says the
     * joiner's namespace, not the opener's */
    struct gs_ledger *h = gs_ledger_open(path, err, sizeof err);
    assert_non_null(h);
    int up[2], hold[2];
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(hold), 0);
    pid_t mid = fork();
    if (mid == 0) {
        if (unshare(CLONE_NEWPID) != 0)
            _exit(2);
        pid_t inner = fork();
        if (inner == 0) {
            char c;
            struct gs_ledger_turn turn;
            int s = gs_ledger_join(h, getpid(), 22, 100);
            if (s < 0 || gs_ledger_open_window(h, s, 1000 * MS, 1500 * MS, &turn) != 0 || !turn.took || getpid() != 1)
                _exit(1);
            close(hold[1]);
            (void)!write(up[1], "x", 1);
            (void)!read(hold[0], &c, 1); /* until the test lets go: then it dies with its window open */
            _exit(0);
        }
        close(hold[1]); /* only the test's copy may keep the inner one alive */
        close(up[1]);
        int st = 0;
        waitpid(inner, &st, 0);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
    }
    close(hold[0]);
    close(up[1]); /* a child that fails closes the last writer: read sees EOF */
    char c;
    if (read(up[0], &c, 1) != 1) { /* no new pid namespace here (not root) */
        int st = 0;
        waitpid(mid, &st, 0);
        assert_int_equal(WEXITSTATUS(st), 2);
        close(up[0]);
        close(hold[0]);
        close(hold[1]);
        gs_ledger_close(h);
        gs_ledger_close(l);
        unlink(path);
        skip();
    }
    assert_true(try_open(l, a, 1001 * MS, 1100 * MS) > 0); /* 22 holds the turn and lives */
    uint64_t any = 22;
    assert_int_equal(gs_ledger_pidns_others(l, 11, l->pidns, is_container, &any), 1); /* its pid 1 is not ours */
    close(hold[1]);
    int st = 0;
    waitpid(mid, &st, 0);
    assert_int_equal(WEXITSTATUS(st), 0);
    open_now(l, a, 1002 * MS, 1100 * MS); /* died: at once, not at its expiry */
    gs_ledger_reap(l);
    assert_int_equal(gs_ledger_others(l, 11), 0);
    close(up[0]);
    gs_ledger_close(h);
    gs_ledger_close(l);
    unlink(path);
}

/* Opens a window of slot claiming claim, at now; the turn's outcome. */
static uint64_t claim_open(struct gs_ledger *l, int slot, uint32_t claim, uint64_t now, struct gs_ledger_turn *t)
{
    *t = (struct gs_ledger_turn){ .claim_ppm = claim };
    return gs_ledger_open_window(l, slot, now, now + 100 * MS, t);
}

static void contending_containers_take_the_turn_in_their_slots_only(void **state)
{
    (void)state;
    char path[128];
    struct gs_ledger *l = fresh(path, sizeof path);
    int a = gs_ledger_join(l, 100, 11, 30), b = gs_ledger_join(l, 200, 22, 70);
    struct gs_ledger_turn t;
    struct gs_turn_slot f;
    /* b asks first (a window of its own, alone: no frame, no slot's end) */
    assert_int_equal(claim_open(l, b, 700000, 990 * MS, &t), 0);
    assert_true(t.took);
    assert_int_equal(t.slot_end, 0);
    gs_ledger_close_window(l, b, 990 * MS, 0);
    /* 11 claims 30 %: [0, 15) ms of each frame is its, the rest 22's */
    assert_int_equal(claim_open(l, a, 300000, 1010 * MS, &t), 0);
    assert_true(t.took);
    assert_int_equal(t.slot_end, 1015 * MS);
    assert_int_equal(l->f->turn_until_ns, 1017 * MS); /* the slot's end and its grace, not 100 ms */
    gs_ledger_close_window(l, a, 1010 * MS, 0);
    /* the turn is free, but it is 11's slot: b waits for its own */
    assert_int_equal(claim_open(l, b, 700000, 1012 * MS, &t), 3 * MS);
    assert_false(t.took);
    assert_int_equal(claim_open(l, b, 700000, 1016 * MS, &t), 0);
    assert_int_equal(t.slot_end, 1050 * MS);
    gs_ledger_close_window(l, b, 1016 * MS, 0);
    assert_int_equal(claim_open(l, a, 300000, 1020 * MS, &t), 30 * MS);
    /* asking where one stands counts as asking: a in debt still contends */
    assert_int_equal(gs_ledger_frame(l, a, 1100 * MS, 300000, &f), 1);
    assert_true(f.mine);
    /* b stopped asking 100 ms ago: a takes the turn whenever it wants */
    assert_int_equal(claim_open(l, a, 300000, 1120 * MS, &t), 0);
    assert_int_equal(t.slot_end, 0);
    gs_ledger_close_window(l, a, 1120 * MS, 0);
    /* nor does a dead member claim a slot */
    assert_int_equal(claim_open(l, b, 700000, 1130 * MS, &t), 0);
    gs_ledger_close_window(l, b, 1130 * MS, 0);
    die(l, b);
    assert_int_equal(claim_open(l, a, 300000, 1135 * MS, &t), 0);
    assert_true(t.took);
    assert_int_equal(t.slot_end, 0);
    gs_ledger_close_window(l, a, 1135 * MS, 0);
    /* a share-mode container claims nothing: its turns are first come, and
     * it puts no one else into a frame */
    int c = gs_ledger_join(l, 300, 33, 100);
    assert_int_equal(claim_open(l, c, 0, 1140 * MS, &t), 0);
    assert_int_equal(t.slot_end, 0);
    gs_ledger_close_window(l, c, 1140 * MS, 0);
    assert_int_equal(gs_ledger_frame(l, a, 1141 * MS, 300000, &f), 0);
    gs_ledger_close(l);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(containers_take_turns),
        cmocka_unit_test(a_draining_holder_keeps_its_turn),
        cmocka_unit_test(a_drains_extension_ends_with_the_drain),
        cmocka_unit_test(a_hold_of_an_earlier_turn_holds_no_later_one),
        cmocka_unit_test(an_expired_or_dead_holder_loses_the_turn),
        cmocka_unit_test(a_forged_member_or_turn_blocks_no_one),
        cmocka_unit_test(a_member_in_another_pid_namespace_is_alive_until_it_dies),
        cmocka_unit_test(a_process_that_holds_the_lock_or_dies_in_it_stalls_no_one),
        cmocka_unit_test(another_thread_of_the_holder_waits_for_the_lock),
        cmocka_unit_test(a_thread_cancelled_in_the_lock_leaves_it_to_the_others),
        cmocka_unit_test(a_forked_child_keeps_neither_its_dead_parents_slot_nor_lock),
        cmocka_unit_test(a_ledger_cut_short_is_mapped_again_unless_replaced_or_locked),
        cmocka_unit_test(a_full_ledger_says_so),
        cmocka_unit_test(a_held_layout_lock_keeps_out_only_an_empty_ledger),
        cmocka_unit_test(a_member_restores_what_was_written_over_it),
        cmocka_unit_test(a_waiter_wakes_when_the_turn_is_released),
        cmocka_unit_test(share_mode_sees_the_others_demand_and_weights),
        cmocka_unit_test(members_numbering_their_pids_in_another_namespace_are_counted),
        cmocka_unit_test(a_file_of_another_layout_is_refused_and_one_cut_short_or_grown_sized_back),
        cmocka_unit_test(contending_containers_take_the_turn_in_their_slots_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
