/* Decision-latency benchmark: a 10 000-node cluster, either uniform (8
 * GPUs, 96 cores, 384 GiB per node) or a node list such as openb's tiled to
 * that size (its mix of 1, 2, 4 and 8 GPUs of 7 models), pre-filled at
 * random to a target GPU utilisation with an openb-like pod mix, then timed
 * over a stream of decisions. Prints measured percentiles; asserts nothing.
 *
 * usage: gpuslice-bench-decision [POLICY] [NODES] [FILL_PCT] [DECISIONS] [NODE_LIST.csv] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy.h"
#include "rng.h"
#include "trace_csv.h"

/* openb-like mix: (weight, num_gpus, gpu_milli, cpu_milli, mem_mib). */
static const struct {
    int weight, num_gpus, gpu_milli, cpu, mem;
} mix[] = {
    { 130, 0, 0, 12000, 30000 },   { 350, 1, 1000, 12000, 24576 }, { 130, 1, 810, 8000, 16384 },
    { 90, 1, 470, 6000, 12288 },   { 40, 1, 320, 4000, 8192 },     { 30, 1, 650, 8000, 16384 },
    { 15, 1, 230, 3000, 8192 },    { 10, 1, 160, 2000, 4096 },     { 6, 2, 1000, 24000, 65536 },
    { 6, 4, 1000, 48000, 131072 }, { 5, 8, 1000, 88000, 262144 },
};

static gs_request draw(sim_rng *rng)
{
    int total = 0;
    for (size_t i = 0; i < sizeof(mix) / sizeof(mix[0]); i++)
        total += mix[i].weight;
    int pick = (int)sim_rng_below(rng, (uint64_t)total);
    size_t i = 0;
    while (pick >= mix[i].weight)
        pick -= mix[i++].weight;
    gs_request r;
    memset(&r, 0, sizeof(r));
    r.num_gpus = mix[i].num_gpus;
    r.gpu_milli = mix[i].gpu_milli;
    r.cpu_milli = mix[i].cpu;
    r.mem_mib = mix[i].mem;
    r.any_model = true;
    return r;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Random pre-fill: put a pod on a random node's first fitting GPUs. */
static void prefill(gs_cluster *c, sim_rng *rng, double fill)
{
    int64_t cap = gs_cluster_gpu_capacity(c), used = 0;
    int misses = 0;
    while ((double)used < fill * (double)cap && misses < 100000) {
        gs_request r = draw(rng);
        gs_node *n = &c->nodes[sim_rng_below(rng, c->num_nodes)];
        gs_placement p = { .node = (int32_t)(n - c->nodes), .num_gpus = 0 };
        for (int g = 0; g < n->num_gpus && p.num_gpus < r.num_gpus; g++)
            if (gs_gpu_fit(&n->gpus[g], &r) == GS_FIT)
                p.gpus[p.num_gpus++] = (int8_t)g;
        if (p.num_gpus == r.num_gpus && gs_cluster_apply(c, &r, &p) == 0) {
            used += gs_request_gpu_milli(&r);
            misses = 0;
        } else {
            misses++;
        }
    }
}

int main(int argc, char **argv)
{
    gs_policy_kind kind = GS_POLICY_FRAGLOOK;
    if (argc > 1 && gs_policy_parse(argv[1], &kind) != 0) {
        fprintf(stderr, "bench: unknown policy '%s'\n", argv[1]);
        return 2;
    }
    int nodes = argc > 2 ? atoi(argv[2]) : 10000;
    int fill_pct = argc > 3 ? atoi(argv[3]) : 70;
    int decisions = argc > 4 ? atoi(argv[4]) : 2000;
    if (nodes <= 0 || fill_pct < 0 || fill_pct > 100 || decisions <= 0) {
        fprintf(stderr, "usage: %s [POLICY] [NODES] [FILL_PCT] [DECISIONS] [NODE_LIST.csv]\n", argv[0]);
        return 2;
    }
    gs_cluster c;
    gs_cluster_init(&c);
    if (argc > 5) { /* a node list, repeated until there are enough nodes */
        char err[1400];
        if (trace_load_nodes(argv[5], &c, err, sizeof(err)) != 0) {
            fprintf(stderr, "bench: %s\n", err);
            return 1;
        }
        size_t base = c.num_nodes;
        while (c.num_nodes > (size_t)nodes)
            c.num_nodes--;
        for (size_t i = 0; c.num_nodes < (size_t)nodes; i++) {
            gs_node n = c.nodes[i % base];
            if (gs_cluster_add_node(&c, n.name, n.cpu_total_milli, n.mem_total_mib, n.model, n.num_gpus,
                                    GS_MILLI_PER_GPU) < 0)
                return 1;
        }
    } else {
        int model = gs_cluster_model(&c, "G2");
        for (int i = 0; i < nodes; i++)
            if (gs_cluster_add_node(&c, NULL, 96000, 393216, model, 8, GS_MILLI_PER_GPU) < 0)
                return 1;
    }
    sim_rng rng;
    sim_rng_seed(&rng, 42);
    prefill(&c, &rng, fill_pct / 100.0);
    gs_engine *e = gs_engine_new(kind);
    sim_rng wl;
    sim_rng_seed(&wl, 7);
    for (int i = 0; i < 10000; i++) {
        gs_request r = draw(&wl);
        gs_engine_add_workload(e, &r, 1.0);
    }
    double *lat = malloc((size_t)decisions * sizeof(*lat));
    if (!e || !lat)
        return 1;
    int placed = 0;
    for (int i = 0; i < decisions; i++) {
        gs_request r = draw(&rng);
        gs_placement p;
        double t0 = now();
        bool ok = gs_engine_decide(e, &c, &r, &p);
        lat[i] = (now() - t0) * 1e3;
        if (ok && gs_cluster_apply(&c, &r, &p) == 0)
            placed++;
    }
    qsort(lat, (size_t)decisions, sizeof(*lat), cmp);
    double sum = 0.0;
    for (int i = 0; i < decisions; i++)
        sum += lat[i];
    printf("policy %s: %d nodes, %lld GPUs, prefilled to %.1f %% GPU, %d decisions (%d placed)\n", gs_policy_name(kind),
           nodes, (long long)gs_cluster_gpu_capacity(&c) / 1000,
           100.0 * (double)gs_cluster_gpu_allocated(&c) / (double)gs_cluster_gpu_capacity(&c), decisions, placed);
    printf("decision latency ms: mean %.3f p50 %.3f p99 %.3f max %.3f\n", sum / decisions, lat[decisions / 2],
           lat[(int)(0.99 * (decisions - 1))], lat[decisions - 1]);
    free(lat);
    gs_engine_free(e);
    gs_cluster_free(&c);
    return 0;
}
