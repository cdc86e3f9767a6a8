/* One simulated run: arrival order, node order, scheduling, milestones,
 * timing. */
#define _GNU_SOURCE
#include "protocol.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rng.h"

/* Separate streams for the node order and the pod order of one seed. */
#define NODE_STREAM 0x6e6f646573ull

static void shuffle(size_t *a, size_t n, sim_rng *rng)
{
    for (size_t i = n; i > 1; i--) { /* Fisher-Yates */
        size_t j = (size_t)sim_rng_below(rng, i);
        size_t tmp = a[i - 1];
        a[i - 1] = a[j];
        a[j] = tmp;
    }
}

/* GPU share per GPU, as the artifact's sampling tests it. */
static int64_t per_gpu_milli(const gs_request *r)
{
    if (r->num_gpus == 0)
        return 0;
    return r->gpu_milli < GS_MILLI_PER_GPU ? r->gpu_milli : GS_MILLI_PER_GPU;
}

size_t *sim_arrivals(const gs_request *pods, size_t num_pods, int64_t capacity_milli, int load_pct, uint64_t seed,
                     size_t *len)
{
    if (num_pods == 0 || load_pct < 1 || load_pct > SIM_MAX_LOAD_PCT)
        return NULL;
    size_t cap = num_pods * 2, count = num_pods;
    size_t *order = malloc(cap * sizeof(*order));
    if (!order)
        return NULL;
    int64_t requested = 0;
    for (size_t i = 0; i < num_pods; i++) {
        order[i] = i;
        requested += gs_request_gpu_milli(&pods[i]);
    }
    sim_rng rng;
    sim_rng_seed(&rng, seed);
    shuffle(order, count, &rng);
    int64_t target = capacity_milli * load_pct; /* x100: compared with requested*100 */
    while (requested * 100 > target && count > 0) {
        size_t drop = (size_t)sim_rng_below(&rng, count);
        requested -= gs_request_gpu_milli(&pods[order[drop]]);
        memmove(&order[drop], &order[drop + 1], (count - drop - 1) * sizeof(*order));
        count--;
    }
    /* Sampling cannot reach the target if no pod asks for a GPU. */
    bool any_gpu = false;
    for (size_t i = 0; i < num_pods && !any_gpu; i++)
        any_gpu = pods[i].num_gpus > 0;
    while (any_gpu) {
        size_t pick = (size_t)sim_rng_below(&rng, num_pods);
        if ((requested + per_gpu_milli(&pods[pick])) * 100 > target)
            break;
        if (count == cap) {
            size_t *grown = realloc(order, cap * 2 * sizeof(*order));
            if (!grown) {
                free(order);
                return NULL;
            }
            order = grown;
            cap *= 2;
        }
        order[count++] = pick;
        requested += gs_request_gpu_milli(&pods[pick]);
    }
    *len = count;
    return order;
}

size_t *sim_node_order(size_t num_nodes, uint64_t seed)
{
    size_t *order = malloc((num_nodes ? num_nodes : 1) * sizeof(*order));
    if (!order)
        return NULL;
    for (size_t i = 0; i < num_nodes; i++)
        order[i] = i;
    sim_rng rng;
    sim_rng_seed(&rng, seed ^ NODE_STREAM);
    shuffle(order, num_nodes, &rng);
    return order;
}

int sim_arrived_bucket(int64_t arrived_milli, int64_t capacity_milli)
{
    return (int)nearbyint(100.0 * (double)arrived_milli / (double)capacity_milli);
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

/* A copy of the cluster with its nodes in this seed's order. */
static int copy_cluster(const gs_cluster *src, uint64_t seed, gs_cluster *dst)
{
    size_t *order = sim_node_order(src->num_nodes, seed);
    *dst = *src;
    dst->nodes = malloc((src->num_nodes ? src->num_nodes : 1) * sizeof(*dst->nodes));
    if (!order || !dst->nodes) {
        free(order);
        free(dst->nodes);
        dst->nodes = NULL;
        return -1;
    }
    for (size_t i = 0; i < src->num_nodes; i++)
        dst->nodes[i] = src->nodes[order[i]];
    dst->cap_nodes = src->num_nodes;
    free(order);
    return 0;
}

void sim_milestones_record(sim_milestones *m, int64_t arrived, int64_t allocated, int64_t capacity)
{
    int k = sim_arrived_bucket(arrived, capacity);
    if (k < 0 || k > SIM_MAX_LOAD_PCT)
        return;
    m->sum[k] += nearbyint(10000.0 * (double)allocated / (double)capacity) / 100.0;
    m->count[k]++;
}

void sim_milestones_finish(const sim_milestones *m, double *alloc_pct)
{
    for (int k = 0; k <= SIM_MAX_LOAD_PCT; k++) {
        double sum = m->sum[k];
        size_t n = m->count[k];
        if (n == 0) { /* no event here: those of k - 1 and k + 1 */
            for (int j = k - 1; j <= k + 1; j += 2) {
                if (j >= 0 && j <= SIM_MAX_LOAD_PCT) {
                    sum += m->sum[j];
                    n += m->count[j];
                }
            }
        }
        alloc_pct[k] = n ? sum / (double)n : NAN;
    }
}

int sim_run(const gs_cluster *cluster, const gs_request *pods, size_t num_pods, gs_policy_kind policy, uint64_t seed,
            int load_pct, sim_progress_fn progress, void *progress_ctx, sim_result *out)
{
    memset(out, 0, sizeof(*out));
    out->load_pct = load_pct;
    int64_t capacity = gs_cluster_gpu_capacity(cluster);
    if (capacity <= 0)
        return -1;
    size_t len = 0;
    size_t *order = sim_arrivals(pods, num_pods, capacity, load_pct, seed, &len);
    gs_engine *engine = gs_engine_new(policy);
    gs_cluster work;
    memset(&work, 0, sizeof(work));
    double *lat = malloc((len ? len : 1) * sizeof(*lat));
    sim_milestones *ms = calloc(1, sizeof(*ms));
    if (!order || !engine || !lat || !ms || copy_cluster(cluster, seed, &work) != 0) {
        free(order);
        gs_engine_free(engine);
        free(lat);
        free(ms);
        return -1;
    }
    for (size_t i = 0; i < num_pods; i++)
        gs_engine_add_workload(engine, &pods[i], 1.0);
    double start = now_seconds();
    int64_t arrived = 0, allocated = 0;
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
        sim_milestones_record(ms, arrived, allocated, capacity);
        if (progress && (i % 1024 == 0 || i + 1 == len))
            progress(progress_ctx, i + 1, len);
    }
    sim_milestones_finish(ms, out->alloc_pct);
    out->seconds = now_seconds() - start;
    out->arrived = len;
    qsort(lat, len, sizeof(*lat), cmp_double);
    out->decision_p50_us = percentile(lat, len, 0.50);
    out->decision_p99_us = percentile(lat, len, 0.99);
    out->decision_max_us = len ? lat[len - 1] : 0.0;
    free(lat);
    free(ms);
    free(order);
    gs_engine_free(engine);
    gs_cluster_free(&work);
    return 0;
}
