/* The tenant policy of the admission webhook (tenant_policy.h). */
#include "tenant_policy.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define GS_ANN_PREFIX "gpuslice.io/"

/* Environment names a pod spec may not set in a GPU pod. The interposer's config file
 * is a ceiling for limits (docs/configuration.md), but the environment also names that
 * file, the region and the devices, so the names are refused whatever their value or
 * its source (value or valueFrom). Other CUDA variables real jobs set
 * (CUDA_DEVICE_MAX_CONNECTIONS, CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES, CUDA_MODULE_LOADING)
 * and LD_PRELOAD are allowed: they choose among the GPUs the container was given and
 * the limits are equal on each (docs/webhook.md). */
static const struct reserved {
    const char *name;
    int prefix; /* 1: any name starting with name */
    int nocase; /* 1: compared in any letter case (the interposer refuses such typos too) */
    const char *why;
} gs_reserved_env[] = {
    { "GPUSLICE_", 1, 1, "gpuslice's configuration comes from the node agent" },
    { "CUDA_DEVICE_MEMORY_LIMIT", 1, 0, "a HAMi-core memory limit" },
    { "CUDA_DEVICE_SM_LIMIT", 1, 0, "a HAMi-core compute limit" },
    { "CUDA_DEVICE_MEMORY_SHARED_CACHE", 0, 0, "HAMi-core's shared state file" },
    { "GPU_CORE_UTILIZATION_POLICY", 0, 0, "HAMi-core's compute-limit switch" },
    { "NVIDIA_VISIBLE_DEVICES", 0, 0, "the node agent chooses the GPUs; a pod's own list would expose others" },
};

static int cmp_n(const char *a, const char *b, size_t n, int nocase)
{
    return nocase ? strncasecmp(a, b, n) : strncmp(a, b, n);
}

/* The reason name is reserved, or NULL. */
static const char *reserved(const char *name)
{
    size_t i;

    for (i = 0; i < sizeof gs_reserved_env / sizeof gs_reserved_env[0]; i++) {
        const struct reserved *r = &gs_reserved_env[i];
        size_t n = strlen(r->name);

        if (r->prefix ? cmp_n(name, r->name, n, r->nocase) == 0
                      : strlen(name) == n && cmp_n(name, r->name, n, r->nocase) == 0)
            return r->why;
    }
    return NULL;
}

/* Whether envFrom with this prefix can make a reserved name out of a key of a
 * ConfigMap or Secret, which admission cannot see. */
static int prefix_can_reach(const char *prefix)
{
    size_t n = strlen(prefix);
    size_t i;

    if (n == 0)
        return 1;
    for (i = 0; i < sizeof gs_reserved_env / sizeof gs_reserved_env[0]; i++) {
        const struct reserved *r = &gs_reserved_env[i];
        size_t rn = strlen(r->name);

        if (cmp_n(r->name, prefix, n < rn ? n : rn, r->nocase) == 0 && (n <= rn || r->prefix))
            return 1; /* prefix + key can spell r->name, or prefix already starts it */
    }
    return 0;
}

/* Keeps quoted user input printable in messages (they become JSON strings). */
static void show(const char *in, char *out, size_t len)
{
    size_t o = 0;

    for (; *in && o + 1 < len; in++)
        out[o++] = (*in >= 0x20 && *in < 0x7f) ? *in : '?';
    out[o] = '\0';
}

int gs_wh_check_env(json_t *list, const char *field, char *err, size_t errlen)
{
    char shown[80];
    size_t i;
    size_t j;

    for (i = 0; i < json_array_size(list); i++) {
        json_t *c = json_array_get(list, i);
        json_t *env = json_object_get(c, "env");
        json_t *from = json_object_get(c, "envFrom");

        for (j = 0; j < json_array_size(env); j++) {
            const char *name = json_string_value(json_object_get(json_array_get(env, j), "name"));
            const char *why = name ? reserved(name) : NULL;

            if (why == NULL)
                continue;
            show(name, shown, sizeof shown);
            snprintf(err, errlen,
                     "spec.%s[%zu].env[%zu].name \"%s\": may not be set in a gpuslice pod (%s); remove it, "
                     "the limits come from the pod's gpuslice.io/ resources",
                     field, i, j, shown, why);
            return -1;
        }
        for (j = 0; j < json_array_size(from); j++) {
            json_t *p = json_object_get(json_array_get(from, j), "prefix");
            const char *prefix = json_is_string(p) ? json_string_value(p) : "";

            if (!prefix_can_reach(prefix))
                continue;
            show(prefix, shown, sizeof shown);
            snprintf(err, errlen,
                     "spec.%s[%zu].envFrom[%zu]: prefix \"%s\" lets the ConfigMap or Secret set GPUSLICE_* "
                     "or HAMi-core's limit variables, which admission cannot see; give a prefix such as "
                     "\"APP_\" or list the variables under env",
                     field, i, j, shown);
            return -1;
        }
    }
    return 0;
}

/* The NVIDIA container runtime's device-selection variables: in its default
 * env-var mode a pod that names GPUs here gets their device nodes, with no
 * interposer and no limit (issue 27, finding 5). CUDA_VISIBLE_DEVICES is not
 * among them: CUDA reads it inside the container, where it only picks among
 * the device nodes the container already has. NVIDIA_DRIVER_CAPABILITIES and
 * NVIDIA_REQUIRE_* choose no device and stay allowed. */
static const struct reserved gs_gpu_env[] = {
    { "NVIDIA_VISIBLE_DEVICES", 0, 0, "the NVIDIA runtime would mount those GPUs" },
    { "NVIDIA_MIG_CONFIG_DEVICES", 0, 0, "the NVIDIA runtime would expose MIG configuration devices" },
    { "NVIDIA_MIG_MONITOR_DEVICES", 0, 0, "the NVIDIA runtime would expose MIG monitor devices" },
    { "NVIDIA_IMEX_CHANNELS", 0, 0, "the NVIDIA runtime would mount IMEX channels" },
    { "NVIDIA_GDRCOPY", 0, 0, "the NVIDIA runtime would mount the GDRCopy device" },
    { "NVIDIA_GDS", 0, 0, "the NVIDIA runtime would mount GPUDirect Storage devices" },
    { "NVIDIA_MOFED", 0, 0, "the NVIDIA runtime would mount MOFED devices" },
    { "NVIDIA_NVSWITCH", 0, 0, "the NVIDIA runtime would mount NVSwitch devices" },
};

/* Values of NVIDIA_VISIBLE_DEVICES that give no GPU (the runtime's own words). */
static int no_gpu_value(const char *name, json_t *var)
{
    const char *v = json_string_value(json_object_get(var, "value"));

    if (strcmp(name, "NVIDIA_VISIBLE_DEVICES") != 0 || v == NULL || json_object_get(var, "valueFrom") != NULL)
        return 0;
    return strcmp(v, "") == 0 || strcmp(v, "void") == 0 || strcmp(v, "none") == 0;
}

static const char *gpu_env(const char *name)
{
    size_t i;

    for (i = 0; i < sizeof gs_gpu_env / sizeof gs_gpu_env[0]; i++)
        if (strcmp(name, gs_gpu_env[i].name) == 0)
            return gs_gpu_env[i].why;
    return NULL;
}

int gs_wh_check_gpu_env(json_t *list, const char *field, char *err, size_t errlen)
{
    char shown[80];
    size_t i;
    size_t j;

    for (i = 0; i < json_array_size(list); i++) {
        json_t *env = json_object_get(json_array_get(list, i), "env");

        for (j = 0; j < json_array_size(env); j++) {
            json_t *var = json_array_get(env, j);
            const char *name = json_string_value(json_object_get(var, "name"));
            const char *why = name ? gpu_env(name) : NULL;

            if (why == NULL || no_gpu_value(name, var))
                continue;
            show(name, shown, sizeof shown);
            snprintf(err, errlen,
                     "spec.%s[%zu].env[%zu].name \"%s\": may not be set in a pod without gpuslice.io/ resources "
                     "(%s, outside any gpuslice limit); request gpuslice.io/gpu instead",
                     field, i, j, shown, why);
            return -1;
        }
    }
    return 0;
}

static int is_writer(const char *username, const char *const *writers, size_t n)
{
    size_t i;

    for (i = 0; username != NULL && i < n; i++)
        if (strcmp(username, writers[i]) == 0)
            return 1;
    return 0;
}

/* 1 when key is a gpuslice.io/ annotation whose value differs between a and b (either
 * may lack it, or be NULL). */
static int changed(json_t *a, json_t *b, const char *key)
{
    json_t *va = json_object_get(a, key);
    json_t *vb = json_object_get(b, key);

    if (strncmp(key, GS_ANN_PREFIX, strlen(GS_ANN_PREFIX)) != 0)
        return 0;
    return !(va && vb ? json_equal(va, vb) : va == vb);
}

int gs_wh_check_annotations(json_t *pod, json_t *old, const char *username, const char *const *writers, size_t nwriters,
                            char *err, size_t errlen)
{
    json_t *now = json_object_get(json_object_get(pod, "metadata"), "annotations");
    json_t *before = json_object_get(json_object_get(old, "metadata"), "annotations");
    char who[160];
    char key_shown[96];
    const char *key;
    json_t *v;

    if (is_writer(username, writers, nwriters))
        return 0;
    show(username ? username : "(no username)", who, sizeof who);
    json_object_foreach(now, key, v)
    {
        if (old == NULL && strcmp(key, GS_WH_USER_ANNOTATION) == 0)
            continue;
        if (!changed(now, old ? before : NULL, key))
            continue;
        show(key, key_shown, sizeof key_shown);
        snprintf(err, errlen, "annotation %s may be %s only by gpuslice's service accounts, not by %s", key_shown,
                 old == NULL ? "set" : "changed", who);
        return -1;
    }
    json_object_foreach(before, key, v)
    {
        if (json_object_get(now, key) != NULL || !changed(before, now, key))
            continue;
        show(key, key_shown, sizeof key_shown);
        snprintf(err, errlen, "annotation %s may be removed only by gpuslice's service accounts, not by %s", key_shown,
                 who);
        return -1;
    }
    return 0;
}
