/* The compute limiter's clock: CLOCK_MONOTONIC, the simulated driver's too. */
#ifndef GPUSLICE_COMPUTE_CLOCK_H
#define GPUSLICE_COMPUTE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t gs_compute_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

#endif
