/* The FGD artifact's "typical pods": the workload's pod shapes, keyed by
 * CPU, GPU count, GPU share per GPU and GPU model constraint (memory is not
 * part of the key), most frequent first, up to the shapes that together
 * cover TYPICAL_PCT % of the pods. CPU-only pods are shapes like any other.
 * Their shares are renormalised over the chosen shapes. */
#include "policy_internal.h"

#include <stdlib.h>
#include <string.h>

/* The artifact's experiments keep shapes until 95 % of the pods are covered. */
#define TYPICAL_PCT 95.0

void gs_typical_init(gs_typical_set *t)
{
    memset(t, 0, sizeof(*t));
}

void gs_typical_free(gs_typical_set *t)
{
    free(t->items);
    memset(t, 0, sizeof(*t));
}

static bool same_shape(const gs_typical *a, const gs_request *r)
{
    uint32_t mask = r->any_model ? 0 : r->model_mask;
    int32_t milli = r->num_gpus > 0 ? r->gpu_milli : 0;
    return a->cpu_milli == r->cpu_milli && a->num_gpus == r->num_gpus && a->gpu_milli == milli &&
           a->any_model == (r->any_model || r->num_gpus == 0) && a->model_mask == mask;
}

int gs_typical_add(gs_typical_set *t, const gs_request *r, double weight)
{
    t->chosen = 0;
    for (int i = 0; i < t->count; i++) {
        if (same_shape(&t->items[i], r)) {
            t->items[i].count += weight;
            return 0;
        }
    }
    if (t->count == t->cap) {
        int cap = t->cap ? t->cap * 2 : 32;
        gs_typical *grown = realloc(t->items, (size_t)cap * sizeof(*grown));
        if (!grown)
            return -1;
        t->items = grown;
        t->cap = cap;
    }
    bool cpu_only = r->num_gpus == 0;
    t->items[t->count++] = (gs_typical){
        .cpu_milli = r->cpu_milli,
        .num_gpus = r->num_gpus,
        .gpu_milli = cpu_only ? 0 : r->gpu_milli,
        .any_model = cpu_only || r->any_model,
        .model_mask = cpu_only || r->any_model ? 0 : r->model_mask,
        .count = weight,
    };
    return 0;
}

/* Most frequent first; equal counts in the artifact's order (its key
 * compared in reverse: CPU, then GPU share, then GPU count, then model;
 * a model set is compared by its bit mask here, not by its name). */
static int by_popularity(const void *pa, const void *pb)
{
    const gs_typical *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    if (a->cpu_milli != b->cpu_milli)
        return a->cpu_milli > b->cpu_milli ? -1 : 1;
    if (a->gpu_milli != b->gpu_milli)
        return a->gpu_milli > b->gpu_milli ? -1 : 1;
    if (a->num_gpus != b->num_gpus)
        return a->num_gpus > b->num_gpus ? -1 : 1;
    if (a->model_mask != b->model_mask)
        return a->model_mask > b->model_mask ? -1 : 1;
    return 0;
}

int gs_typical_build(gs_typical_set *t)
{
    if (t->chosen > 0)
        return t->chosen;
    if (t->count == 0)
        return 0;
    qsort(t->items, (size_t)t->count, sizeof(*t->items), by_popularity);
    double total = 0.0;
    for (int i = 0; i < t->count; i++)
        total += t->items[i].count;
    double want = TYPICAL_PCT * total / 100.0, covered = 0.0;
    int n = 0;
    while (n < t->count && covered < want)
        covered += t->items[n++].count;
    for (int i = 0; i < t->count; i++)
        t->items[i].share = i < n ? t->items[i].count / covered : 0.0;
    t->chosen = n;
    return n;
}
