/* filter and prioritize: every decision goes through the policy engine. */
#include "verbs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics.h"
#include "place.h"

int ext_candidates(json_t *args, const char ***names, int *as_objects, char *err, size_t errlen)
{
    *names = NULL;
    if (!json_is_object(args)) {
        snprintf(err, errlen, "ExtenderArgs must be a JSON object");
        return -1;
    }
    json_t *nn = json_object_get(args, "NodeNames");
    json_t *items = json_object_get(json_object_get(args, "Nodes"), "items");
    json_t *src = json_is_array(nn) ? nn : items;
    *as_objects = !json_is_array(nn);
    if (!json_is_array(src)) {
        snprintf(err, errlen, "ExtenderArgs has neither NodeNames (nodeCacheCapable: true) "
                 "nor Nodes.items (nodeCacheCapable: false)");
        return -1;
    }
    size_t n = json_array_size(src);
    const char **out = calloc(n ? n : 1, sizeof *out);
    if (!out) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(src, i);
        const char *s = *as_objects
                            ? json_string_value(json_object_get(json_object_get(e, "metadata"),
                                                                "name"))
                            : json_string_value(e);
        if (!s || !*s) {
            snprintf(err, errlen, "%s[%zu] has no node name",
                     *as_objects ? "Nodes.items" : "NodeNames", i);
            free(out);
            return -1;
        }
        out[i] = s;
    }
    *names = out;
    return (int)n;
}

/* Reads the pod; 1 GPU pod, 0 not ours, -1 error (err set). */
static int read_pod(json_t *args, struct gs_podspec *ps, char *err, size_t errlen)
{
    json_t *pod = json_object_get(args, "Pod");
    if (!json_is_object(pod)) {
        snprintf(err, errlen, "ExtenderArgs has no Pod object");
        return -1;
    }
    return gs_podspec_parse(pod, ps, err, errlen);
}

/* Nodes passed as objects may be new to the cache (nodeCacheCapable false
 * and a watch that lags): learn them. */
static void learn_nodes(struct ext_state *st, json_t *args)
{
    json_t *items = json_object_get(json_object_get(args, "Nodes"), "items");
    time_t now = time(NULL);
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *o = json_array_get(items, i);
        const char *nm = json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
        if (nm && ext_state_find_node(st, nm) < 0)
            ext_state_node_event(st, "ADDED", o, now);
    }
}

static json_t *filter_error(const char *msg)
{
    return json_pack("{s:n,s:n,s:{},s:{},s:s}", "Nodes", "NodeNames", "FailedNodes",
                     "FailedAndUnresolvableNodes", "Error", msg);
}

json_t *ext_filter(struct ext_state *st, json_t *args, int *bad)
{
    char err[512];
    struct gs_podspec ps;
    const char **names;
    int as_obj;
    *bad = 0;
    int n = ext_candidates(args, &names, &as_obj, err, sizeof err);
    if (n < 0) {
        *bad = 1;
        return filter_error(err);
    }
    int gpu = read_pod(args, &ps, err, sizeof err);
    if (gpu < 0) {
        free(names);
        return filter_error(err);
    }
    json_t *src = as_obj ? json_object_get(json_object_get(args, "Nodes"), "items")
                         : json_object_get(args, "NodeNames");
    json_t *pass = json_array(), *failed = json_object(), *unres = json_object();
    pthread_mutex_lock(&st->mu);
    if (as_obj)
        learn_nodes(st, args);
    struct ext_want w;
    if (gpu)
        ext_want_init(st, &ps, &w);
    for (int i = 0; i < n; i++) {
        int idx = gpu ? ext_state_find_node(st, names[i]) : -1;
        char why[400];
        bool unr = true;
        if (gpu && idx < 0) {
            snprintf(why, sizeof why, "gpuslice: node unknown to the extender's cache "
                     "(no GPU inventory seen)");
        } else if (!gpu || ext_explain(st, &w, idx, why, sizeof why, &unr) == GS_FIT) {
            json_array_append(pass, json_array_get(src, (size_t)i));
            continue;
        }
        json_object_set_new(unr ? unres : failed, names[i], json_string(why));
    }
    pthread_mutex_unlock(&st->mu);
    free(names);
    ext_metrics_filter_nodes(json_array_size(pass), (uint64_t)n - json_array_size(pass));
    json_t *res = json_pack("{s:o,s:o,s:s}", "FailedNodes", failed,
                            "FailedAndUnresolvableNodes", unres, "Error", "");
    if (as_obj) {
        json_object_set_new(res, "Nodes", json_pack("{s:s,s:s,s:{},s:o}", "kind", "NodeList",
                                                    "apiVersion", "v1", "metadata", "items",
                                                    pass));
        json_object_set_new(res, "NodeNames", json_null());
    } else {
        json_object_set_new(res, "Nodes", json_null());
        json_object_set_new(res, "NodeNames", pass);
    }
    return res;
}

json_t *ext_prioritize(struct ext_state *st, json_t *args, int *bad)
{
    char err[512];
    struct gs_podspec ps;
    const char **names;
    int as_obj;
    *bad = 0;
    int n = ext_candidates(args, &names, &as_obj, err, sizeof err);
    int rc = n >= 0 ? read_pod(args, &ps, err, sizeof err) : -1;
    if (rc < 0) {
        free(names);
        *bad = 1;
        return json_pack("{s:s}", "Error", err);
    }
    int gpu = rc == 1;
    double *score = calloc((size_t)(n ? n : 1), sizeof *score);
    char *ok = calloc((size_t)(n ? n : 1), 1);
    json_t *list = json_array();
    if (!score || !ok) {
        free(score);
        free(ok);
        free(names);
        return list;
    }
    double lo = 0, hi = 0;
    int any = 0;
    pthread_mutex_lock(&st->mu);
    struct ext_want w;
    if (gpu)
        ext_want_init(st, &ps, &w);
    for (int i = 0; gpu && i < n; i++) {
        int idx = ext_state_find_node(st, names[i]);
        gs_placement pl;
        if (idx < 0 || !ext_score(st, &w, idx, w.policy, &score[i], &pl))
            continue;
        ok[i] = 1;
        if (!any || score[i] < lo)
            lo = score[i];
        if (!any || score[i] > hi)
            hi = score[i];
        any = 1;
    }
    pthread_mutex_unlock(&st->mu);
    /* Engine scores are "higher is better" on their own scale; map the
     * feasible range onto 0..10 so kube-scheduler's weight applies evenly. */
    for (int i = 0; i < n; i++) {
        json_int_t s = 0;
        if (ok[i])
            s = hi > lo ? (json_int_t)(0.5 + EXT_MAX_PRIORITY * (score[i] - lo) / (hi - lo))
                        : EXT_MAX_PRIORITY;
        json_array_append_new(list, json_pack("{s:s,s:I}", "Host", names[i], "Score", s));
    }
    free(score);
    free(ok);
    free(names);
    return list;
}
