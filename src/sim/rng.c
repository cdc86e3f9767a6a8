/* splitmix64: tiny, fast, and good enough for sampling and shuffling. */
#include "rng.h"

void sim_rng_seed(sim_rng *r, uint64_t seed)
{
    r->state = seed;
}

uint64_t sim_rng_next(sim_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t sim_rng_below(sim_rng *r, uint64_t bound)
{
    /* Rejection sampling removes modulo bias. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do {
        x = sim_rng_next(r);
    } while (x >= limit);
    return x % bound;
}
