/* Usage cache: what the API server says is in use, as a policy-engine cluster.
 * Usage is derived from pods' assignments (and in-flight claims on nodes), so
 * a restart that re-lists rebuilds exactly the same state. */
#include "state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "annotation.h"
#include "fit.h"
#include "kube_client.h"

#define BIG_CPU ((int64_t)1 << 40) /* CPU/memory are kube-scheduler's job */

int ext_state_init(struct ext_state *st, gs_policy_kind policy, gs_policy_kind gpu_policy)
{
    memset(st, 0, sizeof *st);
    pthread_mutex_init(&st->mu, NULL);
    gs_cluster_init(&st->cl);
    strmap_init(&st->node_idx);
    strmap_init(&st->pods);
    st->policy = policy;
    st->gpu_policy = gpu_policy;
    st->claim_ttl = 300;
    for (int k = 0; k < GS_POLICY_COUNT; k++)
        if (!(st->eng[k] = gs_engine_new((gs_policy_kind)k)))
            return -1;
    return 0;
}

static void free_pod(const char *key, void *val, void *ud)
{
    struct ext_pod *p = val;
    free(p->ann);
    free(p);
}

static void drop_all(struct ext_state *st)
{
    strmap_foreach(&st->pods, free_pod, NULL);
    strmap_free(&st->pods);
    strmap_free(&st->node_idx);
    for (size_t i = 0; i < st->cl.num_nodes; i++) {
        free(st->nodes[i].name);
        free(st->nodes[i].inv_text);
        json_decref(st->nodes[i].claims);
    }
    free(st->nodes);
    st->nodes = NULL;
    gs_cluster_free(&st->cl);
}

void ext_state_free(struct ext_state *st)
{
    drop_all(st);
    for (int k = 0; k < GS_POLICY_COUNT; k++)
        gs_engine_free(st->eng[k]);
    pthread_mutex_destroy(&st->mu);
}

void ext_state_clear(struct ext_state *st)
{
    drop_all(st);
    gs_cluster_init(&st->cl);
    for (int k = 0; k < GS_POLICY_COUNT; k++)
        gs_engine_reset_cache(st->eng[k]);
    st->generation++;
}

int ext_state_find_node(const struct ext_state *st, const char *name)
{
    void *v = strmap_get(&st->node_idx, name);
    return v ? (int)((intptr_t)v - 1) : -1;
}

/* ---- accounting --------------------------------------------------------- */

static int gpu_index(const struct ext_state *st, int idx, const char *uuid)
{
    const gs_node *n = &st->cl.nodes[idx];
    for (int g = 0; g < n->num_gpus; g++)
        if (strcmp(st->nodes[idx].gpus[g].uuid, uuid) == 0)
            return g;
    return -1;
}

static void account(struct ext_state *st, struct ext_pod *p, int sign)
{
    if (p->node_idx < 0 || (sign > 0) == (p->counted != 0))
        return;
    gs_node *n = &st->cl.nodes[p->node_idx];
    struct ext_node *en = &st->nodes[p->node_idx];
    for (int i = 0; i < p->nuse; i++) {
        struct ext_use *u = &p->use[i];
        if (sign > 0)
            u->gi = (int8_t)gpu_index(st, p->node_idx, u->uuid);
        if (u->gi < 0)
            continue;
        gs_sched_gpu *g = &n->gpus[u->gi];
        g->milli_used += sign * u->milli;
        g->mem_used_mib += sign * u->mem;
        g->slots_used += sign;
    }
    for (int i = 0; i < p->nrid; i++) {
        struct ext_rid *r = &p->rid[i];
        if (sign > 0)
            r->gi = (int8_t)gpu_index(st, p->node_idx, r->uuid);
        if (r->gi < 0 || r->k < 0 || r->k >= EXT_MAX_REPLICAS)
            continue;
        uint16_t *ref = &en->gpus[r->gi].refs[r->k];
        if (sign > 0)
            *ref = (uint16_t)(*ref + 1);
        else if (*ref > 0)
            *ref = (uint16_t)(*ref - 1);
    }
    p->counted = sign > 0;
    n->version++;
    st->generation++;
}

struct recount_ctx {
    struct ext_state *st;
    int idx;
    const char *name;
};

static void recount_one(const char *key, void *val, void *ud)
{
    struct recount_ctx *c = ud;
    struct ext_pod *p = val;
    if (p->src != EXT_ASSIGNED && p->src != EXT_CLAIMED)
        return;
    if (c->name && p->node_idx < 0 && strcmp(p->node, c->name) == 0)
        p->node_idx = c->idx;
    if (p->node_idx == c->idx) {
        p->counted = 0;
        account(c->st, p, +1);
    }
}

/* Recomputes a node's usage from its pods (after its GPUs changed). */
static void recount(struct ext_state *st, int idx)
{
    gs_node *n = &st->cl.nodes[idx];
    for (int g = 0; g < GS_MAX_GPUS_PER_NODE; g++) {
        n->gpus[g].milli_used = 0;
        n->gpus[g].mem_used_mib = 0;
        n->gpus[g].slots_used = 0;
        memset(st->nodes[idx].gpus[g].refs, 0, sizeof st->nodes[idx].gpus[g].refs);
    }
    n->version++;
    struct recount_ctx c = { st, idx, st->nodes[idx].name };
    strmap_foreach(&st->pods, recount_one, &c);
}

/* ---- nodes -------------------------------------------------------------- */

static int add_node(struct ext_state *st, const char *name)
{
    char *nm = strdup(name);
    if (!nm)
        return -1;
    size_t cap = st->cl.cap_nodes;
    int idx = gs_cluster_add_node(&st->cl, nm, BIG_CPU, BIG_CPU, -1, 0, 1000);
    if (idx < 0) {
        free(nm);
        return -1;
    }
    if (st->cl.cap_nodes != cap || !st->nodes) {
        struct ext_node *nn = realloc(st->nodes, st->cl.cap_nodes * sizeof *nn);
        if (!nn) {
            st->cl.num_nodes--;
            free(nm);
            return -1;
        }
        st->nodes = nn;
    }
    memset(&st->nodes[idx], 0, sizeof st->nodes[idx]);
    st->nodes[idx].name = nm;
    if (strmap_put(&st->node_idx, nm, (void *)(intptr_t)(idx + 1)) != 0)
        return -1;
    return idx;
}

/* Applies the inventory annotation to node idx; 0, or -1 (node gets no GPUs). */
static int apply_inventory(struct ext_state *st, int idx, const char *text)
{
    gs_node *n = &st->cl.nodes[idx];
    struct ext_node *en = &st->nodes[idx];
    n->num_gpus = 0;
    n->model = -1;
    en->has_inv = 0;
    if (!text)
        return 0;
    json_error_t je;
    json_t *inv = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    json_t *gpus = json_object_get(inv, "gpus");
    int rc = -1;
    if (!json_is_object(inv) || json_integer_value(json_object_get(inv, "v")) != 1 || !json_is_array(gpus) ||
        json_array_size(gpus) > GS_MAX_GPUS_PER_NODE)
        goto out;
    for (size_t i = 0; i < json_array_size(gpus); i++) {
        json_t *g = json_array_get(gpus, i);
        const char *uuid = json_string_value(json_object_get(g, "uuid"));
        const char *model = json_string_value(json_object_get(g, "model"));
        json_int_t mem = json_integer_value(json_object_get(g, "memory_mib"));
        json_int_t reps = json_integer_value(json_object_get(g, "replicas"));
        json_t *numa = json_object_get(g, "numa");
        if (!uuid || !*uuid || strlen(uuid) >= sizeof en->gpus[i].uuid || mem <= 0 || reps <= 0)
            goto out;
        int m = gs_cluster_model(&st->cl, model && *model ? model : "unknown");
        if (i == 0)
            n->model = m;
        gs_sched_gpu *gg = &n->gpus[i];
        gg->milli_total = GS_MILLI_PER_GPU;
        gg->mem_total_mib = mem;
        gg->slots_total = (int32_t)(reps > EXT_MAX_REPLICAS ? EXT_MAX_REPLICAS : reps);
        gg->numa = json_is_integer(numa) ? (int32_t)json_integer_value(numa) : 0;
        gg->healthy = json_is_true(json_object_get(g, "healthy"));
        snprintf(en->gpus[i].uuid, sizeof en->gpus[i].uuid, "%s", uuid);
        en->gpus[i].replicas = gg->slots_total;
    }
    n->num_gpus = (int32_t)json_array_size(gpus);
    en->has_inv = 1;
    rc = 0;
out:
    if (rc != 0) {
        n->num_gpus = 0;
        kube_log(KUBE_LOG_WARN, "node %s: unreadable %s annotation; node gets no GPUs", en->name, GS_ANN_INVENTORY);
    }
    json_decref(inv);
    return rc;
}

static void add_rid(struct ext_pod *p, const char *uuid, int16_t k)
{
    for (int i = 0; i < p->nrid; i++)
        if (p->rid[i].k == k && strcmp(p->rid[i].uuid, uuid) == 0)
            return;
    if (p->nrid >= (int)(sizeof p->rid / sizeof p->rid[0]))
        return;
    struct ext_rid *r = &p->rid[p->nrid++];
    snprintf(r->uuid, sizeof r->uuid, "%s", uuid);
    r->k = k;
    r->gi = -1;
}

/* The pod's shares from assignment a, or from held (a mapped onto the
 * replicas the node agent recorded in gpuslice.io/allocated: the GPUs the
 * pod really got, gs_assignment_rebind, the agent's own rule) when given.
 * Both a's and held's replica IDs stay reserved while the pod lives: the
 * agent refuses an Allocate for IDs two live assignments name. */
static int fill_use(struct ext_pod *p, const struct gs_assignment *a, const struct gs_assignment *held)
{
    const struct gs_assignment *on = held ? held : a;
    p->nuse = on->ngpus;
    p->nrid = 0;
    for (int pass = 0; pass < 2; pass++) {
        const struct gs_assignment *src = pass == 0 ? a : held;
        for (int i = 0; src && i < src->ngpus; i++) {
            unsigned k = 0;
            char uu[GS_UUID_MAX];
            gs_replica_split(src->gpus[i].replica, uu, sizeof uu, &k);
            add_rid(p, src->gpus[i].uuid, (int16_t)(k < EXT_MAX_REPLICAS ? k : EXT_MAX_REPLICAS));
        }
    }
    for (int i = 0; i < on->ngpus; i++) {
        struct ext_use *u = &p->use[i];
        unsigned k = 0;
        char uu[GS_UUID_MAX];
        gs_replica_split(on->gpus[i].replica, uu, sizeof uu, &k);
        snprintf(u->uuid, sizeof u->uuid, "%s", on->gpus[i].uuid);
        u->k = (int16_t)(k < EXT_MAX_REPLICAS ? k : EXT_MAX_REPLICAS);
        u->mem = (int64_t)on->gpus[i].memory_mib;
        u->milli = gs_cores_milli(on->gpus[i].cores);
        u->gi = -1;
    }
    return 0;
}

static struct ext_pod *pod_new(struct ext_state *st, const char *uid)
{
    struct ext_pod *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    snprintf(p->uid, sizeof p->uid, "%s", uid);
    p->node_idx = -1;
    if (strmap_put(&st->pods, p->uid, p) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

static void pod_drop(struct ext_state *st, struct ext_pod *p)
{
    account(st, p, -1);
    strmap_del(&st->pods, p->uid);
    free(p->ann);
    free(p);
}

/* Pods to drop once a pass over st->pods is done (the map must not change
 * under strmap_foreach). A pod that does not fit when memory runs out stays
 * for the next pass. */
struct drop_list {
    struct ext_pod **pods;
    size_t n, cap;
};

static void drop_list_add(struct drop_list *l, struct ext_pod *p)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct ext_pod **d = realloc(l->pods, cap * sizeof *d);
        if (!d)
            return;
        l->pods = d;
        l->cap = cap;
    }
    l->pods[l->n++] = p;
}

static void drop_list_apply(struct ext_state *st, struct drop_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        pod_drop(st, l->pods[i]);
    free(l->pods);
}

struct claim_pass {
    struct ext_state *st;
    int idx;
    json_t *seen; /* uid -> true */
    struct drop_list drop;
};

static void collect_unseen_claim(const char *key, void *val, void *ud)
{
    struct claim_pass *c = ud;
    struct ext_pod *p = val;
    if (p->src == EXT_CLAIMED && p->node_idx == c->idx && !json_object_get(c->seen, p->uid))
        drop_list_add(&c->drop, p);
}

static void apply_claims(struct ext_state *st, int idx, json_t *claims, time_t now)
{
    struct claim_pass c = { st, idx, json_object(), { NULL, 0, 0 } };
    for (size_t i = 0; i < json_array_size(claims); i++) {
        json_t *cl = json_array_get(claims, i);
        const char *uid = json_string_value(json_object_get(cl, "uid"));
        const char *pod = json_string_value(json_object_get(cl, "pod"));
        json_int_t t = json_integer_value(json_object_get(cl, "t"));
        json_t *aj = json_object_get(cl, "assignment");
        if (!uid || !*uid || strlen(uid) >= KUBE_POD_UID_MAX || !pod || now - t > st->claim_ttl)
            continue;
        struct ext_pod *p = strmap_get(&st->pods, uid);
        if (p && p->src != EXT_CLAIMED && p->src != EXT_NONE) {
            continue; /* its pod already counts (or is gone) */
        }
        json_object_set_new(c.seen, uid, json_true());
        if (p)
            continue;
        char *txt = json_dumps(aj, JSON_COMPACT);
        struct gs_assignment a;
        char err[256];
        if (!txt || gs_assignment_parse(txt, strlen(txt), &a, err, sizeof err) != 0) {
            kube_log(KUBE_LOG_WARN, "node %s: ignoring malformed claim for %s: %s", st->nodes[idx].name, uid,
                     txt ? err : "no assignment");
            free(txt);
            continue;
        }
        free(txt);
        if (!(p = pod_new(st, uid)))
            continue;
        snprintf(p->key, sizeof p->key, "%s", pod);
        snprintf(p->node, sizeof p->node, "%s", st->nodes[idx].name);
        p->node_idx = idx;
        p->src = EXT_CLAIMED;
        p->t = (time_t)t;
        fill_use(p, &a, NULL);
        account(st, p, +1);
    }
    /* A claim that left the node: its pod got its assignment (counted from
     * the pod) or its bind was rolled back. Forget it, no tombstone. */
    strmap_foreach(&st->pods, collect_unseen_claim, &c);
    drop_list_apply(st, &c.drop);
    json_decref(c.seen);
}

void ext_state_node_event(struct ext_state *st, const char *type, json_t *node, time_t now)
{
    json_t *md = json_object_get(node, "metadata");
    const char *name = json_string_value(json_object_get(md, "name"));
    const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
    if (!name || !*name || strlen(name) > 253)
        return;
    int idx = ext_state_find_node(st, name);
    if (strcmp(type, "DELETED") == 0) {
        if (idx >= 0) {
            st->nodes[idx].deleted = 1;
            st->cl.nodes[idx].healthy = false;
            st->cl.nodes[idx].version++;
            st->generation++;
        }
        return;
    }
    int fresh = idx < 0;
    if (fresh && (idx = add_node(st, name)) < 0)
        return;
    struct ext_node *en = &st->nodes[idx];
    en->deleted = 0;
    st->cl.nodes[idx].healthy = true;
    snprintf(en->rv, sizeof en->rv, "%s", rv ? rv : "");
    json_t *ann = json_object_get(md, "annotations");
    const char *inv = json_string_value(json_object_get(ann, GS_ANN_INVENTORY));
    if (fresh || !en->inv_text != !inv || (inv && strcmp(inv, en->inv_text) != 0)) {
        apply_inventory(st, idx, inv);
        free(en->inv_text);
        en->inv_text = inv ? strdup(inv) : NULL;
        recount(st, idx);
    }
    const char *ctext = json_string_value(json_object_get(ann, GS_ANN_CLAIMS));
    json_t *croot = ctext ? json_loads(ctext, JSON_REJECT_DUPLICATES, NULL) : NULL;
    json_t *claims = json_object_get(croot, "claims");
    if (ctext && (json_integer_value(json_object_get(croot, "v")) != 1 || !json_is_array(claims)))
        kube_log(KUBE_LOG_WARN, "node %s: unreadable %s annotation ignored", name, GS_ANN_CLAIMS);
    json_decref(en->claims);
    en->claims = json_is_array(claims) ? json_incref(claims) : NULL;
    apply_claims(st, idx, en->claims, now);
    json_decref(croot);
    st->cl.nodes[idx].version++;
    st->generation++;
}

/* ---- pods --------------------------------------------------------------- */

static int terminal(json_t *pod)
{
    const char *ph = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    return ph && (strcmp(ph, "Succeeded") == 0 || strcmp(ph, "Failed") == 0);
}

void ext_state_pod_event(struct ext_state *st, const char *type, json_t *pod, time_t now)
{
    json_t *md = json_object_get(pod, "metadata");
    const char *uid = json_string_value(json_object_get(md, "uid"));
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    if (!uid || !*uid || strlen(uid) >= KUBE_POD_UID_MAX || !name)
        return;
    struct ext_pod *p = strmap_get(&st->pods, uid);
    if (strcmp(type, "DELETED") == 0 || terminal(pod)) {
        if (!p && !(p = pod_new(st, uid)))
            return;
        account(st, p, -1); /* a deleted or finished pod frees its share at once */
        p->src = EXT_GONE;
        p->t = now;
        free(p->ann);
        p->ann = NULL;
        return;
    }
    json_t *anns = json_object_get(md, "annotations");
    const char *ann = json_string_value(json_object_get(anns, GS_ANN_ASSIGNMENT));
    const char *alloc = json_string_value(json_object_get(anns, GS_ANN_ALLOCATED));
    if (p && p->src == EXT_GONE)
        return;
    /* With a key, a bound pod stays counted as last verified when its
     * assignment goes or turns to garbage: only the extender withdraws one,
     * from a pod it failed to bind, and the pod's owner must not shrink
     * the books by deleting it */
    const char *bound_to = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    int keep = st->sigkey && bound_to && p && p->src == EXT_ASSIGNED;
    if (!ann) {
        if (keep)
            kube_log(KUBE_LOG_WARN, "pod %s/%s: its %s was removed; still counted as last verified", ns ? ns : "", name,
                     GS_ANN_ASSIGNMENT);
        else if (p && p->src == EXT_ASSIGNED)
            pod_drop(st, p); /* the assignment was withdrawn (failed bind) */
        return;
    }
    /* What it is counted from: the assignment and, once present, allocated. */
    size_t klen = strlen(ann) + (alloc ? strlen(alloc) : 0) + 2;
    char *key = malloc(klen);
    if (!key)
        return;
    snprintf(key, klen, "%s\n%s", ann, alloc ? alloc : "");
    if (p && p->src == EXT_ASSIGNED && p->ann && strcmp(p->ann, key) == 0) {
        free(key);
        return;
    }
    struct gs_assignment a, held;
    char err[256];
    if (gs_assignment_parse(ann, strlen(ann), &a, err, sizeof err) != 0) {
        kube_log(KUBE_LOG_WARN, "pod %s/%s: %s; %s", ns ? ns : "", name, err,
                 keep ? "still counted as last verified" : "not counted");
        if (!keep && p && p->src == EXT_ASSIGNED)
            pod_drop(st, p);
        free(key);
        return;
    }
    /* Only what this extender signed counts: an assignment the pod's owner
     * edited must not inflate (or shrink) the books. A pod already counted
     * keeps being counted as it was. */
    const char *node = a.node[0] ? a.node : bound_to;
    const char *why = NULL;
    if (st->sigkey && gs_sig_verify(st->sigkey, uid, node ? node : "", ann,
                                    json_string_value(json_object_get(anns, GS_ANN_ASSIGNMENT_SIG)), &why) != 0) {
        kube_log(KUBE_LOG_WARN, "pod %s/%s: the signature of its %s: %s; %s", ns ? ns : "", name, GS_ANN_ASSIGNMENT,
                 why, p && p->src == EXT_ASSIGNED ? "still counted as last verified" : "not counted");
        free(key);
        return;
    }
    /* Counted where the node agent says it really is (it may have accepted
     * replicas of other GPUs than assigned, when the pod fits there). */
    int have_held = 0;
    if (alloc) {
        char reps[GS_ASSIGN_MAX_GPUS][GS_REPLICA_ID_MAX];
        int k = gs_allocated_parse(alloc, strlen(alloc), reps, GS_ASSIGN_MAX_GPUS, err, sizeof err);
        have_held =
            k > 0 && gs_assignment_rebind(&a, (const char(*)[GS_REPLICA_ID_MAX])reps, k, &held, err, sizeof err) == 0;
        if (!have_held)
            kube_log(KUBE_LOG_WARN, "pod %s/%s: %s unusable (%s); counted by its assignment", ns ? ns : "", name,
                     GS_ANN_ALLOCATED, err);
    }
    if (!node || !*node) {
        free(key);
        return;
    }
    if (p)
        account(st, p, -1);
    else if (!(p = pod_new(st, uid))) {
        free(key);
        return;
    }
    free(p->ann);
    p->ann = key;
    snprintf(p->key, sizeof p->key, "%s/%s", ns ? ns : "", name);
    snprintf(p->node, sizeof p->node, "%s", node);
    p->node_idx = ext_state_find_node(st, node);
    p->src = EXT_ASSIGNED;
    fill_use(p, &a, have_held ? &held : NULL);
    account(st, p, +1);
}

/* ---- housekeeping ------------------------------------------------------- */

struct gc_ctx {
    struct ext_state *st;
    time_t now;
    struct drop_list drop;
};

static void gc_one(const char *key, void *val, void *ud)
{
    struct gc_ctx *c = ud;
    struct ext_pod *p = val;
    int old = c->now - p->t > c->st->claim_ttl;
    if ((p->src == EXT_GONE || p->src == EXT_CLAIMED) && old)
        drop_list_add(&c->drop, p);
}

void ext_state_gc(struct ext_state *st, time_t now)
{
    struct gc_ctx c = { st, now, { NULL, 0, 0 } };
    strmap_foreach(&st->pods, gc_one, &c);
    drop_list_apply(st, &c.drop);
}

json_t *ext_state_live_claims(struct ext_state *st, int idx, time_t now)
{
    /* A claim stays for claim_ttl seconds even after its pod shows its
     * assignment here: another replica's pod watch may lag behind its node
     * watch, and the claim is what keeps it from reusing those GPUs. Only a
     * pod known to be gone ends a claim early. */
    json_t *out = json_array();
    json_t *claims = st->nodes[idx].claims;
    for (size_t i = 0; i < json_array_size(claims); i++) {
        json_t *cl = json_array_get(claims, i);
        const char *uid = json_string_value(json_object_get(cl, "uid"));
        json_int_t t = json_integer_value(json_object_get(cl, "t"));
        struct ext_pod *p = uid ? strmap_get(&st->pods, uid) : NULL;
        if (uid && (!p || p->src != EXT_GONE) && now - t <= st->claim_ttl)
            json_array_append(out, cl);
    }
    return out;
}

void ext_state_forget_missing(struct ext_state *st, json_t *present, time_t now)
{
    for (size_t i = 0; i < st->cl.num_nodes; i++) {
        json_t *claims = st->nodes[i].claims;
        for (size_t j = 0; j < json_array_size(claims); j++) {
            const char *uid = json_string_value(json_object_get(json_array_get(claims, j), "uid"));
            if (!uid || strlen(uid) >= KUBE_POD_UID_MAX || json_object_get(present, uid))
                continue;
            struct ext_pod *p = strmap_get(&st->pods, uid);
            if (!p && !(p = pod_new(st, uid)))
                continue;
            account(st, p, -1);
            p->src = EXT_GONE;
            p->t = now;
        }
    }
}

int ext_state_free_replica(const struct ext_state *st, int idx, int gi)
{
    const struct ext_gpu *g = &st->nodes[idx].gpus[gi];
    for (int k = 0; k < g->replicas; k++)
        if (g->refs[k] == 0)
            return k;
    return -1;
}
