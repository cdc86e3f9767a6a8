#include "host_gpus.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define NVML_DEFAULT "libnvidia-ml.so.1"

struct nvml_memory {
    unsigned long long total, free, used;
};

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_shutdown_fn)(void);
typedef int (*nvml_count_fn)(unsigned *);
typedef int (*nvml_handle_fn)(unsigned, void **);
typedef int (*nvml_text_fn)(void *, char *, unsigned);
typedef int (*nvml_mem_fn)(void *, struct nvml_memory *);

static int read_gpu(void *lib, unsigned i, struct gs_host_gpu *gpu)
{
    nvml_handle_fn handle = (nvml_handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    nvml_text_fn uuid = (nvml_text_fn)dlsym(lib, "nvmlDeviceGetUUID");
    nvml_text_fn name = (nvml_text_fn)dlsym(lib, "nvmlDeviceGetName");
    nvml_mem_fn mem = (nvml_mem_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo");
    void *h = NULL;
    struct nvml_memory m = { 0 };
    if (!handle || !uuid || !mem || handle(i, &h) != 0 || uuid(h, gpu->uuid, sizeof gpu->uuid) != 0 || mem(h, &m) != 0)
        return -1;
    if (!name || name(h, gpu->name, sizeof gpu->name) != 0)
        snprintf(gpu->name, sizeof gpu->name, "?"); /* a name is only shown */
    gpu->total = m.total;
    gpu->free = m.free;
    return 0;
}

int gs_host_gpus_read(struct gs_host_gpus *g, const char *nvml, int *no_driver, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    *no_driver = 0;
    /* opened once and kept: `top --watch` reads the GPUs every refresh, and
     * an NVML unloaded each time left its descriptor and mappings behind */
    static void *lib;
    static char lib_path[PATH_MAX];
    const char *path = nvml ? nvml : NVML_DEFAULT;
    if (lib && strcmp(lib_path, path) != 0)
        lib = NULL; /* another library asked for: the first stays loaded */
    if (!lib && (lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)) != NULL)
        snprintf(lib_path, sizeof lib_path, "%s", path);
    if (!lib) {
        const char *why = dlerror();
        snprintf(err, errlen, "no NVIDIA driver here (%s)", why ? why : NVML_DEFAULT " not found");
        *no_driver = 1;
        return -1;
    }
    nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    nvml_count_fn count = (nvml_count_fn)dlsym(lib, "nvmlDeviceGetCount_v2");
    nvml_shutdown_fn shutdown = (nvml_shutdown_fn)dlsym(lib, "nvmlShutdown");
    int inited = init && init() == 0;
    int rc = inited && count && count(&g->count) == 0 ? 0 : -1;
    if (rc == 0 && g->count > GS_HOST_MAX_GPUS)
        g->count = GS_HOST_MAX_GPUS;
    for (unsigned i = 0; rc == 0 && i < g->count; i++)
        rc = read_gpu(lib, i, &g->gpu[i]);
    if (rc != 0)
        snprintf(err, errlen, "cannot read this host's GPUs through NVML");
    if (inited && shutdown)
        shutdown(); /* each init holds NVML's resources until its shutdown */
    return rc;
}
