/* Per-node score cache, one array per distinct request shape (LRU). */
#include "score_cache.h"

#include <stdlib.h>
#include <string.h>

/* Memory bound for all per-node arrays together. */
#define CACHE_BYTES (64u << 20)
#define CACHE_MAX_CLASSES 512

void gs_cache_init(gs_score_cache *c)
{
    memset(c, 0, sizeof(*c));
    c->epoch = 1;
}

static void drop_classes(gs_score_cache *c)
{
    for (int i = 0; c->classes && i < c->num_classes; i++)
        free(c->classes[i].entries);
    free(c->classes);
    c->classes = NULL;
    c->num_classes = 0;
}

void gs_cache_free(gs_score_cache *c)
{
    drop_classes(c);
    memset(c, 0, sizeof(*c));
}

void gs_cache_invalidate(gs_score_cache *c)
{
    if (++c->epoch == 0)
        c->epoch = 1;
}

static bool same_request(const gs_request *a, const gs_request *b)
{
    return a->cpu_milli == b->cpu_milli && a->mem_mib == b->mem_mib && a->num_gpus == b->num_gpus &&
           a->gpu_milli == b->gpu_milli && a->gpu_mem_mib == b->gpu_mem_mib && a->any_model == b->any_model &&
           (a->any_model || a->model_mask == b->model_mask) && a->numa == b->numa;
}

/* Starts over when the cluster (or its size) is not the one cached. */
static bool attach(gs_score_cache *c, const gs_cluster *cl)
{
    if (c->cluster == cl && c->nodes == cl->nodes && c->num_nodes == cl->num_nodes && c->classes)
        return true;
    drop_classes(c);
    c->cluster = cl;
    c->nodes = cl->nodes;
    c->num_nodes = cl->num_nodes;
    size_t per_class = (cl->num_nodes ? cl->num_nodes : 1) * sizeof(gs_cache_entry);
    size_t fit = CACHE_BYTES / per_class;
    c->max_classes = (int)(fit < 4 ? 4 : fit > CACHE_MAX_CLASSES ? CACHE_MAX_CLASSES : fit);
    c->classes = calloc((size_t)c->max_classes, sizeof(*c->classes));
    return c->classes != NULL;
}

gs_cache_entry *gs_cache_lookup(gs_score_cache *c, const gs_cluster *cl, const gs_request *r)
{
    if (!attach(c, cl))
        return NULL;
    c->clock++;
    int victim = 0;
    for (int i = 0; i < c->num_classes; i++) {
        if (same_request(&c->classes[i].req, r)) {
            c->classes[i].last_use = c->clock;
            return c->classes[i].entries;
        }
        if (c->classes[i].last_use < c->classes[victim].last_use)
            victim = i;
    }
    gs_cache_class *slot;
    if (c->num_classes < c->max_classes) {
        slot = &c->classes[c->num_classes];
        slot->entries = calloc(c->num_nodes ? c->num_nodes : 1, sizeof(gs_cache_entry));
        if (!slot->entries)
            return NULL;
        c->num_classes++;
    } else {
        slot = &c->classes[victim]; /* evict the least recently used shape */
        if (!slot->entries)
            return NULL;
        memset(slot->entries, 0, c->num_nodes * sizeof(gs_cache_entry));
    }
    slot->req = *r;
    slot->last_use = c->clock;
    return slot->entries;
}
