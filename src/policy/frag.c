/* Expected fragmentation of a node against the workload distribution.
 *
 * Definition (after the FGD paper, our own implementation): for a typical
 * request m, the node's free GPU compute that m could never use is a
 * fragment. If m cannot run on the node at all (CPU, memory, model, too few
 * GPUs with room) all free compute is fragment; otherwise the fragment is
 * the free compute on GPUs too small for m. The node's fragmentation is the
 * weight-averaged fragment over the workload. CPU-only requests are left
 * out: they would count all free compute everywhere, a constant. */
#include "policy_internal.h"

#include <stdlib.h>
#include <string.h>

void gs_frag_init(gs_frag_model *m)
{
    memset(m, 0, sizeof(*m));
}

void gs_frag_free(gs_frag_model *m)
{
    for (int i = 0; i < m->num_groups; i++)
        free(m->groups[i].subs);
    free(m->groups);
    gs_memo_free(&m->memo);
    memset(m, 0, sizeof(*m));
}

static void memo_clear(gs_frag_model *m)
{
    m->terminal_ready = false;
    gs_memo_clear(&m->memo);
}

static gs_frag_group *find_group(gs_frag_model *m, const gs_request *r)
{
    uint32_t mask = r->any_model ? 0 : r->model_mask;
    for (int i = 0; i < m->num_groups; i++) {
        gs_frag_group *g = &m->groups[i];
        if (g->num_gpus == r->num_gpus && g->gpu_milli == r->gpu_milli && g->any_model == r->any_model &&
            g->model_mask == mask)
            return g;
    }
    if (m->num_groups == m->cap_groups) {
        int cap = m->cap_groups ? m->cap_groups * 2 : 16;
        gs_frag_group *grown = realloc(m->groups, (size_t)cap * sizeof(*grown));
        if (!grown)
            return NULL;
        m->groups = grown;
        m->cap_groups = cap;
    }
    gs_frag_group *g = &m->groups[m->num_groups++];
    memset(g, 0, sizeof(*g));
    g->num_gpus = r->num_gpus;
    g->gpu_milli = r->gpu_milli;
    g->any_model = r->any_model;
    g->model_mask = mask;
    return g;
}

static int add_sub(gs_frag_group *g, const gs_request *r, double weight)
{
    for (int i = 0; i < g->num_subs; i++) {
        if (g->subs[i].cpu_milli == r->cpu_milli && g->subs[i].mem_mib == r->mem_mib) {
            g->subs[i].weight += weight;
            return 0;
        }
    }
    if (g->num_subs == g->cap_subs) {
        int cap = g->cap_subs ? g->cap_subs * 2 : 8;
        gs_frag_sub *grown = realloc(g->subs, (size_t)cap * sizeof(*grown));
        if (!grown)
            return -1;
        g->subs = grown;
        g->cap_subs = cap;
    }
    g->subs[g->num_subs++] = (gs_frag_sub){ r->cpu_milli, r->mem_mib, weight };
    return 0;
}

int gs_frag_add(gs_frag_model *m, const gs_request *r, double weight)
{
    if (!gs_request_valid(r) || !(weight > 0.0))
        return -1;
    memo_clear(m);
    if (r->num_gpus == 0) {
        m->cpu_only_weight += weight;
        m->sum_cpu_milli += weight * (double)r->cpu_milli;
        m->sum_mem_mib += weight * (double)r->mem_mib;
        return 0;
    }
    gs_frag_group *g = find_group(m, r);
    if (!g || add_sub(g, r, weight) != 0)
        return -1;
    g->weight += weight;
    m->total_weight += weight;
    if (r->gpu_milli >= GS_MILLI_PER_GPU)
        m->whole_weight += weight;
    for (int i = 0; i < GS_MAX_MODELS && !r->any_model; i++)
        if (r->model_mask >> i & 1u)
            m->constrained[i] += weight;
    m->sum_gpu_milli += weight * (double)gs_request_gpu_milli(r);
    m->gpu_pod_cpu_milli += weight * (double)r->cpu_milli;
    m->gpu_pod_mem_mib += weight * (double)r->mem_mib;
    m->sum_cpu_milli += weight * (double)r->cpu_milli;
    m->sum_mem_mib += weight * (double)r->mem_mib;
    return 0;
}

bool gs_frag_model_wanted(const gs_frag_model *m, int model)
{
    if (model < 0 || model >= GS_MAX_MODELS || m->total_weight <= 0.0)
        return false;
    return m->constrained[model] >= 0.01 * m->total_weight;
}

double gs_frag_whole_share(const gs_frag_model *m)
{
    return m->total_weight > 0.0 ? m->whole_weight / m->total_weight : 0.0;
}

/* Free compute on GPUs too small for the group, or -1 if too few GPUs fit. */
static int64_t gpu_fragment(const gs_frag_group *g, const gs_view *v)
{
    int fit = 0;
    int64_t small = 0;
    for (int i = 0; i < v->num_gpus; i++) {
        bool ok = g->gpu_milli >= GS_MILLI_PER_GPU ? v->gpu_idle[i] : v->gpu_free[i] >= g->gpu_milli;
        if (ok)
            fit++;
        else
            small += v->gpu_free[i];
    }
    return fit >= g->num_gpus ? small : -1;
}

static double frag_compute(const gs_frag_model *m, const gs_view *v)
{
    int64_t free_total = 0;
    for (int i = 0; i < v->num_gpus; i++)
        free_total += v->gpu_free[i];
    if (free_total == 0 || m->total_weight <= 0.0)
        return 0.0;
    double sum = 0.0;
    for (int gi = 0; gi < m->num_groups; gi++) {
        const gs_frag_group *g = &m->groups[gi];
        bool access = g->any_model || (v->model >= 0 && (g->model_mask >> v->model & 1u));
        int64_t frag = access ? gpu_fragment(g, v) : -1;
        if (frag < 0) {
            sum += g->weight * (double)free_total;
            continue;
        }
        for (int s = 0; s < g->num_subs; s++) {
            const gs_frag_sub *sub = &g->subs[s];
            bool host_ok = sub->cpu_milli <= v->cpu_free && sub->mem_mib <= v->mem_free;
            sum += sub->weight * (double)(host_ok ? frag : free_total);
        }
    }
    return sum / m->total_weight;
}

static double frag_compute_cb(const void *ctx, const gs_view *v)
{
    return frag_compute(ctx, v);
}

double gs_frag_of(gs_frag_model *m, const gs_view *v)
{
    return gs_memo_get(&m->memo, v, frag_compute_cb, m);
}

/* Chance that a gap is filled at all grows with the share of pods that fit
 * it; FILL_RATE says how many future pods compete for each gap. */
#define FILL_RATE 20.0

static void build_terminal(gs_frag_model *m)
{
    /* mass[d]: share of GPUs requested in slices of d milli-GPU. */
    double mass[GS_MILLI_PER_GPU + 1] = { 0 };
    double total = 0.0;
    for (int gi = 0; gi < m->num_groups; gi++) {
        const gs_frag_group *g = &m->groups[gi];
        int d = g->gpu_milli > GS_MILLI_PER_GPU ? GS_MILLI_PER_GPU : g->gpu_milli;
        double w = g->weight * (g->num_gpus > 1 ? g->num_gpus : 1);
        mass[d] += w;
        total += w;
    }
    for (int f = 0; f <= GS_MILLI_PER_GPU; f++) {
        double fits = 0.0, after = 0.0;
        for (int d = 1; d <= f && total > 0.0; d++) {
            if (mass[d] == 0.0)
                continue;
            fits += mass[d] / total;
            after += mass[d] / total * m->terminal[f - d];
        }
        if (fits == 0.0) {
            m->terminal[f] = f;
            continue;
        }
        double filled = FILL_RATE * fits < 1.0 ? FILL_RATE * fits : 1.0;
        m->terminal[f] = (1.0 - filled) * f + filled * after / fits;
    }
    m->terminal_ready = true;
}

double gs_frag_terminal(gs_frag_model *m, int32_t free_milli)
{
    if (!m->terminal_ready)
        build_terminal(m);
    if (free_milli <= 0)
        return 0.0;
    return m->terminal[free_milli > GS_MILLI_PER_GPU ? GS_MILLI_PER_GPU : free_milli];
}
