/* fraglook, our policy. Score = reduction of three expected losses:
 *
 *  1. one-step fragmentation (as FGD): free GPU compute that typical pods
 *     could not use right now;
 *  2. CPU stranding: free GPU compute the node can no longer feed with CPU
 *     at the workload's CPU-per-GPU ratio. FGD only notices CPU once a
 *     typical pod fails outright; this sees exhaustion coming several pods
 *     ahead and steers CPU-only pods to CPU the GPUs will never need;
 *  3. terminal waste (looking further than one placement): for every GPU,
 *     the compute expected to be left over once future pods drawn from the
 *     workload have filled it as far as they can (see gs_frag_terminal).
 *     FGD treats a gap of 370 (soon refilled by a 320) as worse than a
 *     dead gap of 190; this term ranks them by what they finally waste.
 *
 * Weights chosen by a small sweep on openb default and gpushare100, seeds
 * 42-51 (docs/scheduling.md); the result is flat within 0.1 point nearby. */
#include "policy_internal.h"

#define W_FRAG 1.0
#define W_STRAND 3.0
#define W_TERMINAL 2.0

/* Free GPU compute beyond what the node's free CPU can feed, in milli-GPU. */
static double cpu_stranded(const gs_frag_model *m, const gs_view *v)
{
    if (m->sum_gpu_milli <= 0.0 || m->gpu_pod_cpu_milli <= 0.0)
        return 0.0;
    double free_gpu = 0.0;
    for (int i = 0; i < v->num_gpus; i++)
        free_gpu += v->gpu_free[i];
    double cpu_per_milli = m->gpu_pod_cpu_milli / m->sum_gpu_milli;
    double fed = (double)v->cpu_free / cpu_per_milli;
    return free_gpu > fed ? free_gpu - fed : 0.0;
}

static double terminal_waste(gs_frag_model *m, const gs_view *v)
{
    double sum = 0.0;
    for (int i = 0; i < v->num_gpus; i++)
        sum += gs_frag_terminal(m, v->gpu_free[i]);
    return sum;
}

double gs_score_fraglook(gs_engine *e, const gs_node *n, const gs_request *r,
                         const gs_candidate *cand)
{
    gs_view before, after;
    gs_view_of(n, &before);
    after = before;
    gs_view_place(&after, n, r, cand);
    gs_frag_model *m = &e->frag;
    return W_FRAG * (gs_frag_of(m, &before) - gs_frag_of(m, &after)) +
           W_STRAND * (cpu_stranded(m, &before) - cpu_stranded(m, &after)) +
           W_TERMINAL * (terminal_waste(m, &before) - terminal_waste(m, &after));
}
