/* AdmissionReview v1 for pods: GPU pods (any gpuslice.io/ resource) get our
 * scheduler name and defaults (mutate) and are checked with the extender's own
 * pod reader (podspec.c), so a pod the webhook admits is a pod the extender can
 * place, and against the tenant policy (tenant_policy.c): no limit-carrying
 * environment, gpuslice.io/ annotations written by gpuslice alone. Everything
 * else is allowed untouched. */
#include "admission.h"

#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podspec.h"
#include "tenant_policy.h"

#define GS_WH_UID_MAX 128
#define GS_RES_PREFIX "gpuslice.io/"

char *gs_base64(const unsigned char *data, size_t len)
{
    if (len > (size_t)INT_MAX / 4 * 3 - 3)
        return NULL;
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (out)
        EVP_EncodeBlock((unsigned char *)out, data, (int)len); /* NUL-terminates */
    return out;
}

void gs_json_pointer_escape(const char *in, char *out, size_t outlen)
{
    size_t o = 0;
    if (!outlen)
        return;
    for (; *in && o + 1 < outlen; in++) {
        if (*in == '~' || *in == '/') {
            if (o + 2 >= outlen)
                break;
            out[o++] = '~';
            out[o++] = *in == '~' ? '0' : '1';
        } else {
            out[o++] = *in;
        }
    }
    out[o] = '\0';
}

/* Messages quote user input and may be cut mid-character by snprintf: keep
 * them printable ASCII so that they are always valid JSON strings. */
static void ascii_only(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            *s = '?';
}

static json_t *warning(const char *text)
{
    char w[256];
    snprintf(w, sizeof w, "%s", text);
    ascii_only(w);
    return json_string(w);
}

static int known_resource(const char *k)
{
    return strcmp(k, GS_RES_GPU) == 0 || strcmp(k, GS_RES_GPU_MEMORY) == 0 || strcmp(k, GS_RES_GPU_CORES) == 0;
}

/* 1 when any container (regular or init) names a gpuslice.io/ resource; an
 * unknown gpuslice.io/ name (a typo such as gpuslice.io/gpu-mem) is an error,
 * since the extender would otherwise silently ignore it. */
static int scan_containers(json_t *list, const char *field, int *gpu, char *err, size_t errlen)
{
    static const char *const kinds[] = { "limits", "requests" };
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *res = json_object_get(json_array_get(list, i), "resources");
        for (int k = 0; k < 2; k++) {
            const char *key;
            json_t *val;
            json_object_foreach(json_object_get(res, kinds[k]), key, val)
            {
                if (strncmp(key, GS_RES_PREFIX, strlen(GS_RES_PREFIX)) != 0)
                    continue;
                if (!known_resource(key)) {
                    snprintf(err, errlen,
                             "spec.%s[%zu].resources.%s: unknown resource \"%.60s\" "
                             "(gpuslice knows %s, %s and %s)",
                             field, i, kinds[k], key, GS_RES_GPU, GS_RES_GPU_MEMORY, GS_RES_GPU_CORES);
                    return -1;
                }
                *gpu = 1;
            }
        }
    }
    return 0;
}

static void pod_name(json_t *pod, char *buf, size_t len)
{
    json_t *md = json_object_get(pod, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    const char *gen = json_string_value(json_object_get(md, "generateName"));
    if (name && *name)
        snprintf(buf, len, "%.63s%s%.63s", ns ? ns : "", ns ? "/" : "", name);
    else
        snprintf(buf, len, "%.63s%s%.63s*", ns ? ns : "", ns ? "/" : "", gen ? gen : "pod");
}

static void add_op(json_t *patch, const char *op, const char *path, json_t *value)
{
    json_array_append_new(patch, json_pack("{s:s,s:s,s:o}", "op", op, "path", path, "value", value));
}

struct decision {
    int allowed;
    char msg[600];
    json_t *patch;    /* JSON Patch ops; empty = no patch */
    json_t *warnings; /* strings */
};

/* The environment of every container kind of a GPU pod. */
static int check_pod_env(json_t *spec, char *err, size_t errlen)
{
    return gs_wh_check_env(json_object_get(spec, "containers"), "containers", err, errlen) ||
           gs_wh_check_env(json_object_get(spec, "initContainers"), "initContainers", err, errlen) ||
           gs_wh_check_env(json_object_get(spec, "ephemeralContainers"), "ephemeralContainers", err, errlen);
}

/* The environment of every container kind of a pod without gpuslice.io/ resources. */
static int check_nogpu_env(json_t *spec, char *err, size_t errlen)
{
    return gs_wh_check_gpu_env(json_object_get(spec, "containers"), "containers", err, errlen) ||
           gs_wh_check_gpu_env(json_object_get(spec, "initContainers"), "initContainers", err, errlen) ||
           gs_wh_check_gpu_env(json_object_get(spec, "ephemeralContainers"), "ephemeralContainers", err, errlen);
}

static void refuse(struct decision *d, json_t *pod, const char *err)
{
    char who[160];

    pod_name(pod, who, sizeof who);
    d->allowed = 0;
    snprintf(d->msg, sizeof d->msg, "gpuslice: pod %s: %s", who, err);
    ascii_only(d->msg);
}

/* UPDATE of a pod (old: before) or of its ephemeralcontainers (ephemeral = 1). */
static void decide_update(const struct gs_wh_config *cfg, json_t *pod, json_t *old, const char *username, int ephemeral,
                          struct decision *d)
{
    char err[300];
    int gpu = 0;
    json_t *spec = json_object_get(pod, "spec");

    if (!json_is_object(pod) || (!ephemeral && !json_is_object(old))) {
        d->allowed = 0;
        snprintf(d->msg, sizeof d->msg, "gpuslice: request.object%s is not a Pod",
                 ephemeral ? "" : " or request.oldObject");
        return;
    }
    if (!ephemeral) {
        if (gs_wh_check_annotations(pod, old, username, cfg->annotation_writers, cfg->n_annotation_writers, err,
                                    sizeof err))
            refuse(d, pod, err);
        return;
    }
    /* An ephemeral container joins a GPU pod: the same environment rule; it
     * joins any other pod: no GPU-selecting variables. */
    if (scan_containers(json_object_get(spec, "containers"), "containers", &gpu, err, sizeof err) ||
        scan_containers(json_object_get(spec, "initContainers"), "initContainers", &gpu, err, sizeof err))
        return; /* the pod itself was admitted; an unknown resource is not the debug container's doing */
    json_t *eph = json_object_get(spec, "ephemeralContainers");
    if (gpu ? gs_wh_check_env(eph, "ephemeralContainers", err, sizeof err)
            : gs_wh_check_gpu_env(eph, "ephemeralContainers", err, sizeof err))
        refuse(d, pod, err);
}

static void decide_pod(const struct gs_wh_config *cfg, enum gs_wh_mode mode, json_t *pod, const char *username,
                       struct decision *d)
{
    char err[300];
    json_t *spec = json_object_get(pod, "spec");
    int gpu = 0;
    if (!json_is_object(pod) || !json_is_object(spec)) {
        d->allowed = 0;
        snprintf(d->msg, sizeof d->msg, "gpuslice: request.object is not a Pod with a spec");
        return;
    }
    if (scan_containers(json_object_get(spec, "containers"), "containers", &gpu, err, sizeof err) ||
        scan_containers(json_object_get(spec, "initContainers"), "initContainers", &gpu, err, sizeof err))
        goto deny;
    /* Any pod: a forged gpuslice.io/assignment must not wait for a GPU request. */
    if (gs_wh_check_annotations(pod, NULL, username, cfg->annotation_writers, cfg->n_annotation_writers, err,
                                sizeof err))
        goto deny;
    if (!gpu) { /* not ours: untouched, unless it would pick GPUs itself */
        if (check_nogpu_env(spec, err, sizeof err))
            goto deny;
        return;
    }
    if (check_pod_env(spec, err, sizeof err))
        goto deny;
    struct gs_podspec ps;
    int r = gs_podspec_parse(pod, &ps, err, sizeof err);
    if (r < 0)
        goto deny;
    json_t *sn = json_object_get(spec, "schedulerName");
    const char *s = json_string_value(sn);
    if (sn && !s) {
        snprintf(err, sizeof err, "spec.schedulerName must be a string");
        goto deny;
    }
    if (r == 0 || mode != GS_WH_MUTATE)
        return;

    if (!s || !*s || strcmp(s, "default-scheduler") == 0) {
        add_op(d->patch, s ? "replace" : "add", "/spec/schedulerName", json_string(cfg->scheduler_name));
    } else if (strcmp(s, cfg->scheduler_name) != 0) {
        char w[200];
        snprintf(w, sizeof w,
                 "gpuslice: spec.schedulerName \"%.60s\" kept; that scheduler must "
                 "use the gpuslice extender or the node agent will refuse the pod",
                 s);
        json_array_append_new(d->warnings, warning(w));
    }

    /* Memory given, cores absent: fill the default cap. */
    if (!ps.whole && ps.cores == 0 && cfg->default_cores > 0) {
        static const char *const kinds[] = { "limits", "requests" };
        json_t *res =
            json_object_get(json_array_get(json_object_get(spec, "containers"), (size_t)ps.container), "resources");
        char key[64], path[160], val[16];
        gs_json_pointer_escape(GS_RES_GPU_CORES, key, sizeof key);
        snprintf(val, sizeof val, "%d", cfg->default_cores);
        for (int k = 0; k < 2; k++) {
            if (!json_object_get(json_object_get(res, kinds[k]), GS_RES_GPU))
                continue;
            snprintf(path, sizeof path, "/spec/containers/%d/resources/%s/%s", ps.container, kinds[k], key);
            add_op(d->patch, "add", path, json_string(val));
        }
        char w[200];
        snprintf(w, sizeof w, "gpuslice: %s not set; defaulted to %d (percent of each GPU)", GS_RES_GPU_CORES,
                 cfg->default_cores);
        json_array_append_new(d->warnings, warning(w));
    }
    return;
deny:
    refuse(d, pod, err);
}

static int fail(char **out, const char *text)
{
    char msg[400];
    snprintf(msg, sizeof msg, "%s", text);
    ascii_only(msg);
    json_t *j = json_pack("{s:s}", "error", msg);
    *out = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return 400;
}

int gs_admission_review(const struct gs_wh_config *cfg, enum gs_wh_mode mode, const char *body, size_t len, char **out)
{
    *out = NULL;
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    char msg[400];
    if (!root) {
        snprintf(msg, sizeof msg, "body is not JSON (line %d column %d: %s)", je.line, je.column, je.text);
        return fail(out, msg);
    }
    int status = 400;
    json_t *req = json_object_get(root, "request");
    const char *api = json_string_value(json_object_get(root, "apiVersion"));
    const char *kind = json_string_value(json_object_get(root, "kind"));
    const char *uid = json_string_value(json_object_get(req, "uid"));
    if (!json_is_object(root) || !kind || strcmp(kind, "AdmissionReview") != 0) {
        fail(out, "body is not an AdmissionReview (kind must be \"AdmissionReview\")");
        goto done;
    }
    if (!api || strcmp(api, "admission.k8s.io/v1") != 0) {
        snprintf(msg, sizeof msg,
                 "AdmissionReview apiVersion must be admission.k8s.io/v1 "
                 "(got %.60s)",
                 api ? api : "none");
        fail(out, msg);
        goto done;
    }
    if (!json_is_object(req) || !uid || !*uid || strlen(uid) > GS_WH_UID_MAX) {
        fail(out, "AdmissionReview has no request.uid (a non-empty string)");
        goto done;
    }

    struct decision d = { .allowed = 1, .patch = json_array(), .warnings = json_array() };
    json_t *rk = json_object_get(req, "kind");
    const char *group = json_string_value(json_object_get(rk, "group"));
    const char *k = json_string_value(json_object_get(rk, "kind"));
    const char *op = json_string_value(json_object_get(req, "operation"));
    const char *sub = json_string_value(json_object_get(req, "subResource"));
    const char *user = json_string_value(json_object_get(json_object_get(req, "userInfo"), "username"));
    int pod = k && strcmp(k, "Pod") == 0 && (!group || !*group) && op;
    int whole = !sub || !*sub;
    if (pod && whole && strcmp(op, "CREATE") == 0)
        decide_pod(cfg, mode, json_object_get(req, "object"), user, &d);
    else if (pod && strcmp(op, "UPDATE") == 0 && (whole || strcmp(sub, "ephemeralcontainers") == 0))
        decide_update(cfg, json_object_get(req, "object"), json_object_get(req, "oldObject"), user, !whole, &d);

    json_t *resp = json_pack("{s:s,s:b}", "uid", uid, "allowed", d.allowed);
    if (!d.allowed) {
        json_object_set_new(resp, "status",
                            json_pack("{s:i,s:s,s:s}", "code", 400, "reason", "BadRequest", "message", d.msg));
    } else if (json_array_size(d.patch)) {
        char *p = json_dumps(d.patch, JSON_COMPACT);
        char *b64 = p ? gs_base64((const unsigned char *)p, strlen(p)) : NULL;
        if (b64) {
            json_object_set_new(resp, "patchType", json_string("JSONPatch"));
            json_object_set_new(resp, "patch", json_string(b64));
        }
        free(p);
        free(b64);
    }
    if (d.allowed && json_array_size(d.warnings))
        json_object_set(resp, "warnings", d.warnings);
    json_t *ans =
        json_pack("{s:s,s:s,s:o}", "apiVersion", "admission.k8s.io/v1", "kind", "AdmissionReview", "response", resp);
    *out = ans ? json_dumps(ans, JSON_COMPACT) : NULL;
    json_decref(ans);
    json_decref(d.patch);
    json_decref(d.warnings);
    status = 200;
done:
    json_decref(root);
    return status;
}
