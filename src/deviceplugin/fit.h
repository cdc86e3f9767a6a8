/* The per-GPU fit rule of the scheduler extender (policy engine
 * gs_gpu_fit), for the node agent's own re-check at PreStartContainer.
 * Kept apart from plugin.c: the policy engine's gs_gpu is not the
 * inventory's struct gs_gpu. */
#ifndef GPUSLICE_DP_FIT_H
#define GPUSLICE_DP_FIT_H

#include <stdint.h>

struct gs_share_use {
    int64_t mem_total_mib, mem_used_mib;
    int32_t milli_used; /* 1000 = the whole GPU */
    int32_t slots_used, slots_total;
};

/* NULL when a share of gpu_milli and mem_mib fits next to use, else what
 * is short ("memory", "cores", "replicas"). */
const char *gs_share_fit(const struct gs_share_use *use, int32_t gpu_milli, int64_t mem_mib);

#endif
