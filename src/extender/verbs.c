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
        snprintf(err, errlen,
                 "ExtenderArgs has neither NodeNames (nodeCacheCapable: true) "
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
        const char *s = *as_objects ? json_string_value(json_object_get(json_object_get(e, "metadata"), "name"))
                                    : json_string_value(e);
        if (!s || !*s) {
            snprintf(err, errlen, "%s[%zu] has no node name", *as_objects ? "Nodes.items" : "NodeNames", i);
            free(out);
            return -1;
        }
        out[i] = s;
    }
    *names = out;
    return (int)n;
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

/* ---- answer text ---------------------------------------------------------
 * Answers are written straight into a buffer: building a jansson tree of
 * 1000 names (or 1000 Host/Score objects) and dumping it cost more than the
 * placement decisions themselves (callgrind, bench/results/extender-*.md). */

struct sb {
    char *p;
    size_t n, cap;
    int oom;
};

static int sb_reserve(struct sb *b, size_t add)
{
    if (b->oom)
        return -1;
    if (b->n + add + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + add + 1)
        cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) {
        b->oom = 1;
        return -1;
    }
    b->p = np;
    b->cap = cap;
    return 0;
}

static void sb_put(struct sb *b, const char *s, size_t n)
{
    if (sb_reserve(b, n) != 0)
        return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_puts(struct sb *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* s as a JSON string. s is valid UTF-8 (it came out of a JSON parser, or is
 * our own ASCII text), so only quotes, backslashes and controls need escapes. */
static void sb_str(struct sb *b, const char *s)
{
    size_t n = strlen(s);
    if (sb_reserve(b, 6 * n + 2) != 0)
        return;
    char *o = b->p + b->n;
    *o++ = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            *o++ = '\\';
            *o++ = (char)*c;
        } else if (*c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            memcpy(o, "\\u00", 4);
            o[4] = hex[*c >> 4];
            o[5] = hex[*c & 15];
            o += 6;
        } else {
            *o++ = (char)*c;
        }
    }
    *o++ = '"';
    *o = '\0';
    b->n = (size_t)(o - b->p);
}

static void sb_json(struct sb *b, const json_t *j)
{
    char *t = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t) {
        b->oom = 1;
        return;
    }
    sb_puts(b, t);
    free(t);
}

static char *sb_take(struct sb *b)
{
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    return b->p;
}

static void filter_error_text(struct sb *b, const char *msg)
{
    sb_puts(b, "{\"Nodes\":null,\"NodeNames\":null,\"FailedNodes\":{},"
               "\"FailedAndUnresolvableNodes\":{},\"Error\":");
    sb_str(b, msg);
    sb_puts(b, "}");
}

/* The candidates as read from ExtenderArgs: names (borrowed), and with
 * nodeCacheCapable false the Node objects they came from. */
struct cands {
    const char **names;
    int n;
    json_t *items; /* Nodes.items, or NULL for NodeNames */
};

/* Filter over already-read arguments; appends the ExtenderFilterResult.
 * Returns 1 when that answer carries an Error. */
static int filter_core(struct ext_state *st, json_t *args, json_t *pod, const struct cands *c, struct sb *b)
{
    char err[512];
    struct gs_podspec ps;
    int gpu = json_is_object(pod) ? gs_podspec_parse(pod, &ps, err, sizeof err) : -1;
    if (!json_is_object(pod))
        snprintf(err, sizeof err, "ExtenderArgs has no Pod object");
    if (gpu < 0) {
        filter_error_text(b, err);
        return 1;
    }
    char *pass = calloc((size_t)(c->n ? c->n : 1), 1);
    if (!pass) {
        b->oom = 1;
        return 1;
    }
    struct sb failed = { 0 }, unres = { 0 };
    int npass = 0;
    pthread_mutex_lock(&st->mu);
    if (c->items)
        learn_nodes(st, args);
    struct ext_want w;
    if (gpu)
        ext_want_init(st, &ps, &w);
    for (int i = 0; i < c->n; i++) {
        int idx = gpu ? ext_state_find_node(st, c->names[i]) : -1;
        char why[400];
        bool unr = true;
        if (gpu && idx < 0) {
            snprintf(why, sizeof why,
                     "gpuslice: node unknown to the extender's cache "
                     "(no GPU inventory seen)");
        } else if (!gpu || ext_explain(st, &w, idx, why, sizeof why, &unr) == GS_FIT) {
            pass[i] = 1;
            npass++;
            continue;
        }
        struct sb *f = unr ? &unres : &failed;
        sb_puts(f, f->n ? "," : "");
        sb_str(f, c->names[i]);
        sb_puts(f, ":");
        sb_str(f, why);
    }
    pthread_mutex_unlock(&st->mu);
    ext_metrics_filter_nodes((uint64_t)npass, (uint64_t)(c->n - npass));
    sb_puts(b, "{\"FailedNodes\":{");
    if (failed.n)
        sb_put(b, failed.p, failed.n);
    sb_puts(b, "},\"FailedAndUnresolvableNodes\":{");
    if (unres.n)
        sb_put(b, unres.p, unres.n);
    sb_puts(b, "},\"Error\":\"\",");
    b->oom |= failed.oom | unres.oom;
    free(failed.p);
    free(unres.p);
    sb_puts(b, c->items ? "\"NodeNames\":null,\"Nodes\":{\"kind\":\"NodeList\",\"apiVersion\":"
                          "\"v1\",\"metadata\":{},\"items\":["
                        : "\"Nodes\":null,\"NodeNames\":[");
    for (int i = 0, k = 0; i < c->n; i++) {
        if (!pass[i])
            continue;
        sb_puts(b, k++ ? "," : "");
        if (c->items)
            sb_json(b, json_array_get(c->items, (size_t)i));
        else
            sb_str(b, c->names[i]);
    }
    sb_puts(b, c->items ? "]}}" : "]}");
    free(pass);
    return 0;
}

/* Prioritize over already-read arguments; appends the HostPriorityList or
 * {"Error"} (then *bad). */
static void prioritize_core(struct ext_state *st, json_t *pod, const struct cands *c, struct sb *b, int *bad)
{
    char err[512];
    struct gs_podspec ps;
    int rc = json_is_object(pod) ? gs_podspec_parse(pod, &ps, err, sizeof err) : -1;
    if (!json_is_object(pod))
        snprintf(err, sizeof err, "ExtenderArgs has no Pod object");
    if (rc < 0) {
        *bad = 1;
        sb_puts(b, "{\"Error\":");
        sb_str(b, err);
        sb_puts(b, "}");
        return;
    }
    int n = c->n, gpu = rc == 1;
    double *score = calloc((size_t)(n ? n : 1), sizeof *score);
    char *ok = calloc((size_t)(n ? n : 1), 1);
    if (!score || !ok) {
        free(score);
        free(ok);
        b->oom = 1;
        return;
    }
    double lo = 0, hi = 0;
    int any = 0;
    pthread_mutex_lock(&st->mu);
    struct ext_want w;
    if (gpu)
        ext_want_init(st, &ps, &w);
    for (int i = 0; gpu && i < n; i++) {
        int idx = ext_state_find_node(st, c->names[i]);
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
    sb_puts(b, "[");
    for (int i = 0; i < n; i++) {
        long long s = 0;
        if (ok[i])
            s = hi > lo ? (long long)(0.5 + EXT_MAX_PRIORITY * (score[i] - lo) / (hi - lo)) : EXT_MAX_PRIORITY;
        char num[32];
        sb_puts(b, i ? ",{\"Host\":" : "{\"Host\":");
        sb_str(b, c->names[i]);
        snprintf(num, sizeof num, ",\"Score\":%lld}", s);
        sb_puts(b, num);
    }
    sb_puts(b, "]");
    free(score);
    free(ok);
}

/* Text answer back into a JSON value (the json_t API, used by the fuzzer). */
static json_t *reparse(struct sb *b)
{
    char *t = sb_take(b);
    json_t *j = t ? json_loads(t, 0, NULL) : NULL;
    free(t);
    return j ? j : json_pack("{s:s}", "Error", "out of memory");
}

static int read_cands(json_t *args, struct cands *c, char *err, size_t errlen)
{
    int as_obj = 0;
    c->n = ext_candidates(args, &c->names, &as_obj, err, errlen);
    c->items = as_obj ? json_object_get(json_object_get(args, "Nodes"), "items") : NULL;
    return c->n;
}

json_t *ext_filter(struct ext_state *st, json_t *args, int *bad)
{
    char err[512];
    struct cands c;
    struct sb b = { 0 };
    *bad = 0;
    if (read_cands(args, &c, err, sizeof err) < 0) {
        *bad = 1;
        filter_error_text(&b, err);
    } else {
        filter_core(st, args, json_object_get(args, "Pod"), &c, &b);
    }
    free(c.names);
    return reparse(&b);
}

json_t *ext_prioritize(struct ext_state *st, json_t *args, int *bad)
{
    char err[512];
    struct cands c;
    struct sb b = { 0 };
    *bad = 0;
    if (read_cands(args, &c, err, sizeof err) < 0) {
        *bad = 1;
        sb_puts(&b, "{\"Error\":");
        sb_str(&b, err);
        sb_puts(&b, "}");
    } else {
        prioritize_core(st, json_object_get(args, "Pod"), &c, &b, bad);
    }
    free(c.names);
    return reparse(&b);
}

/* ---- fast path: what kube-scheduler sends with nodeCacheCapable: true ----
 * {"Pod":{...},"Nodes":null,"NodeNames":["n1",...]} in any key order. Only
 * the Pod goes through jansson; the names are split in place. Anything else
 * (other keys, Node objects, escapes or non-ASCII in a name, bad JSON) is
 * left to the general path, which has the exact error messages. */

static const char *ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* A plain string at p ('"'): printable ASCII, no escapes. Returns the
 * closing quote, or NULL. */
static const char *plain_str(const char *p, const char *e)
{
    if (p >= e || *p != '"')
        return NULL;
    for (p++; p < e; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"')
            return p;
        if (ch == '\\' || ch < 0x20 || ch >= 0x7f)
            return NULL;
    }
    return NULL;
}

/* The end (one past) of the object or array at p, by bracket matching that
 * respects strings; its contents are validated by jansson later. */
static const char *skip_value(const char *p, const char *e)
{
    int depth = 0;
    for (; p < e; p++) {
        if (*p == '"') {
            for (p++; p < e && *p != '"'; p++)
                if (*p == '\\' && ++p >= e)
                    return NULL;
            if (p >= e)
                return NULL;
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            if (--depth == 0)
                return p + 1;
        }
    }
    return NULL;
}

static int key_is(const char *k, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(k, want, n) == 0;
}

int ext_verb_text(struct ext_state *st, int prioritize, const char *body, size_t len, char **out, int *bad, int *failed)
{
    const char *p = ws(body, body + len), *e = body + len;
    const char *pod_s = NULL, *pod_e = NULL, *nn_s = NULL, *nn_e = NULL;
    int nodes_null = 0;
    if (p >= e || *p != '{')
        return -1;
    p = ws(p + 1, e);
    while (p < e && *p != '}') {
        const char *kq = plain_str(p, e);
        if (!kq)
            return -1;
        const char *k = p + 1;
        size_t kn = (size_t)(kq - k);
        p = ws(kq + 1, e);
        if (p >= e || *p != ':')
            return -1;
        p = ws(p + 1, e);
        if (key_is(k, kn, "Pod")) {
            if (p >= e || *p != '{' || !(pod_e = skip_value(p, e)))
                return -1;
            pod_s = p;
            p = pod_e;
        } else if (key_is(k, kn, "NodeNames")) {
            if (p >= e || *p != '[' || !(nn_e = skip_value(p, e)))
                return -1;
            nn_s = p;
            p = nn_e;
        } else if (key_is(k, kn, "Nodes")) {
            if ((size_t)(e - p) < 4 || memcmp(p, "null", 4) != 0)
                return -1;
            nodes_null = 1;
            p += 4;
        } else {
            return -1;
        }
        p = ws(p, e);
        if (p < e && *p == ',') {
            p = ws(p + 1, e);
            if (p >= e || *p != '"')
                return -1;
        } else if (p >= e || *p != '}') {
            return -1;
        }
    }
    if (p >= e || ws(p + 1, e) != e || !pod_s || !nn_s || !nodes_null)
        return -1;
    /* The names, split in a private copy of the array text. */
    size_t an = (size_t)(nn_e - nn_s);
    char *arr = malloc(an + 1);
    const char **names = malloc((an / 3 + 1) * sizeof *names); /* each name takes >= 3 bytes */
    int n = 0, rc = -1;
    if (!arr || !names)
        goto out;
    memcpy(arr, nn_s, an);
    arr[an] = '\0';
    char *q = (char *)ws(arr + 1, arr + an);
    while (*q != ']') {
        char *end = (char *)plain_str(q, arr + an);
        if (!end || end == q + 1)
            goto out;
        *end = '\0';
        names[n++] = q + 1;
        q = (char *)ws(end + 1, arr + an);
        if (*q == ',') {
            q = (char *)ws(q + 1, arr + an);
            if (*q != '"')
                goto out;
        } else if (*q != ']') {
            goto out;
        }
    }
    if (ws(q + 1, arr + an) != arr + an)
        goto out;
    json_t *pod = json_loadb(pod_s, (size_t)(pod_e - pod_s), 0, NULL);
    if (!pod)
        goto out;
    struct cands c = { names, n, NULL };
    struct sb b = { 0 };
    *bad = 0;
    *failed = 0;
    if (prioritize)
        prioritize_core(st, pod, &c, &b, bad);
    else
        *failed = filter_core(st, NULL, pod, &c, &b);
    json_decref(pod);
    *failed |= *bad;
    *out = sb_take(&b);
    rc = *out ? 0 : -1;
out:
    free(arr);
    free(names);
    return rc;
}
