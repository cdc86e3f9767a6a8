/* Where the unused GPU compute goes: replays one seed of one pod list under
 * one policy and prints the final GPU contents grouped by the set of pod
 * sizes on each GPU, with the compute each group leaves unused. A research
 * aid for docs/scheduling.md, not part of the product.
 *
 * usage: gpuslice-sim-waste NODES.csv PODS.csv[+cpuX] POLICY SEED [LOAD]
 * POLICY "order" prints the arrival sequence instead (num_gpus gpu_milli
 * cpu_milli mem_mib per line), the input of bench/sim/oracle_bound.py. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_mix.h"
#include "protocol.h"
#include "trace_csv.h"

#define MAX_ON_GPU 8

typedef struct gpu_content {
    int count;
    int32_t milli[MAX_ON_GPU];
} gpu_content;

typedef struct combo {
    char key[64];
    int gpus;
    long waste;
} combo;

static int cmp_int_desc(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x < y) - (x > y);
}

static int cmp_combo(const void *a, const void *b)
{
    const combo *x = a, *y = b;
    return (x->waste < y->waste) - (x->waste > y->waste);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s NODES PODS POLICY SEED [LOAD]\n", argv[0]);
        return 2;
    }
    char err[512];
    gs_cluster c;
    gs_cluster_init(&c);
    trace_pods pods;
    gs_policy_kind kind;
    char path[1024];
    double mix;
    if (sim_cpu_mix_spec(argv[2], path, sizeof(path), &mix) != 0) {
        fprintf(stderr, "bad pod list '%s' (PATH or PATH+cpuX)\n", argv[2]);
        return 2;
    }
    if (trace_load_nodes(argv[1], &c, err, sizeof(err)) || trace_load_pods(path, &c, &pods, err, sizeof(err)) ||
        (mix > 0.0 && sim_cpu_mix(&pods, mix, err, sizeof(err)))) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    bool dump_order = strcmp(argv[3], "order") == 0;
    if (!dump_order && gs_policy_parse(argv[3], &kind) != 0)
        return 2;
    uint64_t seed = strtoull(argv[4], NULL, 10);
    int load = argc > 5 ? atoi(argv[5]) : 130;
    int64_t cap = gs_cluster_gpu_capacity(&c);
    size_t len;
    size_t *order = sim_arrivals(pods.pods, pods.count, cap, load, seed, &len);
    if (dump_order) {
        for (size_t i = 0; i < len; i++) {
            const gs_request *r = &pods.pods[order[i]];
            printf("%d %d %lld %lld\n", r->num_gpus, r->gpu_milli, (long long)r->cpu_milli, (long long)r->mem_mib);
        }
        return 0;
    }
    gs_engine *e = gs_engine_new(kind);
    for (size_t i = 0; i < pods.count; i++)
        gs_engine_add_workload(e, &pods.pods[i], 1.0);
    size_t ngpu = c.num_nodes * GS_MAX_GPUS_PER_NODE;
    gpu_content *content = calloc(ngpu, sizeof(*content));
    long failed_by_size[1001] = { 0 }, failed_multi = 0;
    int64_t arrived = 0, alloc = 0;
    double first_fail = -1;
    for (size_t i = 0; i < len; i++) {
        const gs_request *r = &pods.pods[order[i]];
        gs_placement p;
        arrived += gs_request_gpu_milli(r);
        if (gs_engine_decide(e, &c, r, &p) && gs_cluster_apply(&c, r, &p) == 0) {
            alloc += gs_request_gpu_milli(r);
            for (int g = 0; g < p.num_gpus; g++) {
                gpu_content *gc = &content[(size_t)p.node * GS_MAX_GPUS_PER_NODE + (size_t)p.gpus[g]];
                if (gc->count < MAX_ON_GPU)
                    gc->milli[gc->count++] = r->num_gpus > 1 ? 1000 : r->gpu_milli;
            }
        } else if (r->num_gpus > 0) {
            if (first_fail < 0)
                first_fail = 100.0 * (double)arrived / (double)cap;
            if (r->num_gpus > 1)
                failed_multi++;
            else
                failed_by_size[r->gpu_milli > 1000 ? 1000 : r->gpu_milli]++;
        }
    }
    printf("alloc %.3f %%, first GPU-pod failure at %.2f %% arrived\n", 100.0 * (double)alloc / (double)cap,
           first_fail);
    combo *combos = calloc(4096, sizeof(*combos));
    int ncombo = 0;
    long idle = 0, idle_cpu_short = 0;
    for (size_t n = 0; n < c.num_nodes; n++) {
        const gs_node *node = &c.nodes[n];
        for (int g = 0; g < node->num_gpus; g++) {
            gpu_content *gc = &content[n * GS_MAX_GPUS_PER_NODE + (size_t)g];
            if (gc->count == 0) {
                idle++;
                idle_cpu_short += node->cpu_total_milli - node->cpu_used_milli < 4000;
            }
            qsort(gc->milli, (size_t)gc->count, sizeof(int32_t), cmp_int_desc);
            char key[64] = "idle";
            int at = 0;
            long used = 0;
            for (int k = 0; k < gc->count; k++) {
                at += snprintf(key + at, sizeof(key) - (size_t)at, "%s%d", k ? "+" : "", gc->milli[k]);
                used += gc->milli[k];
            }
            int j = 0;
            while (j < ncombo && strcmp(combos[j].key, key) != 0)
                j++;
            if (j == ncombo && ncombo < 4096)
                snprintf(combos[ncombo++].key, sizeof(key), "%s", key);
            if (j < ncombo) {
                combos[j].gpus++;
                combos[j].waste += 1000 - used;
            }
        }
    }
    qsort(combos, (size_t)ncombo, sizeof(*combos), cmp_combo);
    printf("idle GPUs %ld (on nodes with < 4 cores free: %ld)\n", idle, idle_cpu_short);
    long total = 0;
    for (int j = 0; j < ncombo; j++)
        total += combos[j].waste;
    printf("unused %ld milli\n%-28s %6s %8s\n", total, "GPU content", "GPUs", "unused");
    for (int j = 0; j < ncombo && j < 40; j++)
        if (combos[j].waste > 0)
            printf("%-28s %6d %8ld\n", combos[j].key, combos[j].gpus, combos[j].waste);
    printf("failed GPU pods by size:");
    for (int s = 0; s <= 1000; s++)
        if (failed_by_size[s])
            printf(" %d:%ld", s, failed_by_size[s]);
    printf(" multi:%ld\n", failed_multi);
    free(combos);
    free(content);
    free(order);
    gs_engine_free(e);
    trace_pods_free(&pods);
    gs_cluster_free(&c);
    return 0;
}
