/* The compute limiter's clock: CLOCK_MONOTONIC, the simulated driver's too. */
#ifndef GPUSLICE_COMPUTE_CLOCK_H
#define GPUSLICE_COMPUTE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t gs_compute_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline uint64_t gs_compute_now(void)
{
    return gs_compute_clock_ns(CLOCK_MONOTONIC);
}

/* The same clock as of the last timer tick (a few ms behind), for checks
 * that need no more: whether the 250 ms outer loop is due. The launch path
 * of a container running free reads it on every launch, and the vDSO
 * answers it without reading the hardware counter. */
static inline uint64_t gs_compute_coarse_now(void)
{
    return gs_compute_clock_ns(CLOCK_MONOTONIC_COARSE);
}

#endif
