/* The GPUs of this host as NVML reports them (libnvidia-ml.so.1, dlopen'd so
 * that gpuslice starts on machines without a driver): what `run` checks
 * limits against and what `top` shows. */
#ifndef GPUSLICE_CLI_HOST_GPUS_H
#define GPUSLICE_CLI_HOST_GPUS_H

#include <stddef.h>
#include <stdint.h>

#define GS_HOST_MAX_GPUS 64

struct gs_host_gpu {
    char uuid[96];
    char name[96];
    uint64_t total, free; /* bytes */
};

struct gs_host_gpus {
    unsigned count;
    struct gs_host_gpu gpu[GS_HOST_MAX_GPUS];
};

/* Reads every GPU (at most GS_HOST_MAX_GPUS) through the NVML at nvml, a
 * path, or NULL for the loader's libnvidia-ml.so.1. Returns 0, or -1 with
 * the reason in err; no_driver is set when NVML itself cannot be loaded. */
int gs_host_gpus_read(struct gs_host_gpus *g, const char *nvml, int *no_driver, char *err, size_t errlen);

#endif
