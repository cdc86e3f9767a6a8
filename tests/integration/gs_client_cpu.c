/*
 * A tenant's host work between launches. Python holds its core there, so a
 * gap that sleeps throughout would come back late on a busy machine and
 * stretch the step; a gap that spins throughout, stretched with the slowed
 * clock (5 to 20 times), holds a core of the test machine for nothing: the
 * graph and decoder tenants' two slow tests spun 427 s of CPU in 431 s.
 * So the gap sleeps up to its last SPIN_TAIL_NS of wall time, with a timer
 * slack of 1 ns (a nice-0 thread then woke 8-17 us late on average on 2
 * loaded cores, beyond 100 us in under 1 % of sleeps), and spins that tail.
 */
#define _GNU_SOURCE
#include "gs_client_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

#define SPIN_TAIL_NS 100000.0 /* wall time */

double gs_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* How many times slower than the wall CLOCK_MONOTONIC runs (the sim clock's
 * factor; 1 without it), read once: a decoder's gaps come microseconds
 * apart. The sim clock checks the value itself. */
static double slowdown(void)
{
    static double k; /* 0: not read yet; every thread reads the same value */
    double v;
    __atomic_load(&k, &v, __ATOMIC_RELAXED);
    if (v == 0.0) {
        const char *s = getenv("GPUSLICE_SIM_CLOCK_SLOWDOWN");
        v = s ? atof(s) : 1.0;
        v = v >= 1.0 ? v : 1.0;
        __atomic_store(&k, &v, __ATOMIC_RELAXED);
    }
    return v;
}

void gs_cpu_work_us(double us)
{
    static __thread int slack_set;
    double end = gs_now_s() + us / 1e6;
    double sleep_s = us / 1e6 - SPIN_TAIL_NS / 1e9 / slowdown();
    if (sleep_s > 0) {
        if (!slack_set)
            slack_set = prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0;
        struct timespec ts = { (time_t)sleep_s, (long)((sleep_s - (double)(time_t)sleep_s) * 1e9) };
        nanosleep(&ts, NULL);
    }
    while (gs_now_s() < end)
        ;
}

long long gs_run_delay_us(void)
{
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    unsigned long long on_cpu_ns, waited_ns;
    int got = f ? fscanf(f, "%llu %llu", &on_cpu_ns, &waited_ns) : 0;
    if (f)
        fclose(f);
    return got == 2 ? (long long)(waited_ns / 1000) : -1;
}

long long gs_run_delay_since(long long since)
{
    long long now = gs_run_delay_us();
    return since < 0 || now < 0 ? -1 : now - since;
}
