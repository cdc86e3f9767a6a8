/* Limits that refer to GPUs that exist. --device names GPUs of the host (as
 * nvidia-smi numbers them, or by UUID); an INDEX= of --memory counts the GPUs
 * the command sees, after --device, as CUDA numbers them inside it. A limit
 * above the memory of its GPU would show the tenant a larger GPU than there is:
 * refused. The GPUs are counted through NVML (dlopen'd); where NVML cannot be
 * read, nothing can be checked and the run is refused. */
#include "run_checks.h"
#include "size_parse.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOST_GPUS 64

struct nvml_memory {
    unsigned long long total, free, used;
};

struct host_gpus {
    unsigned count;
    char uuid[MAX_HOST_GPUS][96];
    uint64_t total[MAX_HOST_GPUS];
};

struct visible {
    unsigned count;
    unsigned host[GS_MAX_DEVICES]; /* host index of each visible GPU */
};

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_count_fn)(unsigned *);
typedef int (*nvml_handle_fn)(unsigned, void **);
typedef int (*nvml_uuid_fn)(void *, char *, unsigned);
typedef int (*nvml_mem_fn)(void *, struct nvml_memory *);

static int read_gpu(void *lib, unsigned i, struct host_gpus *g)
{
    nvml_handle_fn handle = (nvml_handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    nvml_uuid_fn uuid = (nvml_uuid_fn)dlsym(lib, "nvmlDeviceGetUUID");
    nvml_mem_fn mem = (nvml_mem_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo");
    void *h = NULL;
    struct nvml_memory m = { 0 };
    if (!handle || !uuid || !mem || handle(i, &h) != 0 || uuid(h, g->uuid[i], sizeof g->uuid[i]) != 0 ||
        mem(h, &m) != 0)
        return -1;
    g->total[i] = m.total;
    return 0;
}

static int read_host_gpus(struct host_gpus *g)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        fprintf(stderr, "gpuslice run: cannot count this host's GPUs to check --memory and --device: %s\n",
                why ? why : "libnvidia-ml.so.1 not found");
        return -1;
    }
    nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    nvml_count_fn count = (nvml_count_fn)dlsym(lib, "nvmlDeviceGetCount_v2");
    int rc = init && count && init() == 0 && count(&g->count) == 0 ? 0 : -1;
    if (rc == 0 && g->count > MAX_HOST_GPUS)
        g->count = MAX_HOST_GPUS;
    for (unsigned i = 0; rc == 0 && i < g->count; i++)
        rc = read_gpu(lib, i, g);
    if (rc != 0)
        fprintf(stderr, "gpuslice run: cannot read this host's GPUs through NVML to check --memory and --device\n");
    else if (g->count == 0)
        fprintf(stderr, "gpuslice run: NVML sees no GPU on this host: --memory and --device have nothing to limit\n");
    dlclose(lib);
    return rc == 0 && g->count > 0 ? 0 : -1;
}

/* One CUDA_VISIBLE_DEVICES entry: a host index, or a GPU UUID (or its
 * unambiguous start). Returns the host index or -1. */
static int host_index(const struct host_gpus *g, const char *entry)
{
    char *end = NULL;
    if (entry[0] >= '0' && entry[0] <= '9') {
        long v = strtol(entry, &end, 10);
        return *end == '\0' && v >= 0 && v < (long)g->count ? (int)v : -1;
    }
    int found = -1;
    size_t n = strlen(entry);
    for (unsigned i = 0; i < g->count; i++)
        if (n >= 8 && strncmp(g->uuid[i], entry, n) == 0) {
            if (found >= 0)
                return -1;
            found = (int)i;
        }
    return found;
}

static int parse_visible(const struct host_gpus *g, const char *list, const char *what, struct visible *v)
{
    char *copy = strdup(list);
    char *save = NULL;
    int rc = copy ? 0 : -1;
    v->count = 0;
    for (char *e = copy ? strtok_r(copy, ",", &save) : NULL; e && rc == 0; e = strtok_r(NULL, ",", &save)) {
        int h = host_index(g, e);
        int dup = 0;
        for (unsigned i = 0; i < v->count && h >= 0; i++)
            dup |= v->host[i] == (unsigned)h;
        if (h < 0 || dup || v->count == GS_MAX_DEVICES) {
            fprintf(stderr,
                    "gpuslice run: %s '%s': '%s' is %s; this host has %u GPU%s, numbered 0-%u as nvidia-smi "
                    "shows them (or give a GPU UUID)\n",
                    what, list, e, dup ? "given twice" : "not a GPU of this host", g->count, g->count == 1 ? "" : "s",
                    g->count - 1);
            rc = -1;
        } else {
            v->host[v->count++] = (unsigned)h;
        }
    }
    free(copy);
    return rc;
}

static void all_visible(const struct host_gpus *g, struct visible *v)
{
    v->count = g->count < GS_MAX_DEVICES ? g->count : GS_MAX_DEVICES;
    for (unsigned i = 0; i < v->count; i++)
        v->host[i] = i;
}

static int check_size(const struct host_gpus *g, const struct visible *v, unsigned idx, uint64_t limit,
                      const char *flag)
{
    unsigned h = v->host[idx];
    if (limit <= g->total[h])
        return 0;
    char want[GS_FORMAT_SIZE_MAX], have[GS_FORMAT_SIZE_MAX];
    gs_format_size(limit, want, sizeof want);
    gs_format_size(g->total[h], have, sizeof have);
    fprintf(stderr, "gpuslice run: --memory '%s': %s is more than GPU %u (%s) holds: %s\n", flag, want, h, g->uuid[h],
            have);
    return -1;
}

static int check_indexes(const struct gs_run_request *req, const struct visible *v)
{
    for (unsigned i = 0; i < GS_MAX_DEVICES; i++) {
        if (!(req->per_device_mask & (1U << i)) || i < v->count)
            continue;
        fprintf(stderr,
                "gpuslice run: --memory '%s': there is no GPU %u here: the command sees %u GPU%s, numbered "
                "0-%u (INDEX counts the GPUs the command sees, after --device)\n",
                req->memory_flag, i, v->count, v->count == 1 ? "" : "s", v->count ? v->count - 1 : 0);
        return -1;
    }
    return 0;
}

int gs_run_check_gpus(const struct gs_run_request *req)
{
    const char *env = getenv("CUDA_VISIBLE_DEVICES");
    if (!req->memory_flag && !req->device_flag)
        return 0;
    struct host_gpus *g = calloc(1, sizeof *g);
    struct visible v = { 0 };
    int rc = g ? read_host_gpus(g) : -1;
    if (rc == 0 && env)
        rc = parse_visible(g, env, req->device_flag ? "--device" : "CUDA_VISIBLE_DEVICES", &v);
    else if (rc == 0)
        all_visible(g, &v);
    if (rc == 0 && req->memory_flag && v.count == 0) {
        fprintf(stderr, "gpuslice run: --memory '%s': the command sees no GPU\n", req->memory_flag);
        rc = -1;
    }
    if (rc == 0 && req->memory_flag)
        rc = check_indexes(req, &v);
    for (unsigned i = 0; rc == 0 && req->memory_flag && i < v.count; i++)
        if (req->mem_limit[i])
            rc = check_size(g, &v, i, req->mem_limit[i], req->memory_flag);
    free(g);
    return rc;
}
