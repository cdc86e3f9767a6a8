/* What the compute limiter's unit tests share: cmocka, the clock's units
 * and a new account and an outer run's input as the tests write them. */
#ifndef GS_TEST_LIMITER_TEST_H
#define GS_TEST_LIMITER_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "limiter.h"

#define MS 1000000ULL
#define US 1000ULL

/* A new account of mode, limit pct and weight, set up at 1 s. */
static inline void account(struct gs_lim_account *a, enum gs_lim_mode mode, unsigned pct, unsigned weight)
{
    memset(a, 0, sizeof *a);
    gs_lim_account_init(a, mode, pct, weight, 1000 * MS);
}

/* A capped account (weight 100) that has learnt c and s and read the
 * device busy dev at its last outer run. */
static inline void learnt_cap(struct gs_lim_account *a, unsigned pct, uint32_t corr, uint32_t speed, uint32_t dev)
{
    account(a, GS_LIM_CAP, pct, 100);
    a->corr_ppm = corr;
    a->speed_ppm = speed;
    a->dev_ppm = dev;
}

/* One outer run's input, a run after the last at 1 s: occupancy occ and
 * NVML's readings in ppm (-1: none), no power reading, beside the n ledger
 * members of dem. */
static inline struct gs_outer_in outer_in(uint64_t occ, int64_t our, int64_t others, int64_t dev,
                                          const struct gs_lim_demand *dem, unsigned n)
{
    return (struct gs_outer_in){ .now = 1250 * MS,
                                 .interval_ns = GS_LIM_OUTER_NS,
                                 .occ_ppm = occ,
                                 .our_ppm = our,
                                 .others_ppm = others,
                                 .dev_ppm = dev,
                                 .power_mw = -1,
                                 .limit_mw = -1,
                                 .dem = dem,
                                 .ndem = n };
}

#endif
