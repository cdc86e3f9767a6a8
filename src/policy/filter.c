/* Feasibility: whether a GPU or node can take a request, and why not. */
#include "policy.h"

static const char *const reject_names[] = {
    [GS_FIT] = "fits",
    [GS_REJ_NODE_UNHEALTHY] = "node unhealthy",
    [GS_REJ_CPU] = "insufficient CPU",
    [GS_REJ_MEMORY] = "insufficient memory",
    [GS_REJ_GPU_MODEL] = "GPU model not allowed",
    [GS_REJ_GPU_COUNT] = "node has too few GPUs",
    [GS_REJ_GPUS_BUSY] = "too few GPUs with room",
    [GS_REJ_NUMA] = "GPUs with room span NUMA nodes",
    [GS_REJ_GPU_UNHEALTHY] = "GPU unhealthy",
    [GS_REJ_GPU_COMPUTE] = "insufficient GPU compute",
    [GS_REJ_GPU_MEMORY] = "insufficient GPU memory",
    [GS_REJ_GPU_SLOTS] = "GPU replica slots full",
    [GS_REJ_BAD_REQUEST] = "malformed request",
};

const char *gs_reject_str(gs_reject r)
{
    if ((unsigned)r >= sizeof(reject_names) / sizeof(reject_names[0]))
        return "unknown reason";
    return reject_names[r];
}

bool gs_request_valid(const gs_request *r)
{
    if (r->cpu_milli < 0 || r->mem_mib < 0 || r->gpu_mem_mib < 0)
        return false;
    if (r->num_gpus < 0 || r->num_gpus > GS_MAX_GPUS_PER_NODE)
        return false;
    if (r->num_gpus > 0 && r->gpu_milli <= 0)
        return false;
    if (r->numa != GS_NUMA_NONE && r->numa != GS_NUMA_SINGLE)
        return false;
    return true;
}

gs_reject gs_gpu_fit(const gs_sched_gpu *g, const gs_request *r)
{
    if (!g->healthy)
        return GS_REJ_GPU_UNHEALTHY;
    if (r->gpu_milli >= g->milli_total) {
        /* An exclusive GPU must be idle: no compute and no replica in use. */
        if (g->milli_used != 0 || g->slots_used != 0)
            return GS_REJ_GPU_COMPUTE;
    } else if (g->milli_total - g->milli_used < r->gpu_milli) {
        return GS_REJ_GPU_COMPUTE;
    }
    if (r->gpu_mem_mib > 0 && g->mem_total_mib - g->mem_used_mib < r->gpu_mem_mib)
        return GS_REJ_GPU_MEMORY;
    if (g->slots_total > 0 && g->slots_used >= g->slots_total)
        return GS_REJ_GPU_SLOTS;
    return GS_FIT;
}

/* Node-level checks that do not look at individual GPUs. */
static gs_reject node_fit_coarse(const gs_node *n, const gs_request *r)
{
    if (!gs_request_valid(r))
        return GS_REJ_BAD_REQUEST;
    if (!n->healthy)
        return GS_REJ_NODE_UNHEALTHY;
    if (n->cpu_total_milli - n->cpu_used_milli < r->cpu_milli)
        return GS_REJ_CPU;
    if (n->mem_total_mib - n->mem_used_mib < r->mem_mib)
        return GS_REJ_MEMORY;
    if (r->num_gpus == 0)
        return GS_FIT;
    if (n->num_gpus < r->num_gpus)
        return GS_REJ_GPU_COUNT;
    if (!r->any_model && (n->model < 0 || !(r->model_mask >> n->model & 1u)))
        return GS_REJ_GPU_MODEL;
    return GS_FIT;
}

/* Given per-GPU verdicts, whether enough fitting GPUs exist (on one NUMA
 * node when the request asks for it). */
static gs_reject count_verdict(const gs_node *n, const gs_request *r, const gs_reject *gpu)
{
    int fitting = 0;
    for (int i = 0; i < n->num_gpus; i++)
        fitting += gpu[i] == GS_FIT;
    if (fitting < r->num_gpus)
        return GS_REJ_GPUS_BUSY;
    if (r->numa != GS_NUMA_SINGLE)
        return GS_FIT;
    for (int i = 0; i < n->num_gpus; i++) {
        if (gpu[i] != GS_FIT)
            continue;
        int same = 0;
        for (int j = 0; j < n->num_gpus; j++)
            same += gpu[j] == GS_FIT && n->gpus[j].numa == n->gpus[i].numa;
        if (same >= r->num_gpus)
            return GS_FIT;
    }
    return GS_REJ_NUMA;
}

gs_reject gs_filter_explain(const gs_node *n, const gs_request *r, gs_filter_report *report)
{
    for (int i = 0; i < GS_MAX_GPUS_PER_NODE; i++)
        report->gpu[i] = GS_REJ_GPU_COUNT;
    gs_reject coarse = node_fit_coarse(n, r);
    if (r->num_gpus > 0 && coarse != GS_REJ_BAD_REQUEST)
        for (int i = 0; i < n->num_gpus; i++)
            report->gpu[i] = gs_gpu_fit(&n->gpus[i], r);
    report->node = coarse;
    if (coarse == GS_FIT && r->num_gpus > 0)
        report->node = count_verdict(n, r, report->gpu);
    return report->node;
}

gs_reject gs_node_fit(const gs_node *n, const gs_request *r)
{
    gs_filter_report rep;
    return gs_filter_explain(n, r, &rep);
}
