/* The decision: filter every node, score its candidate GPU choices under
 * the engine's policy, keep the best (ties go to the lowest node index). */
#include "policy_internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const policy_names[GS_POLICY_COUNT] = {
    [GS_POLICY_BINPACK] = "binpack", [GS_POLICY_SPREAD] = "spread",     [GS_POLICY_BESTFIT] = "bestfit",
    [GS_POLICY_FGD] = "fgd",         [GS_POLICY_FRAGLOOK] = "fraglook",
};

const char *gs_policy_name(gs_policy_kind k)
{
    return (unsigned)k < GS_POLICY_COUNT ? policy_names[k] : "unknown";
}

int gs_policy_parse(const char *name, gs_policy_kind *out)
{
    for (int i = 0; i < GS_POLICY_COUNT; i++) {
        if (strcmp(name, policy_names[i]) == 0) {
            *out = (gs_policy_kind)i;
            return 0;
        }
    }
    return -1;
}

gs_engine *gs_engine_new(gs_policy_kind kind)
{
    if ((unsigned)kind >= GS_POLICY_COUNT)
        return NULL;
    gs_engine *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->kind = kind;
    gs_frag_init(&e->frag);
    gs_typical_init(&e->typical);
    gs_cache_init(&e->cache);
    return e;
}

void gs_engine_free(gs_engine *e)
{
    if (!e)
        return;
    gs_frag_free(&e->frag);
    gs_typical_free(&e->typical);
    gs_memo_free(&e->fgd_memo);
    gs_cache_free(&e->cache);
    free(e);
}

int gs_engine_add_workload(gs_engine *e, const gs_request *r, double weight)
{
    gs_cache_invalidate(&e->cache);
    gs_memo_clear(&e->fgd_memo);
    if (gs_typical_add(&e->typical, r, weight) != 0)
        return -1;
    return gs_frag_add(&e->frag, r, weight);
}

void gs_engine_reset_cache(gs_engine *e)
{
    gs_cache_free(&e->cache);
    gs_cache_init(&e->cache);
}

static double score_candidate(gs_engine *e, const gs_node *n, const gs_request *r, const gs_candidate *c)
{
    switch (e->kind) {
    case GS_POLICY_BINPACK: return gs_score_binpack(n, r, c);
    case GS_POLICY_BESTFIT: return gs_score_bestfit(n, r);
    case GS_POLICY_FGD: return gs_score_fgd(e, n, r, c);
    case GS_POLICY_FRAGLOOK: return gs_score_fraglook(e, n, r, c);
    default: return gs_score_spread(n, r, c);
    }
}

/* Whether candidate a beats candidate b of equal score. fgd, like the
 * artifact, keeps the lowest GPU index; the others keep the first (the
 * tightest) candidate. */
static bool wins_tie(gs_policy_kind kind, const gs_candidate *a, const gs_candidate *b)
{
    return kind == GS_POLICY_FGD && a->num_gpus > 0 && a->gpus[0] < b->gpus[0];
}

bool gs_engine_score_node(gs_engine *e, const gs_cluster *c, size_t idx, const gs_request *r, double *score,
                          gs_placement *choice)
{
    if (idx >= c->num_nodes)
        return false;
    const gs_node *n = &c->nodes[idx];
    gs_filter_report rep;
    if (gs_filter_explain(n, r, &rep) != GS_FIT)
        return false;
    gs_candidate cands[GS_MAX_CANDIDATES];
    int count = gs_candidates(n, r, rep.gpu, cands, GS_MAX_CANDIDATES);
    /* The artifact's bestfit and binpack always take the tightest GPUs. */
    if (count > 1 && (e->kind == GS_POLICY_BESTFIT || e->kind == GS_POLICY_BINPACK))
        count = 1;
    int best = -1;
    double best_score = 0.0;
    for (int i = 0; i < count; i++) {
        double s = score_candidate(e, n, r, &cands[i]);
        if (best < 0 || s > best_score || (s == best_score && wins_tie(e->kind, &cands[i], &cands[best]))) {
            best = i;
            best_score = s;
        }
    }
    if (best < 0)
        return false;
    *score = best_score;
    choice->node = (int32_t)idx;
    choice->num_gpus = cands[best].num_gpus;
    memset(choice->gpus, -1, sizeof(choice->gpus));
    memcpy(choice->gpus, cands[best].gpus, (size_t)cands[best].num_gpus);
    return true;
}

/* Cached per-node score; recomputed when the node or workload changed. */
static bool score_cached(gs_engine *e, const gs_cluster *c, size_t i, const gs_request *r, gs_cache_entry *entries,
                         double *s, gs_placement *p)
{
    if (!entries)
        return gs_engine_score_node(e, c, i, r, s, p);
    gs_cache_entry *ce = &entries[i];
    if (ce->epoch != e->cache.epoch || ce->version != c->nodes[i].version) {
        ce->feasible = gs_engine_score_node(e, c, i, r, &ce->score, p);
        ce->epoch = e->cache.epoch;
        ce->version = c->nodes[i].version;
        if (ce->feasible) {
            ce->num_gpus = (int8_t)p->num_gpus;
            memcpy(ce->gpus, p->gpus, sizeof(ce->gpus));
        }
        *s = ce->score;
        return ce->feasible;
    }
    if (!ce->feasible)
        return false;
    *s = ce->score;
    p->node = (int32_t)i;
    p->num_gpus = (int32_t)(uint8_t)ce->num_gpus; /* a count, 0..GS_MAX_GPUS_PER_NODE */
    memcpy(p->gpus, ce->gpus, sizeof(p->gpus));
    return true;
}

/* CPU and GPU totals of the cluster, kept until the cluster changes size. */
static void note_totals(gs_engine *e, const gs_cluster *c)
{
    if (e->totals_of == c && e->totals_nodes == c->num_nodes)
        return;
    e->totals_of = c;
    e->totals_nodes = c->num_nodes;
    e->cluster_cpu_milli = 0.0;
    for (size_t i = 0; i < c->num_nodes; i++)
        e->cluster_cpu_milli += (double)c->nodes[i].cpu_total_milli;
    e->cluster_gpu_milli = (double)gs_cluster_gpu_capacity(c);
    gs_cache_invalidate(&e->cache);
}

bool gs_engine_decide(gs_engine *e, const gs_cluster *c, const gs_request *r, gs_placement *out)
{
    note_totals(e, c);
    bool found = false;
    double best = 0.0;
    gs_cache_entry *entries = gs_cache_lookup(&e->cache, c, r);
    for (size_t i = 0; i < c->num_nodes; i++) {
        double s;
        gs_placement p;
        if (!score_cached(e, c, i, r, entries, &s, &p))
            continue;
        if (!found || s > best) {
            found = true;
            best = s;
            *out = p;
        }
    }
    return found;
}
