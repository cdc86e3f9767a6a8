/* gpuslice scheduling policy engine.
 *
 * One library serves the Kubernetes extender and `gpuslice sim`: a model of
 * nodes and pod requests, feasibility with a reason for every rejection,
 * scoring at node and GPU level, and the placement decision. It does no I/O
 * and owns no global state; every function works on the structures below.
 *
 * Units: CPU in milli-cores, host memory and GPU memory in MiB, GPU compute
 * in milli-GPU (1000 = one whole GPU; "compute percent" p is p * 10).
 */
#ifndef GPUSLICE_POLICY_H
#define GPUSLICE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_MAX_GPUS_PER_NODE 16
#define GS_MAX_MODELS 32
#define GS_MODEL_NAME_MAX 32
#define GS_MILLI_PER_GPU 1000

/* A GPU in the scheduler's model: capacity and what the placed pods
 * use of it (the node agent's physical GPU is struct gs_nvml_gpu). */
typedef struct gs_sched_gpu {
    int32_t milli_total; /* compute capacity, normally 1000 */
    int32_t milli_used;
    int64_t mem_total_mib; /* 0 = not tracked (requests for memory then fail) */
    int64_t mem_used_mib;
    int32_t slots_total; /* replicas allowed on this GPU; 0 = unlimited */
    int32_t slots_used;
    int32_t numa; /* NUMA node the GPU is attached to */
    bool healthy;
} gs_sched_gpu;

typedef struct gs_node {
    const char *name; /* borrowed, never freed by the engine */
    int64_t cpu_total_milli;
    int64_t cpu_used_milli;
    int64_t mem_total_mib;
    int64_t mem_used_mib;
    int32_t model; /* index into gs_cluster.model_names; -1 = no GPUs */
    int32_t num_gpus;
    bool healthy;
    uint32_t version; /* bumped on every change; callers that edit a node
                            * directly (health, capacity) must bump it too,
                            * since the engine caches scores per version */
    gs_sched_gpu gpus[GS_MAX_GPUS_PER_NODE];
} gs_node;

typedef struct gs_cluster {
    gs_node *nodes;
    size_t num_nodes;
    size_t cap_nodes;
    int num_models;
    char model_names[GS_MAX_MODELS][GS_MODEL_NAME_MAX];
} gs_cluster;

typedef enum gs_numa_policy {
    GS_NUMA_NONE = 0,   /* GPUs may come from any NUMA node */
    GS_NUMA_SINGLE = 1, /* all GPUs of the pod on one NUMA node */
} gs_numa_policy;

typedef struct gs_request {
    int64_t cpu_milli;
    int64_t mem_mib;
    int32_t num_gpus;    /* 0 = CPU-only pod */
    int32_t gpu_milli;   /* per GPU; >= the GPU's total means an exclusive whole GPU */
    int64_t gpu_mem_mib; /* per GPU; 0 = no GPU memory requested */
    bool any_model;      /* true: model_mask is ignored */
    uint32_t model_mask; /* bit i allows model i (when !any_model) */
    gs_numa_policy numa;
} gs_request;

typedef struct gs_placement {
    int32_t node;
    int32_t num_gpus;
    int8_t gpus[GS_MAX_GPUS_PER_NODE];
} gs_placement;

/* ---- cluster model ------------------------------------------------------ */

void gs_cluster_init(gs_cluster *c);
void gs_cluster_free(gs_cluster *c);
/* Returns the model index, adding the name if new; -1 if the table is full
 * or the name is empty/too long. */
int gs_cluster_model(gs_cluster *c, const char *name);
/* Index of a known model name, or -1. */
int gs_cluster_find_model(const gs_cluster *c, const char *name);
/* Appends a node with num_gpus identical idle healthy GPUs of milli_total
 * each (NUMA 0, no memory, unlimited slots); returns its index or -1 on
 * bad arguments or out of memory. Callers may then edit gpus[] directly. */
int gs_cluster_add_node(gs_cluster *c, const char *name, int64_t cpu_milli, int64_t mem_mib, int model, int num_gpus,
                        int32_t milli_total);
/* Commits a placement; returns 0, or -1 if it does not fit (nothing changes). */
int gs_cluster_apply(gs_cluster *c, const gs_request *r, const gs_placement *p);
/* Undoes an earlier gs_cluster_apply of the same request and placement. */
int gs_cluster_release(gs_cluster *c, const gs_request *r, const gs_placement *p);
/* Whole-cluster GPU totals in milli-GPU (healthy and unhealthy GPUs). */
int64_t gs_cluster_gpu_capacity(const gs_cluster *c);
int64_t gs_cluster_gpu_allocated(const gs_cluster *c);
/* Milli-GPU a request takes in total: num_gpus * min(gpu_milli, 1000). */
int64_t gs_request_gpu_milli(const gs_request *r);

/* ---- feasibility -------------------------------------------------------- */

typedef enum gs_reject {
    GS_FIT = 0,
    GS_REJ_NODE_UNHEALTHY,
    GS_REJ_CPU,
    GS_REJ_MEMORY,
    GS_REJ_GPU_MODEL, /* node's GPU model not allowed by the request */
    GS_REJ_GPU_COUNT, /* node has fewer GPUs than requested */
    GS_REJ_GPUS_BUSY, /* not enough GPUs fit; see per-GPU reasons */
    GS_REJ_NUMA,      /* enough GPUs fit, but not on one NUMA node */
    GS_REJ_GPU_UNHEALTHY,
    GS_REJ_GPU_COMPUTE, /* not enough free compute (or not idle for a whole GPU) */
    GS_REJ_GPU_MEMORY,
    GS_REJ_GPU_SLOTS,
    GS_REJ_BAD_REQUEST, /* request itself is malformed */
} gs_reject;

const char *gs_reject_str(gs_reject r);
/* Whether a request is well formed (non-negative, gpu counts in range). */
bool gs_request_valid(const gs_request *r);
gs_reject gs_gpu_fit(const gs_sched_gpu *g, const gs_request *r);
gs_reject gs_node_fit(const gs_node *n, const gs_request *r);

typedef struct gs_filter_report {
    gs_reject node;                      /* GS_FIT when the node is feasible */
    gs_reject gpu[GS_MAX_GPUS_PER_NODE]; /* per GPU, for GPU requests */
} gs_filter_report;

/* Fills a full explanation for one node; returns report->node. */
gs_reject gs_filter_explain(const gs_node *n, const gs_request *r, gs_filter_report *report);

/* ---- policies and decisions --------------------------------------------- */

typedef enum gs_policy_kind {
    GS_POLICY_BINPACK = 0, /* FGD artifact's GpuPacking: shared GPUs, then used nodes */
    GS_POLICY_SPREAD,      /* emptiest node and GPU first */
    GS_POLICY_BESTFIT,     /* FGD artifact's BestFit: least CPU+GPU left after placement */
    GS_POLICY_FGD,         /* FGD artifact's scorer: least growth of fragmentation */
    GS_POLICY_FRAGLOOK,    /* ours: fragmentation with stranding, scarcity and lookahead */
    GS_POLICY_COUNT
} gs_policy_kind;

const char *gs_policy_name(gs_policy_kind k);
/* Returns 0 and sets *out, or -1 for an unknown name. */
int gs_policy_parse(const char *name, gs_policy_kind *out);

typedef struct gs_engine gs_engine;

gs_engine *gs_engine_new(gs_policy_kind kind);
void gs_engine_free(gs_engine *e);
/* Adds weight to the expected-workload distribution the fragmentation
 * policies measure against (identical requests are merged). Returns 0 or -1. */
int gs_engine_add_workload(gs_engine *e, const gs_request *r, double weight);

/* Drops cached per-node scores. The engine caches by cluster address and
 * node version; call this before reusing an engine on a different cluster
 * that may sit at a freed one's address. */
void gs_engine_reset_cache(gs_engine *e);
/* Scores one node: best placement of r on node idx under the engine's
 * policy. Returns false when the node is infeasible. Higher is better. */
bool gs_engine_score_node(gs_engine *e, const gs_cluster *c, size_t idx, const gs_request *r, double *score,
                          gs_placement *choice);
/* Chooses the best feasible node (ties: lowest index). false = fits nowhere. */
bool gs_engine_decide(gs_engine *e, const gs_cluster *c, const gs_request *r, gs_placement *out);

#endif
