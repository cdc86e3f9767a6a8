/* fgd: the FGD artifact's scorer (Weng et al., USENIX ATC'23; our code).
 *
 * A node's fragmentation against the typical pods (typical.c): for each
 * typical pod t with share p, the node's free GPU compute that t could not
 * use counts p times. That is all of it when t is CPU-only, when t may not
 * use the node's GPU model, when too few GPUs have room for t, or when the
 * node's free CPU is short of t's; otherwise it is the free compute on the
 * GPUs too small for t. Memory is not looked at. The score of a placement is
 * int(100 * sigmoid((before - after) / 1000)): an integer, so many nodes
 * tie, and the engine gives ties to the first node (the simulator orders
 * nodes per seed, as the artifact's random node-name prefixes do) and, on
 * one node, to the lowest GPU index. */
#include "policy_internal.h"

#include <math.h>

static double fgd_frag_compute(const void *ctx, const gs_view *v)
{
    const gs_typical_set *t = ctx;
    int64_t free_total = 0;
    for (int i = 0; i < v->num_gpus; i++)
        free_total += v->gpu_free[i];
    if (free_total == 0)
        return 0.0;
    double sum = 0.0;
    for (int k = 0; k < t->chosen; k++) {
        const gs_typical *p = &t->items[k];
        bool access = p->any_model || (v->model >= 0 && (p->model_mask >> v->model & 1u));
        int64_t lost = free_total;
        if (p->num_gpus > 0 && access && p->cpu_milli <= v->cpu_free) {
            int fit = 0;
            int64_t small = 0;
            for (int i = 0; i < v->num_gpus; i++) {
                bool ok = p->gpu_milli >= GS_MILLI_PER_GPU ? v->gpu_idle[i] : v->gpu_free[i] >= p->gpu_milli;
                fit += ok;
                small += ok ? 0 : v->gpu_free[i];
            }
            if (fit >= p->num_gpus)
                lost = small;
        }
        sum += p->share * (double)lost;
    }
    return sum;
}

double gs_fgd_frag(gs_engine *e, const gs_view *v)
{
    gs_typical_build(&e->typical);
    gs_view key = *v;
    key.mem_free = key.mem_total = key.cpu_total = 0; /* not part of the measure */
    return gs_memo_get(&e->fgd_memo, &key, fgd_frag_compute, &e->typical);
}

double gs_score_fgd(gs_engine *e, const gs_node *n, const gs_request *r, const gs_candidate *cand)
{
    gs_view before, after;
    gs_view_of(n, &before);
    after = before;
    gs_view_place(&after, n, r, cand);
    double drop = gs_fgd_frag(e, &before) - gs_fgd_frag(e, &after);
    double sigmoid = 1.0 / (1.0 + exp(-drop / 1000.0));
    return (double)(int64_t)(sigmoid * 100.0);
}
