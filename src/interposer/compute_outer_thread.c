/*
 * The outer loop's own thread, one per process, started at the first outer
 * run. A launch that claims a run (gs_compute_outer) hands it here instead
 * of spending the run's NVML reads on the launching thread: on an H200 a
 * run took 2-4 ms every GS_LIM_OUTER_NS, 1-1.6 % of a host-bound load's
 * time and a stall of a decoder's token. Where the thread cannot start, the
 * run goes inline. The thread blocks every signal (they are the program's),
 * is started afresh in a forked child, and stops running at exit(), before
 * the libraries' destructors (NVML's among them) run.
 */
#define _GNU_SOURCE
#include "compute_outer.h"
#include "fork_hooks.h"
#include "log.h"
#include "runtime.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

enum thread_state { NOT_STARTED, RUNNING, CANNOT_START, EXITING };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static enum thread_state state;                /* lock */
static uint8_t pending[GS_REGION_MAX_DEVICES]; /* lock: devices with a claimed run */
static int exit_hook;                          /* lock: at_exit registered in this process */

static int take_pending(void)
{
    for (int d = 0; d < GS_REGION_MAX_DEVICES; d++)
        if (pending[d]) {
            pending[d] = 0;
            return d;
        }
    return -1;
}

static void *outer_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        int d = state == EXITING ? -1 : take_pending();
        if (d < 0) {
            pthread_cond_wait(&wake, &lock);
            continue;
        }
        pthread_mutex_unlock(&lock);
        struct gs_region *r = gs_rt_region();
        if (r)
            gs_compute_outer_run(r, d);
        pthread_mutex_lock(&lock);
    }
    return NULL;
}

static void at_exit(void)
{
    pthread_mutex_lock(&lock);
    state = EXITING;
    pthread_mutex_unlock(&lock);
    gs_compute_outer_stop();
}

static enum thread_state start(void)
{
    pthread_attr_t attr;
    sigset_t all, old;
    pthread_t id;
    if (pthread_attr_init(&attr) != 0)
        return CANNOT_START;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    /* but not the faults: blocked, a SIGBUS from a device ledger another
     * tenant cut short under our mapping never reached its guard
     * (map_guard.h), and the kernel killed the process */
    static const int faults[] = { SIGBUS, SIGSEGV, SIGFPE, SIGILL };
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits the mask */
    int rc = pthread_create(&id, &attr, outer_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        gs_log(GS_LOG_INFO, "the compute limiter's outer loop runs on the launching threads: no thread of its own (%d)",
               rc);
        return CANNOT_START;
    }
    pthread_setname_np(id, "gpuslice-outer");
    if (!exit_hook)
        exit_hook = atexit(at_exit) == 0;
    return RUNNING;
}

int gs_compute_outer_post(int d)
{
    if (d < 0 || d >= GS_REGION_MAX_DEVICES)
        return 0;
    pthread_mutex_lock(&lock);
    if (state == NOT_STARTED)
        state = start();
    int posted = state == RUNNING || state == EXITING; /* exiting: the run is dropped */
    if (state == RUNNING) {
        pending[d] = 1;
        pthread_cond_signal(&wake);
    }
    pthread_mutex_unlock(&lock);
    return posted;
}

void gs_outer_thread_fork_prepare(void)
{
    pthread_mutex_lock(&lock);
    gs_compute_outer_fork_prepare();
}

void gs_outer_thread_fork_parent(void)
{
    gs_compute_outer_fork_parent();
    pthread_mutex_unlock(&lock);
}

void gs_outer_thread_fork_child(void)
{
    gs_compute_outer_fork_child();
    /* the thread is the parent's: the child starts its own at its first
     * run; its at_exit hook came with the copy */
    for (int d = 0; d < GS_REGION_MAX_DEVICES; d++)
        pending[d] = 0;
    if (state == RUNNING)
        state = NOT_STARTED;
    pthread_cond_init(&wake, NULL);
    pthread_mutex_unlock(&lock);
}
