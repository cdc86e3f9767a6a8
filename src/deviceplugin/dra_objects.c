/* See dra_objects.h. */
#include "dra_objects.h"

#include <stdio.h>
#include <string.h>

#include "dra_claim.h"

int gs_dra_slice_name(const char *node, const char *driver, char *out, size_t len)
{
    return snprintf(out, len, "%s-%s", node, driver) >= (int)len ? -1 : 0;
}

/* NVML's "580.65.06" as semver "580.65.6" (no leading zeros; a missing
 * part is 0). 0, or -1 when it is not numeric. */
static int driver_semver(const char *v, char *out, size_t len)
{
    unsigned long part[3] = { 0, 0, 0 };
    int k = 0;
    const char *p = v;
    while (*p && k < 3) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned long x = 0;
        for (; *p >= '0' && *p <= '9'; p++)
            if ((x = x * 10 + (unsigned long)(*p - '0')) > 999999)
                return -1;
        part[k++] = x;
        if (*p == '.')
            p++;
        else if (*p)
            return -1;
    }
    if (k == 0 || *p)
        return -1;
    snprintf(out, len, "%lu.%lu.%lu", part[0], part[1], part[2]);
    return 0;
}

static json_t *attr_string(const char *s)
{
    return json_pack("{s:s}", "string", s);
}

static json_t *attr_int(json_int_t i)
{
    return json_pack("{s:I}", "int", i);
}

static json_t *attr_version(const char *s)
{
    return json_pack("{s:s}", "version", s);
}

static json_t *device_attributes(const struct gs_nvml_gpu *g, const char *driver_version)
{
    char v[64];
    json_t *a = json_pack("{s:o,s:o,s:o}", "uuid", attr_string(g->uuid), "index", attr_int(g->index), "productName",
                          attr_string(g->model));
    if (g->cc_major >= 0 && g->cc_minor >= 0) {
        snprintf(v, sizeof v, "%d.%d.0", g->cc_major, g->cc_minor);
        json_object_set_new(a, "computeCapability", attr_version(v));
    }
    if (driver_version && driver_semver(driver_version, v, sizeof v) == 0)
        json_object_set_new(a, "driverVersion", attr_version(v));
    if (g->numa >= 0)
        json_object_set_new(a, "numaNode", attr_int(g->numa));
    return a;
}

/* memory: the GPU's, in whole MiB; cores: 100. Each with the policy the
 * scheduler applies to a request (KEP-5075): the default when a request
 * names none, and the valid range it rounds a request up into. */
static json_t *device_capacity(const struct gs_nvml_gpu *g)
{
    char mem[40], def[40];
    snprintf(mem, sizeof mem, "%lluMi", (unsigned long long)(g->mem_total >> 20));
    snprintf(def, sizeof def, "%lldMi", (long long)(GS_DRA_MEMORY_DEFAULT >> 20));
    json_t *memory = json_pack("{s:s,s:{s:s,s:{s:s,s:s}}}", "value", mem, "requestPolicy", "default", def, "validRange",
                               "min", "1Mi", "step", "1Mi");
    char total[16], cdef[16];
    snprintf(total, sizeof total, "%d", GS_DRA_CORES_TOTAL);
    snprintf(cdef, sizeof cdef, "%d", GS_DRA_CORES_DEFAULT);
    json_t *cores = json_pack("{s:s,s:{s:s,s:{s:s,s:s,s:s}}}", "value", total, "requestPolicy", "default", cdef,
                              "validRange", "min", "0", "max", total, "step", "1");
    return json_pack("{s:o,s:o}", GS_DRA_CAP_MEMORY, memory, GS_DRA_CAP_CORES, cores);
}

json_t *gs_dra_slice(const char *node, const char *driver, int64_t gen, const struct gs_nvml_gpu *gpus, int n,
                     const char *driver_version)
{
    char name[600];
    if (gs_dra_slice_name(node, driver, name, sizeof name) != 0)
        return NULL;
    json_t *devices = json_array();
    for (int i = 0; i < n; i++) {
        if (!gpus[i].healthy)
            continue;
        char dev[GS_DRA_NAME_MAX];
        gs_dra_device_name(gpus[i].index, dev, sizeof dev);
        json_array_append_new(devices, json_pack("{s:s,s:b,s:o,s:o}", "name", dev, "allowMultipleAllocations", 1,
                                                 "attributes", device_attributes(&gpus[i], driver_version), "capacity",
                                                 device_capacity(&gpus[i])));
    }
    return json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s,s:{s:s,s:I,s:i},s:o}}", "apiVersion", GS_DRA_API, "kind",
                     "ResourceSlice", "metadata", "name", name, "spec", "driver", driver, "nodeName", node, "pool",
                     "name", node, "generation", (json_int_t)gen, "resourceSliceCount", 1, "devices", devices);
}

json_t *gs_dra_cdi_spec(const char *uid, const struct gs_container_edits *e)
{
    json_t *env = json_array(), *mounts = json_array();
    char kv[sizeof e->env[0][0] + sizeof e->env[0][1] + 2];
    for (int i = 0; i < e->nenv; i++) {
        snprintf(kv, sizeof kv, "%s=%s", e->env[i][0], e->env[i][1]);
        json_array_append_new(env, json_string(kv));
    }
    for (int i = 0; i < e->nmounts; i++)
        json_array_append_new(mounts,
                              json_pack("{s:s,s:s,s:[s,s,s,s]}", "hostPath", e->m[i].host, "containerPath",
                                        e->m[i].cont, "options", e->m[i].ro ? "ro" : "rw", "nosuid", "nodev", "bind"));
    return json_pack("{s:s,s:s,s:[{s:s,s:{s:o,s:o}}]}", "cdiVersion", GS_CDI_VERSION, "kind", GS_CDI_KIND, "devices",
                     "name", uid, "containerEdits", "env", env, "mounts", mounts);
}
