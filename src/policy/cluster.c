/* Cluster model: nodes, GPU model table, committing and undoing placements. */
#include "policy.h"

#include <stdlib.h>
#include <string.h>

void gs_cluster_init(gs_cluster *c)
{
    memset(c, 0, sizeof(*c));
}

void gs_cluster_free(gs_cluster *c)
{
    free(c->nodes);
    memset(c, 0, sizeof(*c));
}

int gs_cluster_find_model(const gs_cluster *c, const char *name)
{
    for (int i = 0; i < c->num_models; i++)
        if (strcmp(c->model_names[i], name) == 0)
            return i;
    return -1;
}

int gs_cluster_model(gs_cluster *c, const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len >= GS_MODEL_NAME_MAX)
        return -1;
    int found = gs_cluster_find_model(c, name);
    if (found >= 0)
        return found;
    if (c->num_models >= GS_MAX_MODELS)
        return -1;
    memcpy(c->model_names[c->num_models], name, len + 1);
    return c->num_models++;
}

int gs_cluster_add_node(gs_cluster *c, const char *name, int64_t cpu_milli, int64_t mem_mib, int model, int num_gpus,
                        int32_t milli_total)
{
    if (cpu_milli < 0 || mem_mib < 0 || num_gpus < 0 || num_gpus > GS_MAX_GPUS_PER_NODE)
        return -1;
    if (num_gpus > 0 && (model < 0 || model >= c->num_models || milli_total <= 0))
        return -1;
    if (c->num_nodes == c->cap_nodes) {
        size_t cap = c->cap_nodes ? c->cap_nodes * 2 : 64;
        gs_node *grown = realloc(c->nodes, cap * sizeof(*grown));
        if (!grown)
            return -1;
        c->nodes = grown;
        c->cap_nodes = cap;
    }
    gs_node *n = &c->nodes[c->num_nodes];
    memset(n, 0, sizeof(*n));
    n->name = name;
    n->cpu_total_milli = cpu_milli;
    n->mem_total_mib = mem_mib;
    n->model = num_gpus > 0 ? model : -1;
    n->num_gpus = num_gpus;
    n->healthy = true;
    for (int i = 0; i < num_gpus; i++) {
        n->gpus[i].milli_total = milli_total;
        n->gpus[i].healthy = true;
    }
    return (int)c->num_nodes++;
}

int64_t gs_request_gpu_milli(const gs_request *r)
{
    int32_t per = r->gpu_milli < GS_MILLI_PER_GPU ? r->gpu_milli : GS_MILLI_PER_GPU;
    return (int64_t)r->num_gpus * per;
}

/* Compute a request takes on one GPU: exclusive requests take all of it. */
static int32_t milli_on(const gs_sched_gpu *g, const gs_request *r)
{
    return r->gpu_milli >= g->milli_total ? g->milli_total : r->gpu_milli;
}

static bool placement_valid(const gs_cluster *c, const gs_request *r, const gs_placement *p)
{
    if (p->node < 0 || (size_t)p->node >= c->num_nodes || p->num_gpus != r->num_gpus)
        return false;
    const gs_node *n = &c->nodes[p->node];
    for (int i = 0; i < p->num_gpus; i++) {
        if (p->gpus[i] < 0 || p->gpus[i] >= n->num_gpus)
            return false;
        for (int j = 0; j < i; j++)
            if (p->gpus[j] == p->gpus[i])
                return false;
    }
    return true;
}

int gs_cluster_apply(gs_cluster *c, const gs_request *r, const gs_placement *p)
{
    if (!gs_request_valid(r) || !placement_valid(c, r, p))
        return -1;
    gs_node *n = &c->nodes[p->node];
    if (n->cpu_used_milli + r->cpu_milli > n->cpu_total_milli || n->mem_used_mib + r->mem_mib > n->mem_total_mib ||
        !n->healthy)
        return -1;
    for (int i = 0; i < p->num_gpus; i++)
        if (gs_gpu_fit(&n->gpus[p->gpus[i]], r) != GS_FIT)
            return -1;
    n->cpu_used_milli += r->cpu_milli;
    n->mem_used_mib += r->mem_mib;
    for (int i = 0; i < p->num_gpus; i++) {
        gs_sched_gpu *g = &n->gpus[p->gpus[i]];
        g->milli_used += milli_on(g, r);
        g->mem_used_mib += r->gpu_mem_mib;
        g->slots_used++;
    }
    n->version++;
    return 0;
}

int gs_cluster_release(gs_cluster *c, const gs_request *r, const gs_placement *p)
{
    if (!gs_request_valid(r) || !placement_valid(c, r, p))
        return -1;
    gs_node *n = &c->nodes[p->node];
    if (n->cpu_used_milli < r->cpu_milli || n->mem_used_mib < r->mem_mib)
        return -1;
    for (int i = 0; i < p->num_gpus; i++) {
        const gs_sched_gpu *g = &n->gpus[p->gpus[i]];
        if (g->milli_used < milli_on(g, r) || g->mem_used_mib < r->gpu_mem_mib || g->slots_used < 1)
            return -1;
    }
    n->cpu_used_milli -= r->cpu_milli;
    n->mem_used_mib -= r->mem_mib;
    for (int i = 0; i < p->num_gpus; i++) {
        gs_sched_gpu *g = &n->gpus[p->gpus[i]];
        g->milli_used -= milli_on(g, r);
        g->mem_used_mib -= r->gpu_mem_mib;
        g->slots_used--;
    }
    n->version++;
    return 0;
}

int64_t gs_cluster_gpu_capacity(const gs_cluster *c)
{
    int64_t sum = 0;
    for (size_t i = 0; i < c->num_nodes; i++)
        for (int g = 0; g < c->nodes[i].num_gpus; g++)
            sum += c->nodes[i].gpus[g].milli_total;
    return sum;
}

int64_t gs_cluster_gpu_allocated(const gs_cluster *c)
{
    int64_t sum = 0;
    for (size_t i = 0; i < c->num_nodes; i++)
        for (int g = 0; g < c->nodes[i].num_gpus; g++)
            sum += c->nodes[i].gpus[g].milli_used;
    return sum;
}
