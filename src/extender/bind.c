#define _GNU_SOURCE /* asprintf */
/* bind: decide the GPUs on the chosen node with the policy engine, claim them
 * on the Node (conditional on its resourceVersion: two replicas racing for
 * the same node cannot both win), write the pod's assignment, create the
 * Binding. A 409 on the node means someone else changed it: re-read and
 * decide again. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "annotation.h"
#include "assign_sig.h"
#include "ext.h"
#include "metrics.h"
#include "place.h"

#define NODE_ATTEMPTS 10
#define POD_ATTEMPTS 3

static json_t *result(const char *msg)
{
    return json_pack("{s:s}", "Error", msg);
}

/* The message of a Status body, or the raw status. */
static void api_message(const char *body, int status, char *out, size_t outlen)
{
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(j, "message"));
    snprintf(out, outlen, "HTTP %d%s%s", status, m ? ": " : "", m ? m : "");
    json_decref(j);
}

static int name_ok(const char *s)
{
    if (!s || !*s || strlen(s) > 253)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '.'))
            return 0;
    return 1;
}

static char *pod_path(const char *ns, const char *name, const char *sub)
{
    char *p = NULL;
    if (asprintf(&p, "/api/v1/namespaces/%s/pods/%s%s", ns, name, sub) < 0)
        return NULL;
    return p;
}

/* Builds the assignment for placement pl on node idx (caller holds mu). */
static json_t *assignment(struct ext_state *st, const struct ext_want *w, int idx, const gs_placement *pl, char *err,
                          size_t errlen)
{
    json_t *gpus = json_array(), *reps = json_array();
    for (int i = 0; i < pl->num_gpus; i++) {
        int gi = (uint8_t)pl->gpus[i]; /* a GPU index, 0..GS_MAX_GPUS_PER_NODE */
        int k = ext_state_free_replica(st, idx, gi);
        const char *uuid = st->nodes[idx].gpus[gi].uuid;
        if (k < 0) {
            snprintf(err, errlen, "no free replica ID on GPU %s", uuid);
            json_decref(gpus);
            json_decref(reps);
            return NULL;
        }
        int64_t mem = w->ps.mem_mib ? w->ps.mem_mib : st->cl.nodes[idx].gpus[gi].mem_total_mib;
        json_array_append_new(
            gpus, json_pack("{s:s,s:I,s:i}", "uuid", uuid, "memory_mib", (json_int_t)mem, "cores", w->ps.cores));
        char id[GS_REPLICA_ID_MAX];
        snprintf(id, sizeof id, "%s::%d", uuid, k);
        json_array_append_new(reps, json_string(id));
    }
    return json_pack("{s:i,s:s,s:o,s:o,s:s}", "v", GS_ANN_VERSION, "node", st->nodes[idx].name, "gpus", gpus,
                     "replicas", reps, "mode", w->ps.opts.share_mode ? "share" : "cap");
}

static void feed(struct ext_ctx *x, int node, json_t *obj)
{
    pthread_mutex_lock(&x->st.mu);
    if (node)
        ext_state_node_event(&x->st, "MODIFIED", obj, time(NULL));
    else
        ext_state_pod_event(&x->st, "MODIFIED", obj, time(NULL));
    pthread_mutex_unlock(&x->st.mu);
}

/* The node's claims annotation holding claims (new reference consumed). */
static json_t *claims_annotation(json_t *claims)
{
    json_t *root = json_pack("{s:i,s:o}", "v", 1, "claims", claims);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    json_t *ann = text ? json_pack("{s:s}", GS_ANN_CLAIMS, text) : NULL;
    free(text);
    return ann;
}

struct claim_try {
    struct ext_ctx *x;
    const struct gs_podspec *ps;
    const char *node, *uid, *key;
    json_t *a; /* the assignment of the last attempt */
};

/* Decides the placement from the cache (refreshed with the node as re-read
 * after a conflict) and returns the node's live claims plus this one. */
static json_t *claim_annotation(json_t *cur, int attempt, void *ud, char rv[KUBE_RV_MAX], char *why, size_t whylen)
{
    struct claim_try *c = ud;
    struct ext_state *st = &c->x->st;
    if (attempt > 0) {
        ext_metrics_bind_conflict();
        feed(c->x, 1, cur);
    }
    json_decref(c->a);
    c->a = NULL;
    time_t now = time(NULL);
    pthread_mutex_lock(&st->mu);
    int idx = ext_state_find_node(st, c->node);
    struct ext_want w;
    double score;
    gs_placement pl;
    bool unres;
    if (idx < 0) {
        snprintf(why, whylen, "node %s is not in the extender's cache", c->node);
    } else {
        ext_want_init(st, c->ps, &w);
        if (!ext_score(st, &w, idx, w.gpu_policy, &score, &pl)) {
            char expl[400];
            ext_explain(st, &w, idx, expl, sizeof expl, &unres);
            snprintf(why, whylen, "pod no longer fits node %s: %s", c->node, expl);
        } else {
            c->a = assignment(st, &w, idx, &pl, why, whylen);
        }
    }
    if (!c->a) {
        pthread_mutex_unlock(&st->mu);
        return NULL;
    }
    snprintf(rv, KUBE_RV_MAX, "%s", st->nodes[idx].rv);
    json_t *claims = ext_state_live_claims(st, idx, now);
    pthread_mutex_unlock(&st->mu);
    json_array_append_new(
        claims, json_pack("{s:s,s:s,s:I,s:O}", "uid", c->uid, "pod", c->key, "t", (json_int_t)now, "assignment", c->a));
    return claims_annotation(claims);
}

/* Claims a placement on the node; returns the assignment text or NULL. */
static char *claim(struct ext_ctx *x, const struct gs_podspec *ps, const char *node, const char *uid, const char *key,
                   char *msg, size_t msglen)
{
    char *path = NULL;
    if (asprintf(&path, "/api/v1/nodes/%s", node) < 0)
        return NULL;
    struct claim_try c = { x, ps, node, uid, key, NULL };
    json_t *out = NULL;
    char err[400];
    int s = kube_annotate_retry(x->kc, path, NULL, NODE_ATTEMPTS, claim_annotation, &c, &out, err, sizeof err);
    char *text = NULL;
    if (s == 200) {
        if (out)
            feed(x, 1, out);
        text = json_dumps(c.a, JSON_COMPACT);
    } else if (s == KUBE_RETRY_GAVE_UP) {
        snprintf(msg, msglen, "%s", err);
    } else if (s == KUBE_RETRY_CONFLICTS) {
        snprintf(msg, msglen, "node %s kept changing (%d conflicts)", node, NODE_ATTEMPTS);
    } else if (s == KUBE_RETRY_REREAD) {
        snprintf(msg, msglen, "re-reading node %s after a conflict failed", node);
    } else {
        snprintf(msg, msglen, "patching node claims: %s", s < 0 ? err : "rejected");
    }
    json_decref(out);
    json_decref(c.a);
    free(path);
    return text;
}

/* The node's claims less the pod's, from the node as read (into the cache). */
static json_t *unclaim_annotation(json_t *cur, int attempt, void *ud, char rv[KUBE_RV_MAX], char *why, size_t whylen)
{
    struct claim_try *c = ud;
    (void)attempt;
    feed(c->x, 1, cur);
    pthread_mutex_lock(&c->x->st.mu);
    int idx = ext_state_find_node(&c->x->st, c->node);
    json_t *keep = json_array(), *all = idx >= 0 ? c->x->st.nodes[idx].claims : NULL;
    for (size_t i = 0; i < json_array_size(all); i++) {
        const char *u = json_string_value(json_object_get(json_array_get(all, i), "uid"));
        if (!u || strcmp(u, c->uid) != 0)
            json_array_append(keep, json_array_get(all, i));
    }
    pthread_mutex_unlock(&c->x->st.mu);
    if (idx < 0) {
        snprintf(why, whylen, "node %s left the cache", c->node);
        json_decref(keep);
        return NULL;
    }
    (void)rv; /* preset to cur's version, the one to write against */
    return claims_annotation(keep);
}

/* Takes a claim back off the node (after a failed bind); best effort. */
static void unclaim(struct ext_ctx *x, const char *node, const char *uid)
{
    char *path = NULL;
    if (asprintf(&path, "/api/v1/nodes/%s", node) < 0)
        return;
    json_t *cur = NULL, *out = NULL;
    char err[256];
    struct claim_try c = { x, NULL, node, uid, NULL, NULL };
    if (kube_get_json(x->kc, path, &cur, err, sizeof err) == 200 &&
        kube_annotate_retry(x->kc, path, cur, NODE_ATTEMPTS, unclaim_annotation, &c, &out, err, sizeof err) == 200 &&
        out)
        feed(x, 1, out);
    json_decref(out);
    json_decref(cur);
    free(path);
}

struct pod_write {
    const char *uid, *text, *sig; /* sig NULL: no key, remove any */
};

/* The assignment annotations, while the pod is still the one we decided for. */
static json_t *assignment_annotations(json_t *cur, int attempt, void *ud, char rv[KUBE_RV_MAX], char *why,
                                      size_t whylen)
{
    const struct pod_write *w = ud;
    json_t *meta = json_object_get(cur, "metadata");
    const char *u = json_string_value(json_object_get(meta, "uid"));
    const char *have = json_string_value(json_object_get(json_object_get(meta, "annotations"), GS_ANN_ASSIGNMENT));
    (void)attempt;
    if (!rv[0] || !u || strcmp(u, w->uid) != 0) {
        snprintf(why, whylen, "pod was replaced while binding");
        return NULL;
    }
    /* another replica's bind of the same pod (kube-scheduler retried it
     * there) recorded its own since we read the pod: overwritten, the pod
     * went to one node with the other's assignment, or with none once that
     * bind undid */
    if (have && strcmp(have, w->text) != 0) {
        snprintf(why, whylen, "another bind recorded an assignment for this pod meanwhile");
        return NULL;
    }
    return json_pack("{s:s,s:s?}", GS_ANN_ASSIGNMENT, w->text, GS_ANN_ASSIGNMENT_SIG, w->sig);
}

/* Writes the assignment on the pod, conditional on the pod's version, with
 * its signature for this pod on this node when a key is configured. */
static int record(struct ext_ctx *x, const char *ppath, json_t *pod, const char *uid, const char *node,
                  const char *text, char *msg, size_t msglen)
{
    char sig[GS_SIG_TEXT_MAX];
    if (x->st.sigkey && gs_sig_make(x->st.sigkey, uid, node, text, sig) != 0) {
        snprintf(msg, msglen, "signing the assignment failed");
        return -1;
    }
    struct pod_write w = { uid, text, x->st.sigkey ? sig : NULL };
    json_t *out = NULL;
    char err[256];
    int s = kube_annotate_retry(x->kc, ppath, pod, POD_ATTEMPTS, assignment_annotations, &w, &out, err, sizeof err);
    if (s == 200 && out)
        feed(x, 0, out);
    json_decref(out);
    if (s == 200)
        return 0;
    if (s == KUBE_RETRY_GAVE_UP)
        snprintf(msg, msglen, "%s", err);
    else if (s == KUBE_RETRY_CONFLICTS)
        snprintf(msg, msglen, "pod kept changing while binding");
    else if (s == KUBE_RETRY_REREAD)
        snprintf(msg, msglen, "re-reading the pod after a conflict failed");
    else
        snprintf(msg, msglen, "recording the assignment on the pod failed: %s",
                 s < 0 ? err : "rejected by the API server");
    return -1;
}

static int create_binding(struct ext_ctx *x, const char *ns, const char *name, const char *uid, const char *node,
                          char *msg, size_t msglen)
{
    char *path = pod_path(ns, name, "/binding");
    json_t *b = json_pack("{s:s,s:s,s:{s:s,s:s,s:s},s:{s:s,s:s,s:s}}", "apiVersion", "v1", "kind", "Binding",
                          "metadata", "name", name, "namespace", ns, "uid", uid, "target", "apiVersion", "v1", "kind",
                          "Node", "name", node);
    char *data = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    char *body = NULL, err[256];
    int s = path && data ? kube_request(x->kc, "POST", path, "application/json", data, &body, err, sizeof err) : -1;
    if (s != 200 && s != 201) {
        char am[512];
        if (s < 0)
            snprintf(am, sizeof am, "%s", err);
        else
            api_message(body, s, am, sizeof am);
        snprintf(msg, msglen, "creating the Binding failed: %s", am);
    }
    free(body);
    free(data);
    free(path);
    return s == 200 || s == 201 ? 0 : -1;
}

/* After a Binding that failed: 1 if the pod is bound to node all the same
 * (a retried POST whose first reply was lost is told it is already
 * assigned). *ours: its assignment is still the text we recorded, which
 * an undo may then remove. */
static int bound_anyway(struct ext_ctx *x, const char *ppath, const char *uid, const char *node, const char *text,
                        int *ours)
{
    json_t *pod = NULL;
    char err[256];
    *ours = 0;
    if (kube_get_json(x->kc, ppath, &pod, err, sizeof err) != 200) {
        json_decref(pod);
        return 0;
    }
    json_t *meta = json_object_get(pod, "metadata");
    const char *u = json_string_value(json_object_get(meta, "uid"));
    const char *on = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    const char *have = json_string_value(json_object_get(json_object_get(meta, "annotations"), GS_ANN_ASSIGNMENT));
    int same_pod = u && !strcmp(u, uid);
    int bound = same_pod && on && !strcmp(on, node);
    *ours = same_pod && have && text && !strcmp(have, text);
    if (bound)
        feed(x, 0, pod);
    json_decref(pod);
    return bound;
}

/* The lock of binds to node (FNV-1a of its name). */
static pthread_mutex_t *node_bind_lock(struct ext_ctx *x, const char *node)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *c = (const unsigned char *)node; *c; c++)
        h = (h ^ *c) * 16777619u;
    return &x->bind_mu[h % EXT_BIND_LOCKS];
}

json_t *ext_bind(struct ext_ctx *x, json_t *args, int *bad)
{
    *bad = 0;
    const char *name = json_string_value(json_object_get(args, "PodName"));
    const char *ns = json_string_value(json_object_get(args, "PodNamespace"));
    const char *uid = json_string_value(json_object_get(args, "PodUID"));
    const char *node = json_string_value(json_object_get(args, "Node"));
    if (!json_is_object(args) || !name_ok(name) || !name_ok(ns) || !name_ok(node) || !uid || !*uid ||
        strlen(uid) >= KUBE_POD_UID_MAX) {
        *bad = 1;
        return result("ExtenderBindingArgs needs PodName, PodNamespace, PodUID and Node as "
                      "Kubernetes names");
    }
    if (!x->kc)
        return result("bind: no API server configured");
    char msg[768] = "";
    char *ppath = pod_path(ns, name, "");
    json_t *pod = NULL;
    char err[256];
    json_t *res = NULL;
    pthread_mutex_t *bind_mu = node_bind_lock(x, node);
    pthread_mutex_lock(bind_mu);
    int s = kube_get_json(x->kc, ppath, &pod, err, sizeof err);
    const char *cur_uid = json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid"));
    if (s != 200) {
        snprintf(msg, sizeof msg, "reading pod %s/%s: %s", ns, name,
                 s == 404 ? "not found"
                 : s < 0  ? err
                          : "API error");
        goto out;
    }
    if (!cur_uid || strcmp(cur_uid, uid) != 0) {
        snprintf(msg, sizeof msg, "pod %s/%s has uid %s, not %s (it was recreated)", ns, name, cur_uid ? cur_uid : "?",
                 uid);
        goto out;
    }
    struct gs_podspec ps;
    char key[600];
    snprintf(key, sizeof key, "%s/%s", ns, name);
    int gpu = gs_podspec_parse(pod, &ps, msg, sizeof msg);
    if (gpu < 0)
        goto out;
    const char *have = json_string_value(
        json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), GS_ANN_ASSIGNMENT));
    char *text = NULL;
    if (gpu && have) {
        /* A retried bind: keep the decision already recorded for this node. */
        struct gs_assignment a;
        if (gs_assignment_parse(have, strlen(have), &a, msg, sizeof msg) != 0)
            goto out;
        if (strcmp(a.node, node) != 0) {
            snprintf(msg, sizeof msg, "pod already has an assignment for node %s", a.node);
            goto out;
        }
    } else if (gpu) {
        if (!(text = claim(x, &ps, node, uid, key, msg, sizeof msg)))
            goto out;
        if (record(x, ppath, pod, uid, node, text, msg, sizeof msg) != 0) {
            free(text);
            unclaim(x, node, uid);
            goto out;
        }
    }
    int ours = 0;
    if (create_binding(x, ns, name, uid, node, msg, sizeof msg) != 0 &&
        !bound_anyway(x, ppath, uid, node, text, &ours)) {
        if (text && ours) {
            /* Undo: the pod stays pending and the GPUs are free again. */
            json_t *undo =
                json_pack("{s:{s:{s:n,s:n}}}", "metadata", "annotations", GS_ANN_ASSIGNMENT, GS_ANN_ASSIGNMENT_SIG);
            json_t *o = NULL;
            if (kube_merge_patch(x->kc, ppath, undo, &o, err, sizeof err) == 200 && o)
                feed(x, 0, o);
            json_decref(o);
            json_decref(undo);
        }
        if (text)
            unclaim(x, node, uid);
        free(text);
        goto out;
    }
    free(text);
    msg[0] = '\0';
out:
    pthread_mutex_unlock(bind_mu);
    json_decref(pod);
    free(ppath);
    res = json_pack("{s:s}", "Error", msg);
    if (msg[0])
        kube_log(KUBE_LOG_WARN, "bind %s/%s -> %s: %s", ns, name, node, msg);
    return res;
}
