/*
 * A window's drain with a bound (compute_drain.h). Each launching thread
 * that drains gets a helper thread, made at its first drain, which waits
 * on the driver (cuEventSynchronize, or cuCtxSynchronize first where the
 * window used more streams than it tracks) and reads the clock as the wait
 * returns: the launching thread's own wake-up, late or not, is never
 * charged. The two meet on one futex word, so that the wait's bound runs
 * on the compute clock's time (the simulated clock stretches futex
 * timeouts as it does every sleep).
 *
 * A drainer given up on keeps waiting on its own, then destroys the events
 * it was handed and frees itself; at most MAX_ABANDONED wait so at once,
 * past which a drain waits on the launching thread, unbounded, as before.
 */
#define _GNU_SOURCE
#include "compute_drain.h"
#include "compute_clock.h"
#include "log.h"
#include "real_driver.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_ABANDONED 8

/* A drainer's state, its futex word: the owner moves it IDLE or DONE ->
 * BUSY (a job), DONE -> IDLE (read), IDLE or DONE -> QUIT (its thread
 * ends), BUSY -> ABANDONED (the bound passed); the drainer BUSY -> DONE. */
enum { IDLE, BUSY, DONE, ABANDONED, QUIT };

struct gs_drainer {
    uint32_t state;
    int ctx_gone; /* abandoned_lock: its context was destroyed, and its events with it */
    CUcontext ctx;
    int n, whole_ctx;
    CUevent ev[GS_DRAIN_MAX_EVENTS];
    uint64_t done_ns;
};

static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gs_drainer *abandoned[MAX_ABANDONED]; /* abandoned_lock */

static void wake(uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Sleeps while *w is still v, at most ns (0: no bound). */
static void wait_while(uint32_t *w, uint32_t v, uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, ns ? &ts : NULL, NULL, 0);
}

/* Waits as the launching thread would have: on the current thread, in
 * ctx, with no bound. */
static void wait_for_work(CUcontext ctx, const CUevent *ev, int n, int whole_ctx)
{
    gs_pfn_cuCtxSetCurrent set = GS_REAL_CU(cuCtxSetCurrent);
    gs_pfn_cuCtxSynchronize cs = GS_REAL_CU(cuCtxSynchronize);
    gs_pfn_cuEventSynchronize es = GS_REAL_CU(cuEventSynchronize);
    if (ctx && set)
        set(ctx);
    if (whole_ctx && cs)
        cs();
    for (int i = 0; i < n && es; i++)
        es(ev[i]);
}

/* An abandoned drainer, its wait over: forgets it, and destroys its events
 * unless their context is gone. */
static void retire(struct gs_drainer *dr)
{
    pthread_mutex_lock(&abandoned_lock);
    for (int i = 0; i < MAX_ABANDONED; i++)
        if (abandoned[i] == dr)
            abandoned[i] = NULL;
    int gone = dr->ctx_gone;
    pthread_mutex_unlock(&abandoned_lock);
    gs_pfn_cuEventDestroy_v2 destroy = GS_REAL_CU(cuEventDestroy_v2);
    for (int i = 0; i < dr->n && destroy && !gone; i++)
        destroy(dr->ev[i]);
}

static void *drain_thread(void *arg)
{
    struct gs_drainer *dr = arg;
    for (;;) {
        uint32_t s = __atomic_load_n(&dr->state, __ATOMIC_ACQUIRE);
        if (s == QUIT)
            break;
        if (s != BUSY) {
            wait_while(&dr->state, s, 0);
            continue;
        }
        wait_for_work(dr->ctx, dr->ev, dr->n, dr->whole_ctx);
        dr->done_ns = gs_compute_now();
        uint32_t busy = BUSY;
        if (__atomic_compare_exchange_n(&dr->state, &busy, DONE, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            wake(&dr->state);
            continue;
        }
        retire(dr); /* given up on while it waited */
        break;
    }
    free(dr);
    return NULL;
}

/* A drainer with its thread, which blocks every signal but the faults
 * (they are the program's; see compute_outer_thread.c); NULL if none can
 * be had. */
static struct gs_drainer *start(void)
{
    struct gs_drainer *dr = calloc(1, sizeof *dr);
    pthread_attr_t attr;
    if (!dr || pthread_attr_init(&attr) != 0) {
        free(dr);
        return NULL;
    }
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    static const int faults[] = { SIGBUS, SIGSEGV, SIGFPE, SIGILL };
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&all, faults[i]);
    pthread_t id;
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&id, &attr, drain_thread, dr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        gs_log(GS_LOG_INFO, "a window's drain waits on the launching thread, unbounded: no thread for it (%d)", rc);
        free(dr);
        return NULL;
    }
    pthread_setname_np(id, "gpuslice-drain");
    return dr;
}

/* Registers dr as abandoned; 0 where MAX_ABANDONED already are. */
static int abandon(struct gs_drainer *dr)
{
    int at = -1;
    pthread_mutex_lock(&abandoned_lock);
    for (int i = 0; i < MAX_ABANDONED && at < 0; i++)
        if (!abandoned[i])
            at = i;
    if (at >= 0)
        abandoned[at] = dr;
    pthread_mutex_unlock(&abandoned_lock);
    return at >= 0;
}

static int room_to_abandon(void)
{
    pthread_mutex_lock(&abandoned_lock);
    int room = 0;
    for (int i = 0; i < MAX_ABANDONED && !room; i++)
        room = abandoned[i] == NULL;
    pthread_mutex_unlock(&abandoned_lock);
    return room;
}

uint64_t gs_drain_unbounded(const CUevent *events, int n, int whole_ctx)
{
    wait_for_work(NULL, events, n, whole_ctx);
    return gs_compute_now();
}

enum gs_drain_result gs_drain(struct gs_drainer **drp, CUcontext ctx, const CUevent *events, int n, int whole_ctx,
                              uint64_t bound_ns, uint64_t *done_ns)
{
    if (n > GS_DRAIN_MAX_EVENTS)
        n = GS_DRAIN_MAX_EVENTS;
    struct gs_drainer *dr = *drp;
    int room = room_to_abandon();
    if (!dr && room)
        dr = *drp = start();
    if (!dr || !room) {
        *done_ns = gs_drain_unbounded(events, n, whole_ctx);
        return GS_DRAIN_UNBOUNDED;
    }
    dr->ctx = ctx;
    dr->whole_ctx = whole_ctx;
    dr->n = n;
    for (int i = 0; i < n; i++)
        dr->ev[i] = events[i];
    __atomic_store_n(&dr->state, BUSY, __ATOMIC_RELEASE);
    wake(&dr->state);
    uint64_t t0 = gs_compute_now();
    for (;;) {
        uint32_t s = __atomic_load_n(&dr->state, __ATOMIC_ACQUIRE);
        if (s == DONE) {
            *done_ns = dr->done_ns;
            __atomic_store_n(&dr->state, IDLE, __ATOMIC_RELEASE);
            return GS_DRAIN_DONE;
        }
        uint64_t waited = gs_compute_now() - t0;
        if (waited < bound_ns) {
            wait_while(&dr->state, BUSY, bound_ns - waited);
            continue;
        }
        /* registered first: the drainer looks itself up as it retires */
        if (!abandon(dr)) {
            wait_while(&dr->state, BUSY, 0); /* no room since: unbounded after all */
            continue;
        }
        uint32_t busy = BUSY;
        if (__atomic_compare_exchange_n(&dr->state, &busy, ABANDONED, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            *drp = NULL;
            return GS_DRAIN_GAVE_UP;
        }
        pthread_mutex_lock(&abandoned_lock); /* done meanwhile: not abandoned after all */
        for (int i = 0; i < MAX_ABANDONED; i++)
            if (abandoned[i] == dr)
                abandoned[i] = NULL;
        pthread_mutex_unlock(&abandoned_lock);
    }
}

void gs_drain_forget_ctx(CUcontext ctx)
{
    pthread_mutex_lock(&abandoned_lock);
    for (int i = 0; i < MAX_ABANDONED; i++)
        if (abandoned[i] && abandoned[i]->ctx == ctx)
            abandoned[i]->ctx_gone = 1;
    pthread_mutex_unlock(&abandoned_lock);
}

void gs_drainer_release(struct gs_drainer *dr)
{
    if (!dr)
        return;
    __atomic_store_n(&dr->state, QUIT, __ATOMIC_RELEASE);
    wake(&dr->state);
}

void gs_drain_fork_child(void)
{
    /* their threads are the parent's */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    abandoned_lock = fresh;
    for (int i = 0; i < MAX_ABANDONED; i++)
        abandoned[i] = NULL;
}
