#include "compute_cost.h"
#include "log.h"

static const char *const cost_what[GS_COST_COUNT] = {
#define GS_COST(id, what) what,
#include "compute_cost.def"
#undef GS_COST
};

static uint64_t cost_n[GS_COST_COUNT], cost_ns[GS_COST_COUNT], cost_max[GS_COST_COUNT];

void gs_cost_add(enum gs_cost kind, uint64_t ns)
{
    __atomic_add_fetch(&cost_n[kind], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&cost_ns[kind], ns, __ATOMIC_RELAXED);
    uint64_t m = __atomic_load_n(&cost_max[kind], __ATOMIC_RELAXED);
    while (ns > m && !__atomic_compare_exchange_n(&cost_max[kind], &m, ns, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

__attribute__((destructor)) static void cost_report(void)
{
    for (int k = 0; k < GS_COST_COUNT; k++)
        if (cost_n[k])
            gs_log(GS_LOG_DEBUG, "compute limiter cost: %llu %s, %.3f ms in all (%.2f us each, longest %.2f us)",
                   (unsigned long long)cost_n[k], cost_what[k], (double)cost_ns[k] / 1e6,
                   (double)cost_ns[k] / 1e3 / (double)cost_n[k], (double)cost_max[k] / 1e3);
}
