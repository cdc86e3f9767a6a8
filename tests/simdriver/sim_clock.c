/*
 * libgpuslice_simclock.so: a slowed monotonic clock for the compute tests.
 *
 * Preloaded ahead of the interposer into every tenant of a test, it makes
 * CLOCK_MONOTONIC (and its _RAW and _COARSE kin) run GPUSLICE_SIM_CLOCK_SLOWDOWN
 * times slower than the wall, and stretches every sleep and futex timeout by
 * the same factor. The simulated device's timeline, the limiter's windows and
 * turns, and the tenant's own measurements all read that clock, so the test
 * sees the same device and limiter as at full speed while whatever delays
 * the machine adds (a descheduled tenant, a late wake-up, a preempted lock
 * holder) shrink by the factor against them. It is a slowed wall clock, not
 * a discrete-event one: a delay longer than the slowed windows still shows.
 *
 * The origin is 0, so that every process agrees on the clock without any
 * shared state: simulated ns = real ns / slowdown.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sim_export.h"

#define MAX_SLOWDOWN 64

static unsigned slowdown(void)
{
    static unsigned k; /* 0: not read yet */
    unsigned v = __atomic_load_n(&k, __ATOMIC_RELAXED);
    if (v)
        return v;
    const char *s = getenv("GPUSLICE_SIM_CLOCK_SLOWDOWN");
    char *end = NULL;
    unsigned long x = s ? strtoul(s, &end, 10) : 1;
    if (s && (end == s || *end || x < 1 || x > MAX_SLOWDOWN)) {
        fprintf(stderr, "sim clock: GPUSLICE_SIM_CLOCK_SLOWDOWN=%s is not a whole number from 1 to %d\n", s,
                MAX_SLOWDOWN);
        abort();
    }
    __atomic_store_n(&k, (unsigned)x, __ATOMIC_RELAXED);
    return (unsigned)x;
}

static int is_monotonic(clockid_t c)
{
    return c == CLOCK_MONOTONIC || c == CLOCK_MONOTONIC_RAW || c == CLOCK_MONOTONIC_COARSE;
}

static uint64_t ns_of(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000000ULL + (uint64_t)ts->tv_nsec;
}

static struct timespec ts_of(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };
    return ts;
}

static struct timespec stretched(const struct timespec *ts)
{
    return ts_of(ns_of(ts) * slowdown());
}

/* What remains of a stretched sleep, in simulated time. */
static void shrink(struct timespec *rem)
{
    if (rem)
        *rem = ts_of(ns_of(rem) / slowdown());
}

#define REAL(name)                                                                                                     \
    static __typeof__(name) *real_##name;                                                                              \
    if (!real_##name)                                                                                                  \
        real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name);

SIM_EXPORT int clock_gettime(clockid_t c, struct timespec *ts)
{
    REAL(clock_gettime)
    int rc = real_clock_gettime(c, ts);
    if (rc == 0 && is_monotonic(c))
        *ts = ts_of(ns_of(ts) / slowdown());
    return rc;
}

SIM_EXPORT int clock_nanosleep(clockid_t c, int flags, const struct timespec *req, struct timespec *rem)
{
    REAL(clock_nanosleep)
    if (!is_monotonic(c))
        return real_clock_nanosleep(c, flags, req, rem);
    struct timespec real = stretched(req); /* an absolute simulated time is the real one x k too */
    int rc = real_clock_nanosleep(c, flags, &real, rem);
    if (!(flags & TIMER_ABSTIME))
        shrink(rem);
    return rc;
}

SIM_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
    REAL(nanosleep)
    struct timespec real = stretched(req);
    int rc = real_nanosleep(&real, rem);
    shrink(rem);
    return rc;
}

SIM_EXPORT int usleep(useconds_t us)
{
    struct timespec ts = ts_of((uint64_t)us * 1000ULL);
    return nanosleep(&ts, NULL);
}

SIM_EXPORT unsigned int sleep(unsigned int secs)
{
    struct timespec ts = { (time_t)secs, 0 }, rem = { 0, 0 };
    if (nanosleep(&ts, &rem) != 0)
        return (unsigned)rem.tv_sec;
    return 0;
}

/* futex(FUTEX_WAIT) takes a relative timeout; the bitset and lock-pi waits
 * take absolute ones on the monotonic clock unless FUTEX_CLOCK_REALTIME. */
SIM_EXPORT long syscall(long nr, ...)
{
    REAL(syscall)
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (nr == SYS_futex && a[3]) {
        int op = (int)a[1];
        int cmd = op & FUTEX_CMD_MASK;
        int monotonic_abs = cmd == FUTEX_WAIT_BITSET && !(op & FUTEX_CLOCK_REALTIME);
        if (cmd == FUTEX_WAIT || monotonic_abs) {
            struct timespec real = stretched((const struct timespec *)a[3]);
            return real_syscall(nr, a[0], a[1], a[2], (long)&real, a[4], a[5]);
        }
    }
    return real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
