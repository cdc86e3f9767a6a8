/* Per-node feasibility and scores through the policy engine. GPUs a pod may
 * not use (use_gpus / avoid_gpus) are hidden by marking them unhealthy in a
 * private copy of the node, so the engine itself stays UUID-agnostic. */
#include "place.h"

#include <stdio.h>
#include <string.h>

void ext_want_init(const struct ext_state *st, const struct gs_podspec *ps, struct ext_want *w)
{
    memset(w, 0, sizeof *w);
    w->ps = *ps;
    gs_podspec_request(ps, &w->r);
    if (ps->whole) {
        w->r.gpu_milli = GS_MILLI_PER_GPU;
        w->r.gpu_mem_mib = 0;
    }
    if (ps->opts.nmodels > 0) {
        w->r.any_model = false;
        for (int i = 0; i < ps->opts.nmodels; i++) {
            int m = gs_cluster_find_model(&st->cl, ps->opts.models[i]);
            if (m >= 0)
                w->r.model_mask |= 1u << m;
        }
    }
    w->policy = ps->opts.has_policy ? ps->opts.policy : st->policy;
    w->gpu_policy = ps->opts.has_gpu_policy ? ps->opts.gpu_policy : st->gpu_policy;
}

static bool allowed(const struct ext_want *w, const char *uuid)
{
    const struct gs_sched_opts *o = &w->ps.opts;
    for (int i = 0; i < o->navoid; i++)
        if (strcmp(o->avoid[i], uuid) == 0)
            return false;
    if (o->nuse == 0)
        return true;
    for (int i = 0; i < o->nuse; i++)
        if (strcmp(o->use[i], uuid) == 0)
            return true;
    return false;
}

/* The node as this pod may see it; returns the number of GPUs hidden. */
static int view(const struct ext_state *st, const struct ext_want *w, int idx, gs_node *out)
{
    *out = st->cl.nodes[idx];
    int hidden = 0;
    if (w->ps.opts.nuse == 0 && w->ps.opts.navoid == 0)
        return 0;
    for (int g = 0; g < out->num_gpus; g++)
        if (!allowed(w, st->nodes[idx].gpus[g].uuid)) {
            out->gpus[g].healthy = false;
            hidden++;
        }
    return hidden;
}

static bool resolvable(gs_reject r)
{
    return r == GS_REJ_GPUS_BUSY || r == GS_REJ_NUMA || r == GS_REJ_GPU_COMPUTE || r == GS_REJ_GPU_MEMORY ||
           r == GS_REJ_GPU_SLOTS;
}

gs_reject ext_explain(struct ext_state *st, const struct ext_want *w, int idx, char *why, size_t whylen,
                      bool *unresolvable)
{
    const struct ext_node *en = &st->nodes[idx];
    *unresolvable = true;
    if (en->deleted || !en->has_inv) {
        snprintf(why, whylen,
                 "gpuslice: node has no GPU inventory (is the gpuslice node agent "
                 "running there?)");
        return GS_REJ_GPU_COUNT;
    }
    gs_node n;
    int hidden = view(st, w, idx, &n);
    gs_filter_report rep;
    gs_reject r = gs_filter_explain(&n, &w->r, &rep);
    if (r == GS_FIT)
        return r;
    int usable = 0, count[GS_REJ_BAD_REQUEST + 1] = { 0 };
    for (int g = 0; g < n.num_gpus; g++) {
        usable += n.gpus[g].healthy;
        if ((unsigned)rep.gpu[g] <= GS_REJ_BAD_REQUEST)
            count[rep.gpu[g]]++;
    }
    *unresolvable = !resolvable(r) || usable < w->r.num_gpus;
    int off = snprintf(why, whylen, "gpuslice: %s", gs_reject_str(r));
    if (r == GS_REJ_GPUS_BUSY || r == GS_REJ_NUMA) {
        off += snprintf(why + off, whylen > (size_t)off ? whylen - (size_t)off : 0,
                        " (need %d of %d GPUs:", w->r.num_gpus, n.num_gpus);
        for (int k = 1; k <= GS_REJ_BAD_REQUEST; k++)
            if (count[k] && (size_t)off < whylen)
                off += snprintf(why + off, whylen - (size_t)off, " %d %s;", count[k],
                                k == GS_REJ_GPU_UNHEALTHY && hidden ? "unhealthy or excluded" : gs_reject_str(k));
        if ((size_t)off < whylen)
            snprintf(why + off, whylen - (size_t)off, ")");
    }
    return r;
}

bool ext_score(struct ext_state *st, const struct ext_want *w, int idx, gs_policy_kind k, double *score,
               gs_placement *pl)
{
    if (st->nodes[idx].deleted || !st->nodes[idx].has_inv)
        return false;
    if (w->ps.opts.nuse == 0 && w->ps.opts.navoid == 0)
        return gs_engine_score_node(st->eng[k], &st->cl, (size_t)idx, &w->r, score, pl);
    static __thread gs_cluster one; /* model table is large: not on the stack */
    gs_node n;
    view(st, w, idx, &n);
    one = st->cl;
    one.nodes = &n;
    one.num_nodes = one.cap_nodes = 1;
    bool ok = gs_engine_score_node(st->eng[k], &one, 0, &w->r, score, pl);
    one.nodes = NULL; /* n dies with this frame: leave no pointer to it behind */
    one.num_nodes = one.cap_nodes = 0;
    pl->node = idx;
    return ok;
}
