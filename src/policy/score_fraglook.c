/* Ours (experimental). */
#include "policy_internal.h"

#include <stdio.h>
#include <stdlib.h>

static double P[8] = {1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
static int loaded;

static void load(void)
{
    if (loaded)
        return;
    loaded = 1;
    const char *s = getenv("GS_FL");
    if (s)
        sscanf(s, "%lf,%lf,%lf,%lf,%lf,%lf", &P[0], &P[1], &P[2], &P[3], &P[4], &P[5]);
}

/* GPU compute the node can no longer feed with CPU/memory at the workload's ratio. */
static double stranded(const gs_frag_model *m, const gs_view *v, double *s_mem)
{
    double free_gpu = 0;
    for (int i = 0; i < v->num_gpus; i++)
        free_gpu += v->gpu_free[i];
    double cpu_per = m->gpu_pod_cpu_milli / m->sum_gpu_milli;
    double mem_per = m->gpu_pod_mem_mib / m->sum_gpu_milli;
    double sc = free_gpu - (double)v->cpu_free / cpu_per;
    double sm = free_gpu - (double)v->mem_free / mem_per;
    *s_mem = sm > 0 ? sm : 0;
    return sc > 0 ? sc : 0;
}

double gs_score_fraglook(gs_engine *e, const gs_node *n, const gs_request *r,
                         const gs_candidate *cand)
{
    load();
    gs_view before, after;
    gs_view_of(n, &before);
    after = before;
    gs_view_place(&after, n, r, cand);
    double score = P[0] * (gs_frag_of(&e->frag, &before) - gs_frag_of(&e->frag, &after));
    if (e->frag.sum_gpu_milli > 0 && (P[1] != 0 || P[2] != 0)) {
        double mb, ma;
        double cb = stranded(&e->frag, &before, &mb);
        double ca = stranded(&e->frag, &after, &ma);
        score += P[1] * (cb - ca) + P[2] * (mb - ma);
    }
    if (P[3] != 0) {
        /* best-fit tie-break: less CPU left is better */
        score -= P[3] * (double)after.cpu_free / (double)(after.cpu_total ? after.cpu_total : 1);
    }
    if (P[4] != 0 && r->num_gpus == 0) {
        double free_gpu = 0;
        for (int i = 0; i < after.num_gpus; i++)
            free_gpu += after.gpu_free[i];
        score -= P[4] * free_gpu;
    }
    return score;
}
