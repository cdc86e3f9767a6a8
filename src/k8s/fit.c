/* See fit.h. */
#include "fit.h"

#include <string.h>

#include "policy.h"

int32_t gs_cores_milli(unsigned cores)
{
    return cores ? (int32_t)cores * (GS_MILLI_PER_GPU / 100) : 1;
}

const char *gs_share_fit(const struct gs_share_use *use, int32_t gpu_milli, int64_t mem_mib)
{
    gs_sched_gpu g;
    gs_request r;
    memset(&g, 0, sizeof g);
    memset(&r, 0, sizeof r);
    g.milli_total = GS_MILLI_PER_GPU;
    g.milli_used = use->milli_used;
    g.mem_total_mib = use->mem_total_mib;
    g.mem_used_mib = use->mem_used_mib;
    g.slots_total = use->slots_total;
    g.slots_used = use->slots_used;
    g.healthy = true; /* kubelet only hands out Healthy devices */
    r.num_gpus = 1;
    r.gpu_milli = gpu_milli;
    r.gpu_mem_mib = mem_mib;
    switch (gs_gpu_fit(&g, &r)) {
    case GS_FIT: return NULL;
    case GS_REJ_GPU_MEMORY: return "memory";
    case GS_REJ_GPU_SLOTS: return "replicas";
    default: return "cores";
    }
}
