/* Where the compute limiter spends a limited process's host time: counts
 * and nanoseconds per kind, reported at exit (GPUSLICE_LOG_LEVEL=3). A light
 * tenant beside others pays for probes, drains and the outer loop in its own
 * latency; this says how much of each. */
#ifndef GPUSLICE_COMPUTE_COST_H
#define GPUSLICE_COMPUTE_COST_H

#include "compute_clock.h"

#include <stdint.h>

enum gs_cost {
#define GS_COST(id, what) GS_COST_##id,
#include "compute_cost.def"
#undef GS_COST
    GS_COST_COUNT
};

void gs_cost_add(enum gs_cost kind, uint64_t ns);

/* Counts the time since *t as kind, and restarts *t: one step of a timed
 * sequence each. */
static inline void gs_cost_lap(uint64_t *t, enum gs_cost kind)
{
    uint64_t now = gs_compute_now();
    gs_cost_add(kind, now - *t);
    *t = now;
}

#endif
