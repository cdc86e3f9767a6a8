/* spread: the emptiest node first, then the least-used GPU on it. A
 * primary node-level term plus a much smaller GPU-level term, so the node
 * is chosen first and the GPU choice only breaks ties within it. */
#include "policy_internal.h"

static double ratio(int64_t part, int64_t whole)
{
    return whole > 0 ? (double)part / (double)whole : 0.0;
}

double gs_score_spread(const gs_node *n, const gs_request *r, const gs_candidate *c)
{
    int64_t used = 0, total = 0;
    for (int i = 0; i < n->num_gpus; i++) {
        used += n->gpus[i].milli_used;
        total += n->gpus[i].milli_total;
    }
    double pick = 0.0;
    for (int i = 0; i < c->num_gpus; i++) {
        const gs_sched_gpu *g = &n->gpus[c->gpus[i]];
        used += r->gpu_milli >= g->milli_total ? g->milli_total : r->gpu_milli;
        pick += ratio(g->milli_used, g->milli_total) / c->num_gpus;
    }
    double cpu = ratio(n->cpu_used_milli + r->cpu_milli, n->cpu_total_milli);
    return -ratio(used, total) - 0.01 * pick - 0.001 * cpu;
}
