/*
 * The pods bound to this node, kept by list + watch (fieldSelector
 * spec.nodeName=<node>). Only what Allocate needs is kept. Allocate also
 * calls gs_podcache_relist() on a miss: a pod bound a moment ago may not
 * have reached the watch yet.
 */
#ifndef GPUSLICE_DP_PODCACHE_H
#define GPUSLICE_DP_PODCACHE_H

#include <pthread.h>

#include "kube_client.h"

#define GS_POD_MAX_CONTAINERS 16
#define GS_ID_UNSET (-1LL)

/* A container's own runAsUser/runAsGroup (GS_ID_UNSET when it sets none). */
struct gs_pod_container {
    char name[64];
    long long run_as_user, run_as_group;
};

struct gs_pod {
    char ns[64];
    char name[254];
    char uid[KUBE_POD_UID_MAX];
    char rv[32];
    char created[32]; /* RFC 3339, sorts as text */
    int terminal;     /* phase Succeeded/Failed, or being deleted */
    /* When the agent first saw the pod bound to this node: the pod's
     * resourceVersion then (0 if not a decimal number) and a local sequence
     * number (watch events arrive in resourceVersion order). Kept across
     * updates and re-lists; orders the GetPreferredAllocation hint. */
    unsigned long long bound_rv;
    unsigned long long bound_seq;
    /* Who the pod's processes run as (spec.securityContext, GS_ID_UNSET
     * when unset), the containers' own settings (spec.containers and
     * initContainers; ncontainers = -1 when there were more than fit), and
     * whether it runs in a user namespace (spec.hostUsers false). */
    long long run_as_user, run_as_group, fs_group;
    int host_users_false;
    int ncontainers;
    struct gs_pod_container containers[GS_POD_MAX_CONTAINERS];
    char *assignment; /* gpuslice.io/assignment value, or NULL */
    char *allocated;  /* gpuslice.io/allocated value, or NULL */
    char *signature;  /* gpuslice.io/assignment-signature value, or NULL */
};

struct gs_podcache {
    pthread_mutex_t lock;
    struct gs_pod *pods;
    int npods, cap;
    unsigned version;       /* bumped on every change */
    unsigned long long seq; /* last bound_seq handed out */
    struct kube_client *kc;
    char node[256];
    volatile int *stop;
    pthread_t thread;
    int synced; /* a list has completed */
    /* The newest resourceVersion the cache is known to reflect (the last
     * list's or watch event's; 0 when none was a decimal number): a list
     * older than this, answered while the watch went on, is not installed. */
    unsigned long long applied_rv;
};

int gs_podcache_start(struct gs_podcache *pc, struct kube_client *kc, const char *node, volatile int *stop);
void gs_podcache_join(struct gs_podcache *pc);
/* Lists the node's pods now and replaces the cache, unless the watch has
 * meanwhile taken the cache past the list's resourceVersion (then the list
 * has nothing the cache lacks). Returns 0 or -1. */
int gs_podcache_relist(struct gs_podcache *pc);
/* Upserts a pod object (JSON) into the cache, e.g. after a patch answer. */
void gs_podcache_upsert_json(struct gs_podcache *pc, json_t *pod);
/* Copies the pods out (caller frees with gs_podcache_free_copy). */
int gs_podcache_copy(struct gs_podcache *pc, struct gs_pod **out);
void gs_podcache_free_copy(struct gs_pod *pods, int n);

#endif
