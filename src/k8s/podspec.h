/* What a pod asks of gpuslice: its GPU resources (one container) and the
 * versioned gpuslice.io/scheduling annotation. Shared by the extender and
 * the admission webhook, so both read a pod the same way. */
#ifndef GPUSLICE_PODSPEC_H
#define GPUSLICE_PODSPEC_H

#include <jansson.h>
#include <stdint.h>

#include "policy.h"

#define GS_RES_GPU "gpuslice.io/gpu"
#define GS_RES_GPU_MEMORY "gpuslice.io/gpu-memory"
#define GS_RES_GPU_CORES "gpuslice.io/gpu-cores"
#define GS_ANN_SCHEDULING "gpuslice.io/scheduling"
#define GS_SCHED_VERSION 1
#define GS_SPEC_MAX_MODELS 8
#define GS_SPEC_MAX_UUIDS 16
#define GS_SPEC_UUID_MAX 96

struct gs_sched_opts {
    int has_policy, has_gpu_policy;
    gs_policy_kind policy;     /* node choice */
    gs_policy_kind gpu_policy; /* GPU choice on the chosen node */
    int nmodels;
    char models[GS_SPEC_MAX_MODELS][GS_MODEL_NAME_MAX];
    int nuse, navoid;
    char use[GS_SPEC_MAX_UUIDS][GS_SPEC_UUID_MAX];   /* only these GPUs */
    char avoid[GS_SPEC_MAX_UUIDS][GS_SPEC_UUID_MAX]; /* never these */
    int numa_single;
    int share_mode; /* 0 cap, 1 share */
};

struct gs_podspec {
    int container;    /* index of the GPU container */
    int32_t num_gpus; /* 1..16 */
    int64_t mem_mib;  /* per GPU; 0 = whole GPU memory */
    int cores;        /* per GPU percent 0..100; 0 = no compute limit */
    int whole;        /* neither memory nor cores given: whole GPUs */
    struct gs_sched_opts opts;
};

/* Reads a v1.Pod. Returns 1 for a GPU pod (out filled), 0 for a pod with no
 * gpuslice resources, -1 with a message naming the field for a malformed
 * one. */
int gs_podspec_parse(json_t *pod, struct gs_podspec *out, char *err, size_t errlen);

/* Parses the gpuslice.io/scheduling value (len bytes). 0 or -1 with err. */
int gs_sched_opts_parse(const char *text, size_t len, struct gs_sched_opts *o, char *err, size_t errlen);

/* The policy engine's request for this pod (gpu_milli: gs_cores_milli). */
void gs_podspec_request(const struct gs_podspec *ps, gs_request *r);

#endif
