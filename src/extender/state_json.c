/* The cache as JSON: per node, per GPU, what is allocated and to whom. */
#include <string.h>

#include "state.h"

struct pods_ctx {
    struct ext_state *st;
    json_t *nodes; /* array parallel to cl.nodes */
};

static void add_pod(const char *key, void *val, void *ud)
{
    struct pods_ctx *c = ud;
    struct ext_pod *p = val;
    if (!p->counted || p->node_idx < 0)
        return;
    json_t *gpus = json_object_get(json_array_get(c->nodes, (size_t)p->node_idx), "gpus");
    for (int i = 0; i < p->nuse; i++) {
        json_t *g = json_array_get(gpus, (size_t)p->use[i].gi);
        if (!g)
            continue;
        json_array_append_new(json_object_get(g, "pods"),
                              json_pack("{s:s,s:I,s:i,s:i,s:b}", "pod", p->key, "memory_mib", (json_int_t)p->use[i].mem,
                                        "milli", p->use[i].milli, "replica", p->use[i].k, "claim",
                                        p->src == EXT_CLAIMED));
    }
}

json_t *ext_state_json(struct ext_state *st)
{
    json_t *nodes = json_array();
    for (size_t i = 0; i < st->cl.num_nodes; i++) {
        const gs_node *n = &st->cl.nodes[i];
        json_t *gpus = json_array();
        for (int g = 0; g < n->num_gpus; g++) {
            const gs_sched_gpu *gg = &n->gpus[g];
            json_array_append_new(
                gpus, json_pack("{s:s,s:I,s:I,s:i,s:i,s:i,s:b,s:i,s:[]}", "uuid", st->nodes[i].gpus[g].uuid,
                                "memory_mib", (json_int_t)gg->mem_total_mib, "memory_used_mib",
                                (json_int_t)gg->mem_used_mib, "milli_used", gg->milli_used, "replicas", gg->slots_total,
                                "replicas_used", gg->slots_used, "healthy", gg->healthy, "numa", gg->numa, "pods"));
        }
        const char *model = n->model >= 0 ? st->cl.model_names[n->model] : "";
        json_array_append_new(nodes, json_pack("{s:s,s:s,s:b,s:o}", "name", n->name, "model", model, "deleted",
                                               st->nodes[i].deleted, "gpus", gpus));
    }
    struct pods_ctx c = { st, nodes };
    strmap_foreach(&st->pods, add_pod, &c);
    return json_pack("{s:i,s:o}", "v", 1, "nodes", nodes);
}
