/* Binpack, spread and best-fit scores.
 *
 * Each is a primary node-level term plus a much smaller GPU-level term, so
 * the node is chosen first and the GPU choice only breaks ties within it. */
#include "policy_internal.h"

static double ratio(int64_t part, int64_t whole)
{
    return whole > 0 ? (double)part / (double)whole : 0.0;
}

/* Share of the node's GPU compute in use after the placement. */
static double gpu_util_after(const gs_node *n, const gs_request *r, const gs_candidate *c)
{
    int64_t used = 0, total = 0;
    for (int i = 0; i < n->num_gpus; i++) {
        used += n->gpus[i].milli_used;
        total += n->gpus[i].milli_total;
    }
    for (int i = 0; i < c->num_gpus; i++) {
        const gs_gpu *g = &n->gpus[c->gpus[i]];
        used += r->gpu_milli >= g->milli_total ? g->milli_total : r->gpu_milli;
    }
    return ratio(used, total);
}

/* Mean share in use, before placement, of the GPUs the candidate takes. */
static double chosen_gpu_used(const gs_node *n, const gs_candidate *c)
{
    if (c->num_gpus == 0)
        return 0.0;
    double sum = 0.0;
    for (int i = 0; i < c->num_gpus; i++) {
        const gs_gpu *g = &n->gpus[c->gpus[i]];
        sum += ratio(g->milli_used, g->milli_total);
    }
    return sum / c->num_gpus;
}

static double cpu_util_after(const gs_node *n, const gs_request *r)
{
    return ratio(n->cpu_used_milli + r->cpu_milli, n->cpu_total_milli);
}

static double mem_util_after(const gs_node *n, const gs_request *r)
{
    return ratio(n->mem_used_mib + r->mem_mib, n->mem_total_mib);
}

double gs_score_basic(gs_policy_kind kind, const gs_node *n, const gs_request *r,
                      const gs_candidate *cand)
{
    double gpu = gpu_util_after(n, r, cand);
    double pick = chosen_gpu_used(n, cand);
    double cpu = cpu_util_after(n, r);
    switch (kind) {
    case GS_POLICY_BINPACK:
        return gpu + 0.01 * pick + 0.001 * cpu;
    case GS_POLICY_SPREAD:
        return -gpu - 0.01 * pick - 0.001 * cpu;
    case GS_POLICY_BESTFIT: {
        /* Least normalised leftover; a node without GPUs has no GPU term. */
        double left = (1.0 - cpu) + (1.0 - mem_util_after(n, r));
        if (n->num_gpus > 0)
            left += 1.0 - gpu;
        return -left + 0.01 * pick;
    }
    default:
        return 0.0;
    }
}
