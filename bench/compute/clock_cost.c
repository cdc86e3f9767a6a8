/*
 * What one read of each clock the limiter could use costs on this host: the
 * open-window gate reads CLOCK_MONOTONIC on every launch (compute_clock.h),
 * and where the kernel's clock source has no vDSO path that read is a
 * system call. Prints one JSON line with ns per read and the clock source
 * (an H200 host: 34 ns, where the gate's fast path took 0.13-0.14 us).
 *   cc -O2 bench/compute/clock_cost.c -o clock_cost && ./clock_cost
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#endif

#define READS 5000000

static uint64_t read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static double per_read(clockid_t id)
{
    volatile uint64_t sink = 0;
    uint64_t from = read_ns(CLOCK_MONOTONIC);
    for (int i = 0; i < READS; i++)
        sink += read_ns(id);
    return (double)(read_ns(CLOCK_MONOTONIC) - from) / READS;
}

/* ns per read of the time-stamp counter; -1 where there is none */
static double per_tsc(void)
{
#ifdef HAVE_TSC
    volatile uint64_t sink = 0;
    uint64_t from = read_ns(CLOCK_MONOTONIC);
    for (int i = 0; i < READS; i++)
        sink += __rdtsc();
    return (double)(read_ns(CLOCK_MONOTONIC) - from) / READS;
#else
    return -1;
#endif
}

int main(void)
{
    char source[64] = "unknown";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (f) {
        if (!fgets(source, sizeof source, f))
            strcpy(source, "unknown");
        source[strcspn(source, "\n")] = '\0';
        fclose(f);
    }
    printf("{\"clocksource\": \"%s\", \"monotonic_ns\": %.1f, \"monotonic_coarse_ns\": %.1f, \"rdtsc_ns\": %.1f}\n",
           source, per_read(CLOCK_MONOTONIC), per_read(CLOCK_MONOTONIC_COARSE), per_tsc());
    return 0;
}
