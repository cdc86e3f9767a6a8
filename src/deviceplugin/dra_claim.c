/* See dra_claim.h. */
#include "dra_claim.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantity.h"
#include "text_escape.h"

void gs_dra_device_name(unsigned index, char *out, size_t len)
{
    snprintf(out, len, "gpu-%u", index);
}

/* obj[key] as a string of 1..max-1 bytes, or NULL. */
static const char *str_field(json_t *obj, const char *key, size_t max)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s && *s && strlen(s) < max ? s : NULL;
}

/* The view index of device name in v, or -1. */
static int find_device(const struct gs_node_view *v, const char *name)
{
    char want[GS_DRA_NAME_MAX];
    for (int g = 0; g < v->ngpus; g++) {
        gs_dra_device_name(v->gpus[g].index, want, sizeof want);
        if (strcmp(want, name) == 0)
            return g;
    }
    return -1;
}

/* One capacity value: a quantity string, whole, within [0, max]. */
static int capacity_value(json_t *val, const char *what, int64_t max, int64_t *out, char *err, size_t errlen)
{
    char qerr[160];
    const char *s = json_string_value(val);
    if (!s) {
        snprintf(err, errlen, "%s is not a quantity string", what);
        return -1;
    }
    if (gs_quantity_int(s, out, qerr, sizeof qerr) != 0) {
        snprintf(err, errlen, "%s: %s", what, qerr);
        return -1;
    }
    if (*out > max) {
        snprintf(err, errlen, "%s \"%s\" is more than the device has (%lld)", what, s, (long long)max);
        return -1;
    }
    return 0;
}

/* consumedCapacity of result i on view GPU g: memory required (whole MiB,
 * > 0, at most the GPU's), cores optional (0..100), nothing else. */
static int consumed(json_t *cc, const char *what, const struct gs_view_gpu *g, struct gs_dra_result *r, char *err,
                    size_t errlen)
{
    char field[260];
    if (!json_is_object(cc)) {
        snprintf(err, errlen, "%s has no consumedCapacity (gpuslice devices are shared: allowMultipleAllocations)",
                 what);
        return -1;
    }
    const char *key;
    json_t *val;
    json_object_foreach(cc, key, val)
    {
        snprintf(field, sizeof field, "%s consumedCapacity.%.40s", what, key);
        int64_t q;
        if (strcmp(key, GS_DRA_CAP_MEMORY) == 0) {
            if (capacity_value(val, field, g->mem_total_mib * GS_DRA_MEMORY_STEP, &q, err, errlen) != 0)
                return -1;
            if (q <= 0 || q % GS_DRA_MEMORY_STEP != 0) {
                snprintf(err, errlen, "%s is %lld bytes: not a positive whole number of MiB", field, (long long)q);
                return -1;
            }
            r->memory_bytes = q;
        } else if (strcmp(key, GS_DRA_CAP_CORES) == 0) {
            if (capacity_value(val, field, GS_DRA_CORES_TOTAL, &q, err, errlen) != 0)
                return -1;
            r->cores = (unsigned)q;
        } else {
            snprintf(err, errlen, "%s: gpuslice devices have no capacity of that name (only %s and %s)", field,
                     GS_DRA_CAP_MEMORY, GS_DRA_CAP_CORES);
            return -1;
        }
    }
    if (r->memory_bytes == 0) {
        snprintf(err, errlen, "%s consumed no %s: refusing a GPU without a memory limit", what, GS_DRA_CAP_MEMORY);
        return -1;
    }
    return 0;
}

/* One result of our driver. */
static int take_result(json_t *res, int i, const struct gs_node_view *v, struct gs_dra_result *r, char *err,
                       size_t errlen)
{
    char what[160];
    snprintf(what, sizeof what, "status.allocation.devices.results[%d]", i);
    const char *pool = str_field(res, "pool", 254), *dev = str_field(res, "device", GS_DRA_NAME_MAX);
    const char *req = str_field(res, "request", GS_DRA_REQUEST_MAX);
    if (!pool || !dev || !req) {
        snprintf(err, errlen, "%s: pool, device and request must be non-empty strings of sane length", what);
        return -1;
    }
    if (strcmp(pool, v->node) != 0) {
        snprintf(err, errlen, "%s: pool \"%.60s\" is not this node's (%s)", what, pool, v->node);
        return -1;
    }
    if (json_is_true(json_object_get(res, "adminAccess"))) {
        snprintf(err, errlen, "%s: adminAccess would give device %s without limits; gpuslice refuses it", what, dev);
        return -1;
    }
    r->gpu = find_device(v, dev);
    if (r->gpu < 0) {
        snprintf(err, errlen, "%s: device \"%s\" is not one of this node's", what, dev);
        return -1;
    }
    if (!v->gpus[r->gpu].healthy) {
        snprintf(err, errlen, "%s: device %s (GPU %s) is unhealthy", what, dev, v->gpus[r->gpu].uuid);
        return -1;
    }
    snprintf(r->request, sizeof r->request, "%s", req);
    snprintf(r->device, sizeof r->device, "%s", dev);
    return consumed(json_object_get(res, "consumedCapacity"), what, &v->gpus[r->gpu], r, err, errlen);
}

/* Sums the results per GPU into al->a and orders the GPUs by NVML index. */
static int sum_per_gpu(const struct gs_node_view *v, struct gs_dra_alloc *al, char *err, size_t errlen)
{
    struct gs_assignment *a = &al->a;
    for (int i = 0; i < al->nresults; i++) {
        const struct gs_dra_result *r = &al->r[i];
        int k = 0;
        while (k < a->ngpus && al->gpu[k] != r->gpu)
            k++;
        if (k == a->ngpus) {
            al->gpu[k] = r->gpu;
            snprintf(a->gpus[k].uuid, sizeof a->gpus[k].uuid, "%s", v->gpus[r->gpu].uuid);
            a->ngpus++;
        }
        a->gpus[k].memory_mib += (uint64_t)(r->memory_bytes / GS_DRA_MEMORY_STEP);
        a->gpus[k].cores += r->cores;
        if ((int64_t)a->gpus[k].memory_mib > v->gpus[r->gpu].mem_total_mib || a->gpus[k].cores > GS_DRA_CORES_TOTAL) {
            snprintf(err, errlen,
                     "the claim's results on device %s consume %llu MiB and %u cores in all, more than the GPU "
                     "has (%lld MiB, %d cores)",
                     r->device, (unsigned long long)a->gpus[k].memory_mib, a->gpus[k].cores,
                     (long long)v->gpus[r->gpu].mem_total_mib, GS_DRA_CORES_TOTAL);
            return -1;
        }
    }
    for (int i = 0; i < a->ngpus; i++) { /* insertion sort: at most 16 */
        int j = i;
        while (j > 0 && v->gpus[al->gpu[al->order[j - 1]]].index > v->gpus[al->gpu[i]].index) {
            al->order[j] = al->order[j - 1];
            j--;
        }
        al->order[j] = i;
    }
    return 0;
}

/* The results of driver in the claim's allocation. */
static int take_results(json_t *claim, const char *driver, const struct gs_node_view *v, struct gs_dra_alloc *al,
                        char *err, size_t errlen)
{
    json_t *alloc = json_object_get(json_object_get(claim, "status"), "allocation");
    if (!json_is_object(alloc)) {
        snprintf(err, errlen, "the claim is not allocated (no status.allocation)");
        return -1;
    }
    json_t *results = json_object_get(json_object_get(alloc, "devices"), "results");
    if (!json_is_array(results)) {
        snprintf(err, errlen, "status.allocation.devices.results is missing or not a list");
        return -1;
    }
    size_t i;
    json_t *res;
    json_array_foreach(results, i, res)
    {
        const char *d = json_string_value(json_object_get(res, "driver"));
        if (!d) {
            snprintf(err, errlen, "status.allocation.devices.results[%zu] has no driver", i);
            return -1;
        }
        if (strcmp(d, driver) != 0)
            continue; /* another driver's device of the same claim */
        if (al->nresults >= GS_DRA_MAX_RESULTS) {
            snprintf(err, errlen, "the claim has more than %d results of driver %s", GS_DRA_MAX_RESULTS, driver);
            return -1;
        }
        if (take_result(res, (int)i, v, &al->r[al->nresults], err, errlen) != 0)
            return -1;
        al->nresults++;
    }
    if (al->nresults == 0) {
        snprintf(err, errlen, "the claim's allocation has no device of driver %s", driver);
        return -1;
    }
    return 0;
}

/* One opaque configuration's parameters for our driver: exactly
 * {"apiVersion": GS_DRA_CONFIG_API, "kind": GS_DRA_CONFIG_KIND, "mode":
 * "cap"|"share"}. Returns the mode (0 cap, 1 share) or -1 with err. */
static int config_mode(json_t *par, const char *what, char *err, size_t errlen)
{
    if (!json_is_object(par)) {
        snprintf(err, errlen, "%s.parameters is not an object", what);
        return -1;
    }
    const char *api = json_string_value(json_object_get(par, "apiVersion"));
    const char *kind = json_string_value(json_object_get(par, "kind"));
    const char *mode = json_string_value(json_object_get(par, "mode"));
    if (!api || strcmp(api, GS_DRA_CONFIG_API) != 0 || !kind || strcmp(kind, GS_DRA_CONFIG_KIND) != 0) {
        snprintf(err, errlen, "%s.parameters: not apiVersion %s, kind %s", what, GS_DRA_CONFIG_API, GS_DRA_CONFIG_KIND);
        return -1;
    }
    if (json_object_size(par) != 3 || !mode || (strcmp(mode, "cap") != 0 && strcmp(mode, "share") != 0)) {
        snprintf(err, errlen, "%s.parameters: exactly apiVersion, kind and mode (\"cap\" or \"share\") are allowed",
                 what);
        return -1;
    }
    return strcmp(mode, "share") == 0;
}

/* The compute mode from the allocation's opaque configurations for driver
 * (from its class or the claim; all must agree): cap when there is none. */
static int take_config(json_t *alloc, const char *driver, struct gs_dra_alloc *al, char *err, size_t errlen)
{
    json_t *cfgs = json_object_get(json_object_get(alloc, "devices"), "config");
    if (!cfgs)
        return 0;
    if (!json_is_array(cfgs)) {
        snprintf(err, errlen, "status.allocation.devices.config is not a list");
        return -1;
    }
    int mode = -1;
    size_t i;
    json_t *cfg;
    json_array_foreach(cfgs, i, cfg)
    {
        char what[80];
        snprintf(what, sizeof what, "status.allocation.devices.config[%zu].opaque", i);
        json_t *op = json_object_get(cfg, "opaque");
        const char *d = json_string_value(json_object_get(op, "driver"));
        if (!d) {
            snprintf(err, errlen, "%s has no driver", what);
            return -1;
        }
        if (strcmp(d, driver) != 0)
            continue;
        int m = config_mode(json_object_get(op, "parameters"), what, err, errlen);
        if (m < 0)
            return -1;
        if (mode >= 0 && m != mode) {
            snprintf(err, errlen, "%s: its mode disagrees with an earlier configuration's", what);
            return -1;
        }
        mode = m;
    }
    al->a.share_mode = mode == 1;
    return 0;
}

static int parse_claim(const char *text, size_t len, const char *driver, const struct gs_node_view *v, const char *uid,
                       struct gs_dra_alloc *out, char *err, size_t errlen)
{
    if (len > GS_DRA_CLAIM_MAX_BYTES) {
        snprintf(err, errlen, "the claim is %zu bytes long (at most %d)", len, GS_DRA_CLAIM_MAX_BYTES);
        return -1;
    }
    json_error_t je;
    json_t *claim = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(claim)) {
        snprintf(err, errlen, "the claim is not a JSON object (%s)", claim ? "wrong type" : je.text);
        json_decref(claim);
        return -1;
    }
    int rc = -1;
    const char *have = json_string_value(json_object_get(json_object_get(claim, "metadata"), "uid"));
    if (!have || strcmp(have, uid) != 0)
        snprintf(err, errlen, "the claim's metadata.uid is %.64s, not %s (deleted and re-created?)",
                 have ? have : "missing", uid);
    else if (take_results(claim, driver, v, out, err, errlen) == 0 &&
             take_config(json_object_get(json_object_get(claim, "status"), "allocation"), driver, out, err, errlen) ==
                 0)
        rc = sum_per_gpu(v, out, err, errlen);
    json_decref(claim);
    return rc;
}

int gs_dra_claim_parse(const char *text, size_t len, const char *driver, const struct gs_node_view *v, const char *uid,
                       struct gs_dra_alloc *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char raw[1024] = "";
    int rc = parse_claim(text, len, driver, v, uid, out, raw, sizeof raw);
    /* The reasons quote the claim's own strings (a pool, a device, a
     * capacity's name or value), which whoever can write claims chooses:
     * escaped, a reason stays one line of printable text in the log. */
    if (rc != 0)
        gs_escape_utf8(err, errlen, raw, strlen(raw));
    return rc;
}

void gs_dra_pin_text(const struct gs_dra_alloc *al, const char *uid, char *out, size_t len)
{
    int l = snprintf(out, len, "dra-claim %s\nmode %s\n", uid, al->a.share_mode ? "share" : "cap");
    for (int j = 0; j < al->a.ngpus && l > 0 && (size_t)l < len; j++) {
        const struct gs_assign_gpu *g = &al->a.gpus[al->order[j]];
        l += snprintf(out + l, len - (size_t)l, "%s %llu %u\n", g->uuid, (unsigned long long)g->memory_mib, g->cores);
    }
}
