/* Private interfaces shared by the engine's source files. */
#ifndef GPUSLICE_POLICY_INTERNAL_H
#define GPUSLICE_POLICY_INTERNAL_H

#include "policy.h"

#define GS_MAX_CANDIDATES 40

/* One way to put a request on a node: which GPUs it takes. */
typedef struct gs_candidate {
    int num_gpus;
    int8_t gpus[GS_MAX_GPUS_PER_NODE];
} gs_candidate;

/* Distinct GPU choices for a feasible node (GPUs with equal free compute
 * and NUMA node are interchangeable, so only one of each is offered). */
int gs_candidates(const gs_node *n, const gs_request *r, const gs_reject *gpu_fit, gs_candidate *out, int max);

/* Node state after a hypothetical placement, as the scorers see it. */
typedef struct gs_view {
    int64_t cpu_free, cpu_total;
    int64_t mem_free, mem_total;
    int32_t model;
    int32_t num_gpus;
    int32_t gpu_free[GS_MAX_GPUS_PER_NODE]; /* usable compute left; 0 if unusable */
    bool gpu_idle[GS_MAX_GPUS_PER_NODE];    /* can still take an exclusive pod */
} gs_view;

void gs_view_of(const gs_node *n, gs_view *v);
void gs_view_place(gs_view *v, const gs_node *n, const gs_request *r, const gs_candidate *cand);

/* Scorers of the policies that need no workload model; higher is better.
 * bestfit and binpack are the FGD artifact's BestFit and GpuPacking: an
 * integer node score that does not depend on the GPU choice, which is the
 * tightest GPU(s) that fit (the engine offers them the first candidate). */
double gs_score_spread(const gs_node *n, const gs_request *r, const gs_candidate *cand);
double gs_score_bestfit(const gs_node *n, const gs_request *r);
double gs_score_binpack(const gs_node *n, const gs_request *r, const gs_candidate *tightest);

/* ---- memo of a value per node state ------------------------------------- */

typedef struct gs_memo_slot {
    uint64_t hash;
    gs_view key;
    double value;
    bool used;
} gs_memo_slot;

typedef struct gs_memo {
    gs_memo_slot *slots;
    size_t cap, used;
} gs_memo;

typedef double (*gs_memo_fn)(const void *ctx, const gs_view *v);

void gs_memo_clear(gs_memo *m);
void gs_memo_free(gs_memo *m);
/* The value of compute(ctx, v), from the memo when this state was seen. */
double gs_memo_get(gs_memo *m, const gs_view *v, gs_memo_fn compute, const void *ctx);

/* ---- the FGD artifact's typical pods ------------------------------------ */

typedef struct gs_typical {
    int64_t cpu_milli;
    int32_t num_gpus, gpu_milli; /* 0, 0 for a CPU-only pod */
    bool any_model;
    uint32_t model_mask;
    double count; /* weight in the workload */
    double share; /* of the chosen shapes, summing to 1 */
} gs_typical;

typedef struct gs_typical_set {
    gs_typical *items; /* after gs_typical_build: most popular first */
    int count, cap;
    int chosen; /* items[0..chosen) are typical; 0 = not built yet */
} gs_typical_set;

void gs_typical_init(gs_typical_set *t);
void gs_typical_free(gs_typical_set *t);
int gs_typical_add(gs_typical_set *t, const gs_request *r, double weight);
/* Chooses the typical shapes (idempotent until the next add); returns how many. */
int gs_typical_build(gs_typical_set *t);

/* ---- expected-workload fragmentation ------------------------------------ */

typedef struct gs_frag_sub {
    int64_t cpu_milli, mem_mib;
    double weight;
} gs_frag_sub;

/* Requests sharing a GPU shape (count, milli, model constraint). */
typedef struct gs_frag_group {
    int32_t num_gpus, gpu_milli;
    bool any_model;
    uint32_t model_mask;
    double weight; /* sum of the subs */
    gs_frag_sub *subs;
    int num_subs, cap_subs;
} gs_frag_group;

typedef struct gs_frag_model {
    gs_frag_group *groups;
    int num_groups, cap_groups;
    double total_weight; /* of GPU requests; CPU-only ones are kept apart */
    double cpu_only_weight;
    double whole_weight;  /* of requests for whole GPUs (one or more) */
    double sum_gpu_milli; /* weighted sums over GPU requests */
    double gpu_pod_cpu_milli, gpu_pod_mem_mib;
    double sum_cpu_milli, sum_mem_mib; /* over all requests */
    /* weight of GPU requests restricted to a model list that includes model i */
    double constrained[GS_MAX_MODELS];
    gs_memo memo;
    bool terminal_ready;
    double terminal[GS_MILLI_PER_GPU + 1]; /* see gs_frag_terminal */
} gs_frag_model;

void gs_frag_init(gs_frag_model *m);
void gs_frag_free(gs_frag_model *m);
int gs_frag_add(gs_frag_model *m, const gs_request *r, double weight);
/* Expected fragmented milli-GPU of a node state against the workload. */
double gs_frag_of(gs_frag_model *m, const gs_view *v);
/* Whether a noticeable share (>= 1 %) of GPU requests is restricted to a
 * model list that includes this model, i.e. the model is a scarce resource. */
bool gs_frag_model_wanted(const gs_frag_model *m, int model);
/* Share of GPU requests (by weight) that take whole GPUs; 0 if none. */
double gs_frag_whole_share(const gs_frag_model *m);
/* Expected compute a GPU with free_milli left will still have free once
 * future pods from the workload have filled it as far as they fit. */
double gs_frag_terminal(gs_frag_model *m, int32_t free_milli);

#include "score_cache.h"

struct gs_engine {
    gs_policy_kind kind;
    gs_frag_model frag;     /* fraglook's workload model */
    gs_typical_set typical; /* fgd's workload model */
    gs_memo fgd_memo;       /* fgd's fragmentation per node state */
    gs_score_cache cache;
    /* Cluster totals seen by the last decision (0 until one): fraglook
     * compares them with the workload's CPU demand. */
    const gs_cluster *totals_of;
    size_t totals_nodes;
    double cluster_cpu_milli, cluster_gpu_milli;
};

/* The FGD artifact's fragmentation of a node state against the typical pods. */
double gs_fgd_frag(gs_engine *e, const gs_view *v);
/* Fragmentation-policy scorers; higher is better. fgd's is the artifact's
 * integer score, int(100 * sigmoid(fragmentation decrease / 1000)). */
double gs_score_fgd(gs_engine *e, const gs_node *n, const gs_request *r, const gs_candidate *cand);
double gs_score_fraglook(gs_engine *e, const gs_node *n, const gs_request *r, const gs_candidate *cand);

#endif
