/* Pod → gpuslice request. Strict: a malformed value is an error with the
 * field named, never a silent default. */
#include "podspec.h"

#include <stdio.h>
#include <string.h>

#include "fit.h"
#include "quantity.h"

static int printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7e)
            return 0;
    return 1;
}

/* One resource from limits (preferred) or requests; both must agree. */
static int resource(json_t *res, const char *name, const char *where, int64_t *val, int *present, char *err,
                    size_t errlen)
{
    json_t *lim = json_object_get(json_object_get(res, "limits"), name);
    json_t *req = json_object_get(json_object_get(res, "requests"), name);
    int64_t lv = 0, rv = 0;
    char e[160];
    *present = 0;
    if (lim) {
        if (!json_is_string(lim) && !json_is_integer(lim)) {
            snprintf(err, errlen, "%s.limits[\"%s\"] must be a quantity", where, name);
            return -1;
        }
        if (json_is_integer(lim)) {
            lv = json_integer_value(lim);
        } else if (gs_quantity_int(json_string_value(lim), &lv, e, sizeof e) != 0) {
            snprintf(err, errlen, "%s.limits[\"%s\"]: %s", where, name, e);
            return -1;
        }
        *present = 1;
    }
    if (req) {
        if (!json_is_string(req) && !json_is_integer(req)) {
            snprintf(err, errlen, "%s.requests[\"%s\"] must be a quantity", where, name);
            return -1;
        }
        if (json_is_integer(req)) {
            rv = json_integer_value(req);
        } else if (gs_quantity_int(json_string_value(req), &rv, e, sizeof e) != 0) {
            snprintf(err, errlen, "%s.requests[\"%s\"]: %s", where, name, e);
            return -1;
        }
        if (*present && rv != lv) {
            snprintf(err, errlen,
                     "%s: requests and limits of \"%s\" differ (%lld vs %lld); "
                     "extended resources need them equal",
                     where, name, (long long)rv, (long long)lv);
            return -1;
        }
        lv = rv;
        *present = 1;
    }
    if (lv < 0) {
        snprintf(err, errlen, "%s: \"%s\" is negative", where, name);
        return -1;
    }
    *val = lv;
    return 0;
}

static int has_gpu_resource(json_t *c)
{
    json_t *res = json_object_get(c, "resources");
    const char *names[] = { GS_RES_GPU, GS_RES_GPU_MEMORY, GS_RES_GPU_CORES };
    for (int i = 0; i < 3; i++)
        if (json_object_get(json_object_get(res, "limits"), names[i]) ||
            json_object_get(json_object_get(res, "requests"), names[i]))
            return 1;
    return 0;
}

static int container_spec(json_t *c, int idx, struct gs_podspec *ps, char *err, size_t errlen)
{
    char where[64];
    snprintf(where, sizeof where, "spec.containers[%d].resources", idx);
    json_t *res = json_object_get(c, "resources");
    int64_t n = 0, mem = 0, cores = 0;
    int hn, hm, hc;
    if (resource(res, GS_RES_GPU, where, &n, &hn, err, errlen) ||
        resource(res, GS_RES_GPU_MEMORY, where, &mem, &hm, err, errlen) ||
        resource(res, GS_RES_GPU_CORES, where, &cores, &hc, err, errlen))
        return -1;
    if (!hn) {
        snprintf(err, errlen, "%s: \"%s\" or \"%s\" given without \"%s\" (how many GPUs)", where, GS_RES_GPU_MEMORY,
                 GS_RES_GPU_CORES, GS_RES_GPU);
        return -1;
    }
    if (n < 1 || n > GS_MAX_GPUS_PER_NODE) {
        snprintf(err, errlen, "%s: \"%s\" must be 1..%d GPUs, got %lld", where, GS_RES_GPU, GS_MAX_GPUS_PER_NODE,
                 (long long)n);
        return -1;
    }
    if (hm && (mem < 1 || mem > (1LL << 30))) {
        snprintf(err, errlen, "%s: \"%s\" must be 1..%lld MiB per GPU, got %lld", where, GS_RES_GPU_MEMORY, 1LL << 30,
                 (long long)mem);
        return -1;
    }
    if (hc && (cores < 1 || cores > 100)) {
        snprintf(err, errlen, "%s: \"%s\" must be 1..100 percent per GPU, got %lld", where, GS_RES_GPU_CORES,
                 (long long)cores);
        return -1;
    }
    ps->container = idx;
    ps->num_gpus = (int32_t)n;
    ps->mem_mib = hm ? mem : 0;
    ps->whole = !hm && !hc;
    ps->cores = hc ? (int)cores : ps->whole ? 100 : 0;
    return 0;
}

int gs_podspec_parse(json_t *pod, struct gs_podspec *out, char *err, size_t errlen)
{
    struct gs_podspec ps;
    memset(&ps, 0, sizeof ps);
    ps.container = -1;
    if (!json_is_object(pod)) {
        snprintf(err, errlen, "pod must be a JSON object");
        return -1;
    }
    json_t *spec = json_object_get(pod, "spec");
    json_t *cs = json_object_get(spec, "containers");
    if (!json_is_object(spec) || !json_is_array(cs)) {
        snprintf(err, errlen, "pod has no spec.containers array");
        return -1;
    }
    json_t *ics = json_object_get(spec, "initContainers");
    for (size_t i = 0; i < json_array_size(ics); i++)
        if (has_gpu_resource(json_array_get(ics, i))) {
            snprintf(err, errlen,
                     "spec.initContainers[%zu] requests gpuslice resources; "
                     "only regular containers may",
                     i);
            return -1;
        }
    for (size_t i = 0; i < json_array_size(cs); i++) {
        json_t *c = json_array_get(cs, i);
        if (!json_is_object(c)) {
            snprintf(err, errlen, "spec.containers[%zu] must be an object", i);
            return -1;
        }
        if (!has_gpu_resource(c))
            continue;
        if (ps.container >= 0) {
            snprintf(err, errlen,
                     "spec.containers[%d] and [%zu] both request gpuslice GPUs; "
                     "v1 supports one GPU container per pod",
                     ps.container, i);
            return -1;
        }
        if (container_spec(c, (int)i, &ps, err, errlen) != 0)
            return -1;
    }
    json_t *ann = json_object_get(json_object_get(pod, "metadata"), "annotations");
    json_t *sv = json_object_get(ann, GS_ANN_SCHEDULING);
    if (sv) {
        const char *t = json_string_value(sv);
        if (!t) {
            snprintf(err, errlen, "annotation %s must be a string", GS_ANN_SCHEDULING);
            return -1;
        }
        if (gs_sched_opts_parse(t, strlen(t), &ps.opts, err, errlen) != 0)
            return -1;
    }
    if (ps.container < 0)
        return 0;
    *out = ps;
    return 1;
}

void gs_podspec_request(const struct gs_podspec *ps, gs_request *r)
{
    memset(r, 0, sizeof *r);
    r->num_gpus = ps->num_gpus;
    r->gpu_milli = gs_cores_milli((unsigned)ps->cores);
    r->gpu_mem_mib = ps->mem_mib;
    r->any_model = true;
    r->numa = ps->opts.numa_single ? GS_NUMA_SINGLE : GS_NUMA_NONE;
}

/* ---- gpuslice.io/scheduling -------------------------------------------- */

static int policy_field(json_t *root, const char *key, int *has, gs_policy_kind *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return 0;
    const char *s = json_string_value(v);
    if (!s || gs_policy_parse(s, out) != 0) {
        snprintf(err, errlen,
                 "%s: \"%s\" must be one of binpack, spread, bestfit, fgd, "
                 "fraglook",
                 GS_ANN_SCHEDULING, key);
        return -1;
    }
    *has = 1;
    return 0;
}

static int string_list(json_t *root, const char *key, char *dst, size_t width, int max, int *n, char *err,
                       size_t errlen)
{
    json_t *a = json_object_get(root, key);
    if (!a)
        return 0;
    if (!json_is_array(a) || json_array_size(a) > (size_t)max) {
        snprintf(err, errlen, "%s: \"%s\" must be an array of at most %d strings", GS_ANN_SCHEDULING, key, max);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(a); i++) {
        const char *s = json_string_value(json_array_get(a, i));
        if (!s || !*s || strlen(s) >= width || strchr(s, '\n')) {
            snprintf(err, errlen, "%s: %s[%zu] must be a non-empty string under %zu bytes", GS_ANN_SCHEDULING, key, i,
                     width);
            return -1;
        }
        snprintf(dst + i * width, width, "%s", s);
    }
    *n = (int)json_array_size(a);
    return 0;
}

int gs_sched_opts_parse(const char *text, size_t len, struct gs_sched_opts *o, char *err, size_t errlen)
{
    static const char *const known[] = { "v",        "policy",     "gpu_policy", "gpu_models",
                                         "use_gpus", "avoid_gpus", "numa",       "mode" };
    memset(o, 0, sizeof *o);
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "%s: not valid JSON at column %d: %s", GS_ANN_SCHEDULING, je.column, je.text);
        return -1;
    }
    int rc = -1;
    const char *key;
    json_t *val;
    if (!json_is_object(root)) {
        snprintf(err, errlen, "%s: must be a JSON object", GS_ANN_SCHEDULING);
        goto out;
    }
    json_t *v = json_object_get(root, "v");
    if (!json_is_integer(v) || json_integer_value(v) != GS_SCHED_VERSION) {
        snprintf(err, errlen, "%s: \"v\" must be %d (the version this reader knows)", GS_ANN_SCHEDULING,
                 GS_SCHED_VERSION);
        goto out;
    }
    json_object_foreach(root, key, val)
    {
        size_t k = 0;
        while (k < sizeof known / sizeof known[0] && strcmp(key, known[k]) != 0)
            k++;
        if (k == sizeof known / sizeof known[0]) {
            /* A typo must not be silently ignored. */
            snprintf(err, errlen, "%s: unknown field \"%.40s\"", GS_ANN_SCHEDULING, key);
            goto out;
        }
    }
    if (policy_field(root, "policy", &o->has_policy, &o->policy, err, errlen) ||
        policy_field(root, "gpu_policy", &o->has_gpu_policy, &o->gpu_policy, err, errlen) ||
        string_list(root, "gpu_models", &o->models[0][0], GS_MODEL_NAME_MAX, GS_SPEC_MAX_MODELS, &o->nmodels, err,
                    errlen) ||
        string_list(root, "use_gpus", &o->use[0][0], GS_SPEC_UUID_MAX, GS_SPEC_MAX_UUIDS, &o->nuse, err, errlen) ||
        string_list(root, "avoid_gpus", &o->avoid[0][0], GS_SPEC_UUID_MAX, GS_SPEC_MAX_UUIDS, &o->navoid, err, errlen))
        goto out;
    for (int i = 0; i < o->nuse; i++)
        if (!printable(o->use[i]))
            goto bad_uuid;
    for (int i = 0; i < o->navoid; i++)
        if (!printable(o->avoid[i]))
            goto bad_uuid;
    json_t *numa = json_object_get(root, "numa");
    if (numa) {
        const char *s = json_string_value(numa);
        if (!s || (strcmp(s, "single") != 0 && strcmp(s, "any") != 0)) {
            snprintf(err, errlen, "%s: \"numa\" must be \"single\" or \"any\"", GS_ANN_SCHEDULING);
            goto out;
        }
        o->numa_single = strcmp(s, "single") == 0;
    }
    json_t *mode = json_object_get(root, "mode");
    if (mode) {
        const char *s = json_string_value(mode);
        if (!s || (strcmp(s, "cap") != 0 && strcmp(s, "share") != 0)) {
            snprintf(err, errlen, "%s: \"mode\" must be \"cap\" or \"share\"", GS_ANN_SCHEDULING);
            goto out;
        }
        o->share_mode = strcmp(s, "share") == 0;
    }
    rc = 0;
    goto out;
bad_uuid:
    snprintf(err, errlen, "%s: GPU UUIDs must be printable ASCII without spaces", GS_ANN_SCHEDULING);
out:
    json_decref(root);
    return rc;
}
