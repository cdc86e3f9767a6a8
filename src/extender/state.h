/* The extender's usage cache: nodes (from their gpuslice.io/gpu-inventory and
 * gpuslice.io/claims annotations) and GPU pods (from their
 * gpuslice.io/assignment, on the GPUs their gpuslice.io/allocated names once
 * the node agent recorded it), as a policy-engine cluster plus the replica IDs in
 * use. Fed by list+watch (sync.c) and by the bind path's own writes; the
 * caller holds st->mu around every call below. */
#ifndef GPUSLICE_EXT_STATE_H
#define GPUSLICE_EXT_STATE_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "assign_sig.h"
#include "kube_client.h"
#include "policy.h"
#include "strmap.h"

#define GS_ANN_INVENTORY "gpuslice.io/gpu-inventory"
#define GS_ANN_CLAIMS "gpuslice.io/claims"
#define EXT_MAX_REPLICAS 256

struct ext_gpu {
    char uuid[96];
    int replicas;
    uint16_t refs[EXT_MAX_REPLICAS]; /* live pods naming replica k (assigned or held) */
};

struct ext_node {
    char *name;
    char rv[32];    /* metadata.resourceVersion last seen */
    char *inv_text; /* inventory annotation as last parsed */
    json_t *claims; /* the node's claims array (owned), or NULL */
    int has_inv;
    int deleted;
    struct ext_gpu gpus[GS_MAX_GPUS_PER_NODE];
};

enum ext_src { EXT_NONE = 0, EXT_ASSIGNED, EXT_CLAIMED, EXT_GONE };

struct ext_use {
    int8_t gi; /* GPU index on the node, -1 when unknown there */
    int16_t k; /* replica index */
    int32_t milli;
    int64_t mem;
    char uuid[96];
};

/* A replica ID a pod keeps from being handed out again: the one its
 * assignment names and, once the node agent recorded it, the one it holds. */
struct ext_rid {
    int8_t gi;
    int16_t k;
    char uuid[96];
};

struct ext_pod {
    char uid[KUBE_POD_UID_MAX];
    char key[254 + 64]; /* namespace/name */
    char node[256];
    int node_idx; /* -1 until the node is known */
    enum ext_src src;
    int counted;
    int nuse;
    struct ext_use use[GS_MAX_GPUS_PER_NODE]; /* shares, on the GPUs really held once
                                               * gpuslice.io/allocated says so */
    int nrid;
    struct ext_rid rid[2 * GS_MAX_GPUS_PER_NODE];
    time_t t;  /* claim time, or when it went away */
    char *ann; /* assignment text it came from (to skip repeats) */
};

struct ext_state {
    pthread_mutex_t mu;
    gs_cluster cl;
    struct ext_node *nodes; /* parallel to cl.nodes */
    struct strmap node_idx; /* name -> index + 1 */
    struct strmap pods;     /* uid -> struct ext_pod* */
    gs_engine *eng[GS_POLICY_COUNT];
    gs_policy_kind policy, gpu_policy; /* defaults */
    int claim_ttl;                     /* seconds a claim counts without its pod */
    uint64_t generation;               /* bumped on every change (tests, metrics) */
    const struct gs_sig_key *sigkey;   /* NULL: assignments are not signed */
};

int ext_state_init(struct ext_state *st, gs_policy_kind policy, gs_policy_kind gpu_policy);
void ext_state_free(struct ext_state *st);
/* Drops everything learned (before a re-list). */
void ext_state_clear(struct ext_state *st);

/* A Node object; type is "ADDED", "MODIFIED" or "DELETED". */
void ext_state_node_event(struct ext_state *st, const char *type, json_t *node, time_t now);
/* A Pod object. */
void ext_state_pod_event(struct ext_state *st, const char *type, json_t *pod, time_t now);
/* Forgets tombstones and expired claims older than the claim TTL. */
void ext_state_gc(struct ext_state *st, time_t now);

/* Index of a node by name, or -1. */
int ext_state_find_node(const struct ext_state *st, const char *name);
/* The node's claims array as it should be written back: claims of pods not
 * not known to be gone, younger than claim_ttl. New reference. */
json_t *ext_state_live_claims(struct ext_state *st, int idx, time_t now);
/* After a full re-list: claims whose pod is not in present (an object
 * keyed by pod uid, from a pod list taken after the node list) belong to
 * deleted pods; remember them as gone. */
void ext_state_forget_missing(struct ext_state *st, json_t *present, time_t now);
/* Lowest free replica index on GPU gi of node idx, or -1. */
int ext_state_free_replica(const struct ext_state *st, int idx, int gi);

/* JSON view: per node, per GPU allocation (used by /state and inspect). */
json_t *ext_state_json(struct ext_state *st);

#endif
