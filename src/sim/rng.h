/* Small seeded PRNG (splitmix64) so runs are reproducible everywhere. */
#ifndef GPUSLICE_SIM_RNG_H
#define GPUSLICE_SIM_RNG_H

#include <stdint.h>

typedef struct sim_rng {
    uint64_t state;
} sim_rng;

void sim_rng_seed(sim_rng *r, uint64_t seed);
uint64_t sim_rng_next(sim_rng *r);
/* Uniform integer in [0, bound); bound must be > 0. */
uint64_t sim_rng_below(sim_rng *r, uint64_t bound);

#endif
