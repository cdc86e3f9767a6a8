/* What a tenant may not put in a GPU pod: environment variables that carry gpuslice's
 * (or HAMi-core's) limits, and gpuslice.io/ annotations, which only gpuslice's own
 * service accounts write. Pure functions over the pod's JSON (jansson). */
#ifndef GPUSLICE_TENANT_POLICY_H
#define GPUSLICE_TENANT_POLICY_H

#include <jansson.h>
#include <stddef.h>

/* The one gpuslice.io/ annotation a user writes, at creation (docs/annotations.md). */
#define GS_WH_USER_ANNOTATION "gpuslice.io/scheduling"

/* Checks the env and envFrom of every container in list (spec.<field>). Returns 0, or
 * -1 with "spec.<field>[i].env[j].name \"NAME\": ..." in err. */
int gs_wh_check_env(json_t *list, const char *field, char *err, size_t errlen);

/* Checks the env of every container in list (spec.<field>) of a pod that asked for no
 * gpuslice.io/ resource: the NVIDIA runtime's device-selection variables
 * (NVIDIA_VISIBLE_DEVICES other than "", "void" or "none", NVIDIA_MIG_*_DEVICES, ...)
 * would hand it GPUs outside any limit. Returns 0, or -1 with the reason in err. */
int gs_wh_check_gpu_env(json_t *list, const char *field, char *err, size_t errlen);

/* Checks the gpuslice.io/ annotations of a CREATE (old == NULL) or an UPDATE (old: the
 * pod before) by username: writers[0..nwriters) may do anything; anyone else may only
 * create a pod with GS_WH_USER_ANNOTATION and never add, change or remove a
 * gpuslice.io/ annotation afterwards. Returns 0, or -1 with a reason in err. */
int gs_wh_check_annotations(json_t *pod, json_t *old, const char *username, const char *const *writers, size_t nwriters,
                            char *err, size_t errlen);

#endif
