/* bestfit and binpack: the FGD artifact's BestFit and GpuPacking scores
 * (our code). Both give an integer node score; the GPU choice is the
 * artifact's "best" one: the tightest GPU that fits (lowest index among
 * equals), or the first idle GPUs for whole-GPU pods, which is the engine's
 * first candidate. */
#include "policy_internal.h"

/* The artifact normalises by its largest node: 128 cores and 8 GPUs. */
#define MAX_SPEC_CPU 128000.0
#define MAX_SPEC_GPU 8000.0
#define MAX_SCORE 100

static int64_t gpu_free_total(const gs_view *v)
{
    int64_t sum = 0;
    for (int i = 0; i < v->num_gpus; i++)
        sum += v->gpu_free[i];
    return sum;
}

/* 100 x (1 - normalised CPU and GPU left after placement, half weight each).
 * The artifact then rescales the scores of a decision to 0..100; with no
 * node above 128 cores and 8 GPUs they already span at most 0..100, where
 * the rescaling keeps their order and their ties. */
double gs_score_bestfit(const gs_node *n, const gs_request *r)
{
    gs_view v;
    gs_view_of(n, &v);
    double left = 0.0;
    left += (double)(v.cpu_free - r->cpu_milli) / MAX_SPEC_CPU * 0.5;
    left += (double)(gpu_free_total(&v) - gs_request_gpu_milli(r)) / MAX_SPEC_GPU * 0.5;
    return (double)(int64_t)((1.0 - left) * MAX_SCORE);
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* Highest for shared GPUs (100 minus a tenth of the free share of the GPU
 * taken, at least 50), then idle GPUs on a used node (50 minus the number
 * taken, at least 33), then an empty node (33 minus its GPUs, at least the
 * number of its GPUs). CPU-only pods score 0 everywhere. */
double gs_score_binpack(const gs_node *n, const gs_request *r, const gs_candidate *tightest)
{
    if (r->num_gpus == 0)
        return 0.0;
    int idle = 0;
    for (int i = 0; i < n->num_gpus; i++)
        idle += n->gpus[i].milli_used == 0;
    if (idle == n->num_gpus)
        return (double)max64(MAX_SCORE / 3 - idle, idle);
    int idle_taken = 0;
    int64_t free_pct = 0;
    for (int i = 0; i < tightest->num_gpus; i++) {
        const gs_sched_gpu *g = &n->gpus[tightest->gpus[i]];
        int64_t free = g->milli_total - g->milli_used;
        idle_taken += g->milli_used == 0;
        free_pct += free * 100 / GS_MILLI_PER_GPU;
    }
    if (idle_taken > 0)
        return (double)max64(MAX_SCORE / 2 - idle_taken, MAX_SCORE / 3);
    return (double)max64(MAX_SCORE - free_pct / 10, MAX_SCORE / 2);
}
