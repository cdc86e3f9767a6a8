/* The FGD artifact's evaluation protocol: shuffle the pod list with a
 * seed, then append pods sampled with replacement until the GPU request
 * reaches the target load (or drop random pods down to it), order the
 * nodes at random (the artifact's node-name prefixes, which decide its
 * ties), schedule in order with no departures, and read the allocated GPU
 * share at each whole percent of arrived GPU request. */
#ifndef GPUSLICE_SIM_PROTOCOL_H
#define GPUSLICE_SIM_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#define SIM_MAX_LOAD_PCT 1000

/* Pod order for one seed: the trace pods shuffled, then pods sampled with
 * replacement appended while the GPU request stays within load_pct % of
 * capacity (the first sample that would pass it ends the sampling, as in
 * the artifact, which tests only the per-GPU share of a multi-GPU pod); a
 * trace that asks for more loses random pods until it fits. Returns a
 * malloc'd index array (count in *len) or NULL. */
size_t *sim_arrivals(const gs_request *pods, size_t num_pods, int64_t capacity_milli, int load_pct, uint64_t seed,
                     size_t *len);

/* Node order for one seed: a random permutation (malloc'd, num_nodes long).
 * The engine gives ties to the first node in it. */
size_t *sim_node_order(size_t num_nodes, uint64_t seed);

/* The percent of arrived GPU request an event counts towards: rounded to
 * the nearest whole percent, halves to even (as the artifact's analysis). */
int sim_arrived_bucket(int64_t arrived_milli, int64_t capacity_milli);

/* Per-percent sums of the allocated share over the events of a run. */
typedef struct sim_milestones {
    double sum[SIM_MAX_LOAD_PCT + 1];
    size_t count[SIM_MAX_LOAD_PCT + 1];
} sim_milestones;

/* Counts one event: the allocated share (rounded to 0.01 %) towards the
 * percent its arrived request rounds to. */
void sim_milestones_record(sim_milestones *m, int64_t arrived, int64_t allocated, int64_t capacity);
/* The means per percent (see sim_result.alloc_pct), SIM_MAX_LOAD_PCT + 1 of them. */
void sim_milestones_finish(const sim_milestones *m, double *alloc_pct);

typedef struct sim_result {
    /* alloc_pct[k]: mean allocated GPU share (% of capacity, each event's
     * value rounded to 0.01) over the events whose arrived GPU request
     * rounds to k % of capacity; when none does, over those within k +- 1;
     * NaN if none of those either. An event is one pod's arrival, GPU or
     * CPU-only, placed or not. */
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
int sim_run(const gs_cluster *cluster, const gs_request *pods, size_t num_pods, gs_policy_kind policy, uint64_t seed,
            int load_pct, sim_progress_fn progress, void *progress_ctx, sim_result *out);

#endif
