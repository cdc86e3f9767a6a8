/* Node state snapshots used by scorers to judge a hypothetical placement. */
#include "policy_internal.h"

#include <string.h>

static void view_gpu(gs_view *v, int i, const gs_sched_gpu *g)
{
    bool usable = g->healthy && (g->slots_total == 0 || g->slots_used < g->slots_total);
    v->gpu_free[i] = usable ? g->milli_total - g->milli_used : 0;
    v->gpu_idle[i] = usable && g->milli_used == 0 && g->slots_used == 0;
}

void gs_view_of(const gs_node *n, gs_view *v)
{
    memset(v, 0, sizeof(*v)); /* views are hashed and compared bytewise */
    v->cpu_total = n->cpu_total_milli;
    v->cpu_free = n->cpu_total_milli - n->cpu_used_milli;
    v->mem_total = n->mem_total_mib;
    v->mem_free = n->mem_total_mib - n->mem_used_mib;
    v->model = n->model;
    v->num_gpus = n->num_gpus;
    for (int i = 0; i < n->num_gpus; i++)
        view_gpu(v, i, &n->gpus[i]);
}

void gs_view_place(gs_view *v, const gs_node *n, const gs_request *r, const gs_candidate *cand)
{
    v->cpu_free -= r->cpu_milli;
    v->mem_free -= r->mem_mib;
    for (int i = 0; i < cand->num_gpus; i++) {
        gs_sched_gpu g = n->gpus[cand->gpus[i]];
        g.milli_used += r->gpu_milli >= g.milli_total ? g.milli_total : r->gpu_milli;
        g.slots_used++;
        view_gpu(v, cand->gpus[i], &g);
    }
}
