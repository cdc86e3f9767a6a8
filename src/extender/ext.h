/* The running extender: the usage cache, the API client and sync status. */
#ifndef GPUSLICE_EXT_H
#define GPUSLICE_EXT_H

#include <jansson.h>
#include <pthread.h>

#include "kube_client.h"
#include "state.h"

/* Binds to one node run one at a time in a replica (no self-conflicts on the
 * node's claims); binds to other nodes go on beside them, as kube-scheduler
 * binds pods in parallel. Nodes share these locks by a hash of their name. */
#define EXT_BIND_LOCKS 64

struct ext_ctx {
    struct ext_state st;
    struct kube_client *kc; /* NULL: no API server (verbs only; bind refuses) */
    pthread_mutex_t bind_mu[EXT_BIND_LOCKS];
    volatile int ready; /* first full list applied */
    volatile int stop;
    pthread_t sync_thread;
    int sync_started;
};

/* ExtenderBindingArgs -> ExtenderBindingResult. Records the decision on the
 * pod (gpuslice.io/assignment), claims it on the node with optimistic
 * concurrency, then creates the Binding; undoes both if binding fails. */
json_t *ext_bind(struct ext_ctx *x, json_t *args, int *bad);

/* Starts list+watch of nodes and pods into x->st. */
int ext_sync_start(struct ext_ctx *x);
void ext_sync_stop(struct ext_ctx *x);

#endif
