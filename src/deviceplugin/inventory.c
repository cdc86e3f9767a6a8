/* GPU inventory from NVML (dlopen'd) and SM counts from the CUDA driver. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "../abi/cuda_abi.h"
#include "inventory.h"
#include "kube_client.h"
#include "nvml_fns.h"
#include "uuid_format.h"

struct gs_nvml g_nvml;

#define LOAD(sym) g_nvml.sym = (typeof(g_nvml.sym))dlsym(g_nvml.lib, #sym)

static int nvml_open(char *err, size_t errlen)
{
    if (g_nvml.lib)
        return 0;
    g_nvml.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!g_nvml.lib)
        return 1; /* no driver: no GPUs */
    LOAD(nvmlInit_v2);
    LOAD(nvmlDeviceGetCount_v2);
    LOAD(nvmlDeviceGetHandleByIndex_v2);
    LOAD(nvmlDeviceGetUUID);
    LOAD(nvmlDeviceGetName);
    LOAD(nvmlDeviceGetMemoryInfo);
    LOAD(nvmlDeviceGetUtilizationRates);
    LOAD(nvmlSystemGetDriverVersion);
    LOAD(nvmlDeviceGetNumaNodeId);
    LOAD(nvmlEventSetCreate);
    LOAD(nvmlDeviceRegisterEvents);
    LOAD(nvmlEventSetWait_v2);
    LOAD(nvmlEventSetFree);
    LOAD(nvmlErrorString);
    if (!g_nvml.nvmlInit_v2 || !g_nvml.nvmlDeviceGetCount_v2 || !g_nvml.nvmlDeviceGetHandleByIndex_v2 ||
        !g_nvml.nvmlDeviceGetUUID || !g_nvml.nvmlDeviceGetMemoryInfo) {
        snprintf(err, errlen, "libnvidia-ml.so.1 lacks basic entry points");
        return -1;
    }
    int rc = g_nvml.nvmlInit_v2();
    if (rc != 0) {
        snprintf(err, errlen, "nvmlInit_v2 failed: %d", rc);
        return -1;
    }
    return 0;
}

typedef int (*cu_init_t)(unsigned);
typedef int (*cu_count_t)(int *);
typedef int (*cu_uuid_t)(unsigned char *, int);
typedef int (*cu_attr_t)(int *, int, int);

/* SM counts and compute capabilities through the CUDA driver: cuInit
 * creates no context, so this takes no GPU memory. */
static void cuda_attributes(struct gs_inventory *inv)
{
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu)
        return;
    cu_init_t init = (cu_init_t)dlsym(cu, "cuInit");
    cu_count_t count = (cu_count_t)dlsym(cu, "cuDeviceGetCount");
    cu_uuid_t uuid = (cu_uuid_t)dlsym(cu, "cuDeviceGetUuid");
    cu_attr_t attr = (cu_attr_t)dlsym(cu, "cuDeviceGetAttribute");
    int n = 0;
    if (init && count && uuid && attr && init(0) == 0 && count(&n) == 0) {
        for (int d = 0; d < n; d++) {
            unsigned char raw[16];
            char text[GS_UUID_TEXT_LEN];
            int sms, major, minor;
            if (uuid(raw, d) != 0 || attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d) != 0)
                continue;
            gs_format_gpu_uuid((const char *)raw, text, sizeof text);
            int i = gs_inventory_find(inv, text);
            if (i < 0)
                continue;
            inv->gpus[i].sm_count = sms;
            if (attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d) == 0 &&
                attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d) == 0) {
                inv->gpus[i].cc_major = major;
                inv->gpus[i].cc_minor = minor;
            }
        }
    }
    /* libcuda stays loaded: unloading a driver library is not safe. */
}

int gs_inventory_find(const struct gs_inventory *inv, const char *uuid)
{
    for (int i = 0; i < inv->ngpus; i++)
        if (strcmp(inv->gpus[i].uuid, uuid) == 0)
            return i;
    return -1;
}

int gs_inventory_init(struct gs_inventory *inv, char *err, size_t errlen)
{
    memset(inv, 0, sizeof *inv);
    pthread_mutex_init(&inv->lock, NULL);
    int rc = nvml_open(err, errlen);
    if (rc > 0) {
        kube_log(KUBE_LOG_WARN, "no libnvidia-ml.so.1 on this node: reporting no GPUs");
        return 0;
    }
    if (rc < 0)
        return -1;
    if (g_nvml.nvmlSystemGetDriverVersion)
        g_nvml.nvmlSystemGetDriverVersion(inv->driver, sizeof inv->driver);
    unsigned n = 0;
    if (g_nvml.nvmlDeviceGetCount_v2(&n) != 0) {
        snprintf(err, errlen, "nvmlDeviceGetCount_v2 failed");
        return -1;
    }
    if (n > GS_INV_MAX_GPUS) {
        kube_log(KUBE_LOG_WARN, "%u GPUs; using the first %d", n, GS_INV_MAX_GPUS);
        n = GS_INV_MAX_GPUS;
    }
    for (unsigned i = 0; i < n; i++) {
        struct gs_nvml_gpu *g = &inv->gpus[inv->ngpus];
        memset(g, 0, sizeof *g);
        g->index = i;
        g->sm_count = -1;
        g->cc_major = g->cc_minor = -1;
        g->numa = -1;
        g->healthy = 1;
        void *h = NULL;
        if (g_nvml.nvmlDeviceGetHandleByIndex_v2(i, &h) != 0 ||
            g_nvml.nvmlDeviceGetUUID(h, g->uuid, sizeof g->uuid) != 0) {
            kube_log(KUBE_LOG_ERROR, "GPU %u: NVML cannot name it; left out", i);
            continue;
        }
        g->handle = h;
        if (!g_nvml.nvmlDeviceGetName || g_nvml.nvmlDeviceGetName(h, g->model, sizeof g->model))
            snprintf(g->model, sizeof g->model, "unknown");
        struct gs_nvml_memory m;
        if (g_nvml.nvmlDeviceGetMemoryInfo(h, &m) == 0) {
            g->mem_total = m.total;
            g->mem_used = m.used;
        } else {
            g->healthy = 0;
            kube_log(KUBE_LOG_ERROR, "GPU %s: NVML memory query fails; marked unhealthy", g->uuid);
        }
        unsigned numa;
        if (g_nvml.nvmlDeviceGetNumaNodeId && g_nvml.nvmlDeviceGetNumaNodeId(h, &numa) == 0)
            g->numa = (int)numa;
        inv->ngpus++;
    }
    cuda_attributes(inv);
    for (int i = 0; i < inv->ngpus; i++) {
        const struct gs_nvml_gpu *g = &inv->gpus[i];
        kube_log(KUBE_LOG_INFO, "GPU %u: %s %s, %llu MiB, %d SMs, NUMA %d", g->index, g->uuid, g->model,
                 (unsigned long long)(g->mem_total >> 20), g->sm_count, g->numa);
    }
    return 0;
}

void gs_inventory_refresh(struct gs_inventory *inv)
{
    pthread_mutex_lock(&inv->lock);
    for (int i = 0; i < inv->ngpus; i++) {
        struct gs_nvml_gpu *g = &inv->gpus[i];
        struct gs_nvml_memory m;
        if (g->handle && g_nvml.nvmlDeviceGetMemoryInfo(g->handle, &m) == 0)
            g->mem_used = m.used;
        struct gs_nvml_util u;
        if (g->handle && g_nvml.nvmlDeviceGetUtilizationRates &&
            g_nvml.nvmlDeviceGetUtilizationRates(g->handle, &u) == 0)
            g->util_gpu = u.gpu;
    }
    pthread_mutex_unlock(&inv->lock);
}

json_t *gs_inventory_json(struct gs_inventory *inv, int replicas)
{
    json_t *gpus = json_array();
    pthread_mutex_lock(&inv->lock);
    for (int i = 0; i < inv->ngpus; i++) {
        const struct gs_nvml_gpu *g = &inv->gpus[i];
        json_t *o = json_pack("{s:i,s:s,s:s,s:I,s:i,s:b,s:i}", "index", (int)g->index, "uuid", g->uuid, "model",
                              g->model, "memory_mib", (json_int_t)(g->mem_total >> 20), "replicas", replicas, "healthy",
                              g->healthy, "sm_count", g->sm_count);
        json_object_set_new(o, "numa", g->numa >= 0 ? json_integer(g->numa) : json_null());
        if (g->sm_count < 0)
            json_object_set_new(o, "sm_count", json_null());
        json_array_append_new(gpus, o);
    }
    json_t *root = json_pack("{s:i,s:s,s:o}", "v", GS_INV_VERSION, "driver", inv->driver, "gpus", gpus);
    pthread_mutex_unlock(&inv->lock);
    return root;
}
