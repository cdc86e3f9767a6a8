/* Lock-free counters (atomics): the HTTP threads only ever add. */
#include "metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static const double bounds[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1 };
#define NB (sizeof bounds / sizeof bounds[0])
static const char *const names[EXT_V_COUNT] = { "filter", "prioritize", "bind" };

static struct {
    atomic_uint_fast64_t count, errors, bucket[NB], sum_ns;
} g_verb[EXT_V_COUNT];
static atomic_uint_fast64_t g_passed, g_failed, g_conflicts;

void ext_metrics_observe(enum ext_verb v, double seconds, int error)
{
    atomic_fetch_add(&g_verb[v].count, 1);
    if (error)
        atomic_fetch_add(&g_verb[v].errors, 1);
    atomic_fetch_add(&g_verb[v].sum_ns, (uint_fast64_t)(seconds * 1e9));
    for (size_t i = 0; i < NB; i++)
        if (seconds <= bounds[i])
            atomic_fetch_add(&g_verb[v].bucket[i], 1);
}

void ext_metrics_filter_nodes(uint64_t passed, uint64_t failed)
{
    atomic_fetch_add(&g_passed, passed);
    atomic_fetch_add(&g_failed, failed);
}

void ext_metrics_bind_conflict(void)
{
    atomic_fetch_add(&g_conflicts, 1);
}

char *ext_metrics_render(uint64_t nodes, uint64_t generation, int ready)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fprintf(f, "# HELP gpuslice_extender_requests_total Extender calls by verb.\n"
               "# TYPE gpuslice_extender_requests_total counter\n");
    for (int v = 0; v < EXT_V_COUNT; v++)
        fprintf(f, "gpuslice_extender_requests_total{verb=\"%s\"} %llu\n", names[v],
                (unsigned long long)atomic_load(&g_verb[v].count));
    fprintf(f, "# HELP gpuslice_extender_errors_total Calls answered with an error.\n"
               "# TYPE gpuslice_extender_errors_total counter\n");
    for (int v = 0; v < EXT_V_COUNT; v++)
        fprintf(f, "gpuslice_extender_errors_total{verb=\"%s\"} %llu\n", names[v],
                (unsigned long long)atomic_load(&g_verb[v].errors));
    fprintf(f, "# HELP gpuslice_extender_latency_seconds Time to answer a call.\n"
               "# TYPE gpuslice_extender_latency_seconds histogram\n");
    for (int v = 0; v < EXT_V_COUNT; v++) {
        for (size_t i = 0; i < NB; i++)
            fprintf(f, "gpuslice_extender_latency_seconds_bucket{verb=\"%s\",le=\"%g\"} %llu\n", names[v], bounds[i],
                    (unsigned long long)atomic_load(&g_verb[v].bucket[i]));
        unsigned long long c = atomic_load(&g_verb[v].count);
        fprintf(f, "gpuslice_extender_latency_seconds_bucket{verb=\"%s\",le=\"+Inf\"} %llu\n", names[v], c);
        fprintf(f, "gpuslice_extender_latency_seconds_sum{verb=\"%s\"} %.9f\n", names[v],
                (double)atomic_load(&g_verb[v].sum_ns) / 1e9);
        fprintf(f, "gpuslice_extender_latency_seconds_count{verb=\"%s\"} %llu\n", names[v], c);
    }
    fprintf(f,
            "# HELP gpuslice_extender_filter_nodes_total Nodes judged by filter.\n"
            "# TYPE gpuslice_extender_filter_nodes_total counter\n"
            "gpuslice_extender_filter_nodes_total{result=\"passed\"} %llu\n"
            "gpuslice_extender_filter_nodes_total{result=\"failed\"} %llu\n",
            (unsigned long long)atomic_load(&g_passed), (unsigned long long)atomic_load(&g_failed));
    fprintf(f,
            "# HELP gpuslice_extender_bind_conflicts_total Node claims retried after 409.\n"
            "# TYPE gpuslice_extender_bind_conflicts_total counter\n"
            "gpuslice_extender_bind_conflicts_total %llu\n",
            (unsigned long long)atomic_load(&g_conflicts));
    fprintf(f,
            "# HELP gpuslice_extender_nodes Nodes in the usage cache.\n"
            "# TYPE gpuslice_extender_nodes gauge\ngpuslice_extender_nodes %llu\n"
            "# HELP gpuslice_extender_cache_generation Changes applied to the cache.\n"
            "# TYPE gpuslice_extender_cache_generation counter\n"
            "gpuslice_extender_cache_generation %llu\n"
            "# HELP gpuslice_extender_ready 1 once the cache is synced.\n"
            "# TYPE gpuslice_extender_ready gauge\ngpuslice_extender_ready %d\n",
            (unsigned long long)nodes, (unsigned long long)generation, ready);
    fclose(f);
    return buf;
}
