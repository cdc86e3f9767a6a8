/* One simulated run: arrival order, scheduling, milestones, timing. */
#define _GNU_SOURCE
#include "protocol.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rng.h"

size_t *sim_arrivals(const gs_request *pods, size_t num_pods, int64_t capacity_milli, int load_pct,
                     uint64_t seed, size_t *len)
{
    if (num_pods == 0 || load_pct < 1 || load_pct > SIM_MAX_LOAD_PCT)
        return NULL;
    size_t cap = num_pods * 2, count = 0;
    size_t *order = malloc(cap * sizeof(*order));
    if (!order)
        return NULL;
    int64_t requested = 0;
    for (size_t i = 0; i < num_pods; i++) {
        order[count++] = i;
        requested += gs_request_gpu_milli(&pods[i]);
    }
    sim_rng rng;
    sim_rng_seed(&rng, seed);
    /* Sampling cannot reach the target if no pod asks for a GPU. */
    bool any_gpu = requested > 0;
    while (any_gpu && requested * 100 < capacity_milli * load_pct) {
        if (count == cap) {
            size_t *grown = realloc(order, cap * 2 * sizeof(*order));
            if (!grown) {
                free(order);
                return NULL;
            }
            order = grown;
            cap *= 2;
        }
        size_t pick = (size_t)sim_rng_below(&rng, num_pods);
        order[count++] = pick;
        requested += gs_request_gpu_milli(&pods[pick]);
    }
    for (size_t i = count; i > 1; i--) { /* Fisher-Yates */
        size_t j = (size_t)sim_rng_below(&rng, i);
        size_t tmp = order[i - 1];
        order[i - 1] = order[j];
        order[j] = tmp;
    }
    *len = count;
    return order;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(const double *sorted, size_t n, double q)
{
    if (n == 0)
        return 0.0;
    size_t at = (size_t)ceil(q * (double)n);
    return sorted[at == 0 ? 0 : at - 1];
}

static int copy_cluster(const gs_cluster *src, gs_cluster *dst)
{
    *dst = *src;
    dst->nodes = malloc(src->num_nodes * sizeof(*dst->nodes));
    if (!dst->nodes)
        return -1;
    memcpy(dst->nodes, src->nodes, src->num_nodes * sizeof(*dst->nodes));
    dst->cap_nodes = src->num_nodes;
    return 0;
}

int sim_run(const gs_cluster *cluster, const gs_request *pods, size_t num_pods,
            gs_policy_kind policy, uint64_t seed, int load_pct, sim_progress_fn progress,
            void *progress_ctx, sim_result *out)
{
    memset(out, 0, sizeof(*out));
    out->load_pct = load_pct;
    for (int k = 0; k <= SIM_MAX_LOAD_PCT; k++)
        out->alloc_pct[k] = NAN;
    int64_t capacity = gs_cluster_gpu_capacity(cluster);
    if (capacity <= 0)
        return -1;
    size_t len = 0;
    size_t *order = sim_arrivals(pods, num_pods, capacity, load_pct, seed, &len);
    gs_engine *engine = gs_engine_new(policy);
    gs_cluster work;
    double *lat = malloc((len ? len : 1) * sizeof(*lat));
    if (!order || !engine || !lat || copy_cluster(cluster, &work) != 0) {
        free(order);
        gs_engine_free(engine);
        free(lat);
        return -1;
    }
    for (size_t i = 0; i < num_pods; i++)
        gs_engine_add_workload(engine, &pods[i], 1.0);
    double start = now_seconds();
    int64_t arrived = 0, allocated = 0;
    int next = 1;
    for (size_t i = 0; i < len; i++) {
        const gs_request *r = &pods[order[i]];
        gs_placement p;
        double t0 = now_seconds();
        bool ok = gs_engine_decide(engine, &work, r, &p);
        lat[i] = (now_seconds() - t0) * 1e6;
        if (ok && gs_cluster_apply(&work, r, &p) == 0) {
            out->placed++;
            allocated += gs_request_gpu_milli(r);
        } else {
            out->failed++; /* no retry: the FGD protocol drops it */
        }
        arrived += gs_request_gpu_milli(r);
        while (next <= load_pct && arrived * 100 >= capacity * next) {
            out->alloc_pct[next] = 100.0 * (double)allocated / (double)capacity;
            next++;
        }
        if (progress && (i % 1024 == 0 || i + 1 == len))
            progress(progress_ctx, i + 1, len);
    }
    out->seconds = now_seconds() - start;
    out->arrived = len;
    qsort(lat, len, sizeof(*lat), cmp_double);
    out->decision_p50_us = percentile(lat, len, 0.50);
    out->decision_p99_us = percentile(lat, len, 0.99);
    out->decision_max_us = len ? lat[len - 1] : 0.0;
    free(lat);
    free(order);
    gs_engine_free(engine);
    gs_cluster_free(&work);
    return 0;
}
