/* The node agent's record on a pod: gpuslice.io/allocated, the replicas
 * its container really holds (docs/annotations.md). */
#ifndef GPUSLICE_DP_POD_RECORD_H
#define GPUSLICE_DP_POD_RECORD_H

#include <stddef.h>

#include "podcache.h"

/* A merge patch conditional on the resourceVersion pod was matched at;
 * on 409 the pod is re-read and, if it still carries the same assignment,
 * patched again. The answer is fed into pc. Returns 0 or -1 (logged). */
int gs_record_allocated(struct kube_client *kc, struct gs_podcache *pc, const char *node, const struct gs_pod *pod,
                        char *const *ids, size_t n);

#endif
