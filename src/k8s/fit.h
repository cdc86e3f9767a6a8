/* How much of a GPU a share takes, in the policy engine's units, and the
 * per-GPU fit rule of the scheduler extender (policy engine gs_gpu_fit)
 * for the node agent's own re-check at PreStartContainer. One rule for the
 * extender, the webhook and the agent, so they count alike. */
#ifndef GPUSLICE_DP_FIT_H
#define GPUSLICE_DP_FIT_H

#include <stdint.h>

/* The milli-GPUs of a share of cores percent (1000 = the whole GPU);
 * cores 0 (no compute limit) counts 1 milli, so a GPU still holds a
 * bounded number of pods. */
int32_t gs_cores_milli(unsigned cores);

struct gs_share_use {
    int64_t mem_total_mib, mem_used_mib;
    int32_t milli_used; /* 1000 = the whole GPU */
    int32_t slots_used, slots_total;
};

/* NULL when a share of gpu_milli and mem_mib fits next to use, else what
 * is short ("memory", "cores", "replicas"). */
const char *gs_share_fit(const struct gs_share_use *use, int32_t gpu_milli, int64_t mem_mib);

#endif
