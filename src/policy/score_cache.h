/* Per-node score cache: a node's best placement for a request only changes
 * when the node does (its version) or the workload model does (epoch). */
#ifndef GPUSLICE_POLICY_SCORE_CACHE_H
#define GPUSLICE_POLICY_SCORE_CACHE_H

#include "policy.h"

typedef struct gs_cache_entry {
    double score;
    uint32_t version;
    uint32_t epoch; /* 0 = empty */
    int8_t feasible;
    int8_t num_gpus;
    int8_t gpus[GS_MAX_GPUS_PER_NODE];
} gs_cache_entry;

typedef struct gs_cache_class {
    gs_request req;
    uint64_t last_use;
    gs_cache_entry *entries; /* one per node */
} gs_cache_class;

typedef struct gs_score_cache {
    const gs_cluster *cluster;
    const gs_node *nodes;
    size_t num_nodes;
    uint32_t epoch;
    uint64_t clock;
    gs_cache_class *classes;
    int num_classes, max_classes;
} gs_score_cache;

void gs_cache_init(gs_score_cache *c);
void gs_cache_free(gs_score_cache *c);
/* Forget every score (the workload model changed). */
void gs_cache_invalidate(gs_score_cache *c);
/* The per-node entries for a request on a cluster, or NULL when out of memory. */
gs_cache_entry *gs_cache_lookup(gs_score_cache *c, const gs_cluster *cl, const gs_request *r);

#endif
