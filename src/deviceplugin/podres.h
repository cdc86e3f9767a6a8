/* kubelet's pod-resources API v1 (List), asked at PreStartContainer: which
 * container holds exactly a device set of our resource. */
#ifndef GPUSLICE_DP_PODRES_H
#define GPUSLICE_DP_PODRES_H

#include <stddef.h>

#include "placement.h"

/* Returns 0 with h filled when exactly one container holds exactly ids,
 * else a GS_ST_* code with msg (what prefixes it). */
int gs_podres_find_holder(const char *socket, const char *resource, const char *what, char *const *ids, size_t n,
                          struct gs_holder *h, char *msg, size_t msglen);

#endif
