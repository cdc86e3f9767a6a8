/* What the limiter's source files share and nothing else uses: relaxed
 * atomics on the shared account (every field may be read and written by
 * several processes at once) and the others' uses summed. */
#ifndef GPUSLICE_LIMITER_INTERNAL_H
#define GPUSLICE_LIMITER_INTERNAL_H

#include "limiter.h"

#define LD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_RELAXED)

/* The uses the n others published, summed. */
static inline uint64_t gs_lim_uses_of(const struct gs_lim_demand *others, unsigned n)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < n; i++)
        sum += others[i].use_ppm;
    return sum;
}

/* The same, each for the part of an interval of interval_ns it was active
 * in, up to its last demand (quiet_ns before now): a quiet member's use is
 * the one it published before it went quiet. */
static inline uint64_t gs_lim_active_uses_of(const struct gs_lim_demand *others, unsigned n, uint64_t interval_ns)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < n && interval_ns; i++)
        if (others[i].quiet_ns < interval_ns)
            sum += (uint64_t)((unsigned __int128)others[i].use_ppm * (interval_ns - others[i].quiet_ns) / interval_ns);
    return sum;
}

/* The account's record of its last outer runs (power_runs, packed by
 * gs_lim_power_run), kept in limiter_correction.c beside the mean over it
 * (gs_lim_power_busy): a run appended (the outer loop's runs are one at a
 * time: outer_next_ns is claimed), and the time the record covers, summed
 * from the newest run until it reaches bound_ns. */
void gs_lim_power_record(struct gs_lim_account *a, uint64_t run);
uint64_t gs_lim_power_recorded_ns(const struct gs_lim_account *a, uint64_t bound_ns);

/* Whether the record still holds every run since the account began and
 * they cover less than span_ns: the account is younger than that. */
int gs_lim_power_record_younger(const struct gs_lim_account *a, uint64_t span_ns);

/* One period's allowance at rate: what idle time banks. */
static inline int64_t gs_lim_burst_of(uint32_t rate)
{
    return (int64_t)((unsigned __int128)GS_LIM_DEFAULT_PERIOD_NS * rate / GS_LIM_PPM);
}

#endif
