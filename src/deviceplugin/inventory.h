/*
 * The node's GPUs as NVML (and, for the SM count, the CUDA driver) report
 * them, with their health. Both libraries are opened with dlopen, so the
 * agent starts and reports "no GPUs" on a node without a driver.
 */
#ifndef GPUSLICE_DP_INVENTORY_H
#define GPUSLICE_DP_INVENTORY_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "annotation.h"

#define GS_INV_MAX_GPUS 16
#define GS_INV_VERSION 1 /* of the gpuslice.io/gpu-inventory node annotation */
#define GS_ANN_INVENTORY "gpuslice.io/gpu-inventory"

/* One of this node's physical GPUs as NVML reports it (the scheduler's
 * model of a GPU is gs_sched_gpu, src/policy/policy.h). */
struct gs_nvml_gpu {
    unsigned index;
    char uuid[GS_UUID_MAX];
    char model[96];
    uint64_t mem_total; /* bytes */
    uint64_t mem_used;  /* bytes, device-wide, at the last refresh */
    unsigned util_gpu;  /* percent, at the last refresh (0 if unknown) */
    int sm_count;       /* -1 unknown */
    int cc_major;       /* compute capability, -1 unknown */
    int cc_minor;
    int numa; /* -1 unknown */
    int healthy;
    unsigned long long last_xid;
    time_t last_bad; /* time of the last critical XID */
    void *handle;    /* nvmlDevice_t */
};

struct gs_inventory {
    pthread_mutex_t lock;
    int ngpus;
    struct gs_nvml_gpu gpus[GS_INV_MAX_GPUS];
    unsigned generation; /* bumped on every health change */
    char driver[80];
};

/* Opens NVML and fills inv. Returns 0 (possibly with 0 GPUs when no driver
 * is present) or -1 with err when the driver is present but fails. */
int gs_inventory_init(struct gs_inventory *inv, char *err, size_t errlen);
/* Refreshes memory use and utilisation (for metrics). */
void gs_inventory_refresh(struct gs_inventory *inv);
/* The versioned JSON published on the Node object. Caller owns the result. */
json_t *gs_inventory_json(struct gs_inventory *inv, int replicas);
/* Index of the GPU with this uuid, or -1. Caller holds inv->lock. */
int gs_inventory_find(const struct gs_inventory *inv, const char *uuid);

/* Health: a thread waiting on NVML XID events. A critical XID marks the GPU
 * unhealthy; it is healthy again after recovery_s without one and once
 * NVML answers for it. ignore lists benign XIDs (application faults). */
struct gs_health_opts {
    int recovery_s;
    unsigned long long ignore[32];
    int nignore;
};
int gs_health_start(struct gs_inventory *inv, const struct gs_health_opts *opts, volatile int *stop, pthread_t *thread);

#endif
