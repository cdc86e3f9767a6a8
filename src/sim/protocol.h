/* The FGD evaluation protocol: inflate the pod list to a target load by
 * sampling with replacement, shuffle with a seed, schedule in order with
 * no departures, and record the allocated GPU share at every 1 % of
 * arrived GPU request. */
#ifndef GPUSLICE_SIM_PROTOCOL_H
#define GPUSLICE_SIM_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#define SIM_MAX_LOAD_PCT 1000

/* Pod order for one seed: all trace pods once, plus pods sampled with
 * replacement until the GPU request reaches load_pct % of capacity,
 * shuffled. Returns a malloc'd index array (count in *len) or NULL. */
size_t *sim_arrivals(const gs_request *pods, size_t num_pods, int64_t capacity_milli, int load_pct,
                     uint64_t seed, size_t *len);

typedef struct sim_result {
    /* alloc_pct[k] = allocated GPU share (% of capacity) when arrived GPU
     * request first reached k % of capacity; NaN if never reached. */
    double alloc_pct[SIM_MAX_LOAD_PCT + 1];
    int load_pct;
    size_t arrived, placed, failed;
    double seconds;
    double decision_p50_us, decision_p99_us, decision_max_us;
} sim_result;

typedef void (*sim_progress_fn)(void *ctx, size_t done, size_t total);

/* Runs one seed of one policy on a fresh copy of the cluster. workload =
 * the trace pods, which the fragmentation policies take as the expected
 * distribution. Returns 0, or -1 on out-of-memory. */
int sim_run(const gs_cluster *cluster, const gs_request *pods, size_t num_pods,
            gs_policy_kind policy, uint64_t seed, int load_pct, sim_progress_fn progress,
            void *progress_ctx, sim_result *out);

#endif
