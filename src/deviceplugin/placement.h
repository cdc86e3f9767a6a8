/*
 * The node agent's decisions, as pure functions of their inputs (no I/O, no
 * locks, no API calls): which pods an ID set matches, which replicas to
 * prefer, whether a pod fits on the GPUs it really holds, and the limits
 * file of a container. The gRPC handlers (plugin.c) gather the inputs — a
 * snapshot of the node (gs_node_view) and a copy of the pod cache — and act
 * on the answers. See docs/device-plugin.md.
 */
#ifndef GPUSLICE_DP_PLACEMENT_H
#define GPUSLICE_DP_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "annotation.h"
#include "podcache.h"
#include "roster.h"

/* gRPC status codes the handlers answer with. */
#define GS_ST_INVALID 3
#define GS_ST_FAILED_PRECONDITION 9
#define GS_ST_UNIMPLEMENTED 12
#define GS_ST_INTERNAL 13

/* What the decisions need to know about this node. */
struct gs_view_gpu {
    char uuid[GS_UUID_MAX];
    unsigned index; /* NVML index */
    int64_t mem_total_mib;
    int healthy; /* as the health thread last saw it */
};
struct gs_node_view {
    const char *node;
    const char *power_exp;      /* GPUSLICE_POWER_EXPONENT to pin in limits.conf; NULL: the default */
    const char *share_yield_us; /* GPUSLICE_SHARE_YIELD_US to pin there; NULL: the default */
    int replicas;               /* per GPU */
    int ngpus;
    struct gs_view_gpu gpus[GS_ASSIGN_MAX_GPUS];
};

/* The container kubelet says holds a device set (pod-resources API). */
struct gs_holder {
    char ns[64], pod[254], container[254];
};

/* Whether id is one of set[0..n). */
int gs_ids_contain(const char *id, char *const *set, size_t n);
/* Whether assignment a names exactly the IDs in set. */
int gs_assignment_same_ids(const struct gs_assignment *a, char *const *set, size_t n);
/* Whether assignment a is on exactly the GPUs of the IDs in set (one ID per
 * GPU). */
int gs_assignment_same_gpus(const struct gs_assignment *a, char *const *set, size_t n);

/* "id1,id2,..." for messages. */
void gs_ids_text(char *const *ids, size_t n, char *out, size_t len);
/* The sorted IDs, one per line (the allocation's ids file). */
void gs_ids_lines(char *const *ids, size_t n, char *out, size_t len);
/* The state key of a device-ID set: "a-" + FNV-1a 64 of the sorted IDs. */
void gs_alloc_key(char *const *ids, size_t n, char *out, size_t outlen);

/* Checks a device-ID set: 1..16 IDs "<uuid>::<k>", k < replicas, each on a
 * GPU of this node, at most one per GPU. Fills gpu[i] (view index of
 * ids[i]) and order (positions of ids sorted by NVML index). Returns 0 or a
 * GS_ST_* code with msg. */
int gs_ids_check(const struct gs_node_view *v, const char *what, char *const *ids, size_t n, int *gpu, int *order,
                 char *msg, size_t msglen);

/* The live pods of pods[] whose assignment is on exactly the GPUs of ids. */
struct gs_match {
    int ngpu_matches; /* live pods whose assignment is on exactly these GPUs */
    int nmatches;     /* ... and names exactly these IDs */
    char names[512];  /* the exact matches, for messages */
    char bad[700];    /* a malformed assignment on this node, for messages */
    int bad_mentions; /* ... whose text names one of the requested IDs */
};
void gs_match_pods(const struct gs_node_view *v, const struct gs_pod *pods, int npods, char *const *ids, size_t n,
                   struct gs_match *m);

/* Candidates for a preferred allocation: live pods not yet recorded as
 * allocated, with a well-formed assignment for this node, in the order they
 * became bound here. as[i] is pods[i]'s assignment (valid for candidates);
 * cand[0..*ncand) their indices. */
void gs_prefer_candidates(const struct gs_node_view *v, const struct gs_pod *pods, int npods, struct gs_assignment *as,
                          int *cand, int *ncand);
/* One container's preferred IDs (pointers into avail/must) among the
 * candidates: the replica set of the first-bound pod whose exact replicas
 * are available, else replicas of the GPUs of the first-bound pod whose GPUs
 * all have one free. Returns the count chosen, 0 when no pod fits. */
int gs_prefer(const struct gs_pod *pods, int npods, const struct gs_assignment *as, const int *cand, int ncand,
              char *const *avail, size_t navail, char *const *must, size_t nmust, int size, char **chosen);

/* What pod q uses on this node: its allocated record mapped through its
 * assignment when present and consistent, else its assignment. 0, or -1
 * when q does not count. */
int gs_pod_usage(const struct gs_node_view *v, const struct gs_pod *q, struct gs_assignment *u);
/* Whether pod self, with limits eff on the GPUs it really holds, fits there
 * next to every other pod of pods[] that uses those GPUs, under the
 * extender's rule. Returns 1, or 0 with the reason in why. */
int gs_fits_on_held(const struct gs_node_view *v, const struct gs_pod *pods, int npods, const struct gs_pod *self,
                    const struct gs_assignment *eff, char *why, size_t whylen);

/* How the devices kubelet gave a pod (ids, one per GPU) relate to the
 * pod's assignment a, parsed from its annotation, on node v. */
enum gs_held_verdict {
    GS_HELD_REFUSE,        /* for another node, or not mappable onto these IDs (why) */
    GS_HELD_AS_ASSIGNED,   /* on the GPUs it names (any replicas) or where already recorded */
    GS_HELD_ON_OTHER_GPUS, /* replicas of other GPUs, not yet recorded: accept only if
                             * gs_fits_on_held, with the pods as they are under the agent's lock */
};
/* The PreStartContainer rule before any other pod is counted: the verdict,
 * the pod's limits on the GPUs it really holds (eff), and whether its
 * allocated record already names exactly these IDs (*recorded). */
enum gs_held_verdict gs_held_verdict_of(const struct gs_node_view *v, const struct gs_pod *pod,
                                        const struct gs_assignment *a, char *const *ids, size_t n,
                                        struct gs_assignment *eff, int *recorded, char *why, size_t whylen);

/* Who owns a container's region file, so that every process of that
 * container can open it and nobody else is given more: its runAsUser
 * (container over pod) as owner; as group its pod's fsGroup (a
 * supplementary group of every process of the pod), else its runAsGroup;
 * mode 0660. When neither a user nor a group is known (the image's USER
 * decides, or the pod runs in a user namespace, which maps ids), root-owned
 * and 0666: the file is reachable only through the container's own mount,
 * under a state root only root can enter. */
struct gs_region_owner {
    unsigned uid, gid, mode;
    char why[200]; /* for the log */
};
void gs_region_owner_of(const struct gs_pod *pod, const char *container, struct gs_region_owner *o);

/* A Kubernetes name as kubelet reports it: 1..max of [A-Za-z0-9._-]. */
int gs_k8s_name_ok(const char *s, size_t max);

/* The limits file of container h of pod uid (in DRA mode: h names the
 * claim, and uid is the claim's): KEY=VALUE lines in
 * docs/configuration.md's format, GPU j = the j-th of the container's GPUs
 * in NVML order (view indices gpu[order[j]]), limits from a. */
void gs_limits_text(const struct gs_node_view *v, const struct gs_holder *h, const char *uid,
                    const struct gs_assignment *a, const int *gpu, const int *order, size_t n, char *out, size_t len);

/* The container's entry in the GPU's roster (roster.h; the id and key left
 * empty): capped at its cap there in cap mode; in share mode, or without a
 * cap, the default weight, the ceiling limits.conf puts on
 * GPUSLICE_SHARE_WEIGHT. */
struct gs_roster_entry gs_roster_entry_of(const struct gs_assignment *a, const char *uuid);

#endif
