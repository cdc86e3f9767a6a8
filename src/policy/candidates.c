/* Enumerates the distinct GPU choices a feasible node offers a request. */
#include "policy_internal.h"

#include <string.h>

static int32_t gpu_free(const gs_sched_gpu *g)
{
    return g->milli_total - g->milli_used;
}

static bool same_choice(const gs_candidate *a, const gs_candidate *b)
{
    return a->num_gpus == b->num_gpus && memcmp(a->gpus, b->gpus, (size_t)a->num_gpus * sizeof(a->gpus[0])) == 0;
}

static int push_unique(gs_candidate *out, int count, int max, const gs_candidate *c)
{
    for (int i = 0; i < count; i++)
        if (same_choice(&out[i], c))
            return count;
    if (count < max)
        out[count++] = *c;
    return count;
}

/* Sorts GPU indices by free compute (ascending), index as tie-break, so a
 * candidate built from a prefix is the tightest choice. */
static void sort_by_free(const gs_node *n, int8_t *idx, int count)
{
    for (int i = 1; i < count; i++) {
        int8_t cur = idx[i];
        int j = i - 1;
        while (j >= 0 && gpu_free(&n->gpus[idx[j]]) > gpu_free(&n->gpus[cur])) {
            idx[j + 1] = idx[j];
            j--;
        }
        idx[j + 1] = cur;
    }
}

/* Candidates from one pool of fitting GPUs (the whole node or one NUMA node). */
static int from_pool(const gs_node *n, const gs_request *r, const int8_t *pool, int size, gs_candidate *out, int count,
                     int max)
{
    if (size < r->num_gpus)
        return count;
    gs_candidate c = { .num_gpus = r->num_gpus };
    if (r->num_gpus == 1) {
        /* One candidate per distinct free amount: equal GPUs are interchangeable. */
        for (int i = 0; i < size; i++) {
            if (i > 0 && gpu_free(&n->gpus[pool[i]]) == gpu_free(&n->gpus[pool[i - 1]]))
                continue;
            c.gpus[0] = pool[i];
            count = push_unique(out, count, max, &c);
        }
        return count;
    }
    /* Several GPUs: the tightest and the loosest set. */
    memcpy(c.gpus, pool, (size_t)r->num_gpus);
    count = push_unique(out, count, max, &c);
    memcpy(c.gpus, pool + size - r->num_gpus, (size_t)r->num_gpus);
    return push_unique(out, count, max, &c);
}

int gs_candidates(const gs_node *n, const gs_request *r, const gs_reject *gpu_fit, gs_candidate *out, int max)
{
    if (max <= 0)
        return 0;
    if (r->num_gpus == 0) {
        out[0].num_gpus = 0;
        return 1;
    }
    int8_t fit[GS_MAX_GPUS_PER_NODE];
    int nfit = 0;
    for (int i = 0; i < n->num_gpus; i++)
        if (gpu_fit[i] == GS_FIT)
            fit[nfit++] = (int8_t)i;
    sort_by_free(n, fit, nfit);
    if (r->numa != GS_NUMA_SINGLE)
        return from_pool(n, r, fit, nfit, out, 0, max);
    int count = 0;
    bool done[GS_MAX_GPUS_PER_NODE] = { false };
    for (int i = 0; i < nfit; i++) {
        if (done[i])
            continue;
        int8_t pool[GS_MAX_GPUS_PER_NODE];
        int size = 0;
        for (int j = i; j < nfit; j++) {
            if (n->gpus[fit[j]].numa == n->gpus[fit[i]].numa) {
                pool[size++] = fit[j];
                done[j] = true;
            }
        }
        count = from_pool(n, r, pool, size, out, count, max);
    }
    return count;
}
