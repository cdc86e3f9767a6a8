/*
 * The region's layout: what every process of a container, the node view and
 * the node agent map (region.h has the invariants and the functions over it;
 * region_export.h and region_lock.h work on this layout without them).
 */
#ifndef GPUSLICE_REGION_LAYOUT_H
#define GPUSLICE_REGION_LAYOUT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "limiter.h"

#define GS_REGION_MAGIC 0x45434c5355504721ULL /* "!GPUSLCE" */
/* 3: slots live by their OFD lock; 4: export records; 5: default_limit_mib; 6: run;
 * 7: the account's power_busy_ppm; 8: its woke_ns; 9: power_runs for power_busy_ppm;
 * 10: unused_draw_mw */
#define GS_REGION_VERSION 10U
#define GS_REGION_MAX_DEVICES 16
#define GS_REGION_MAX_PROCS 1024
#define GS_REGION_UUID_LEN 64

/* Per-process compute counters, all devices together. */
struct gs_lim_proc {
    uint64_t charged_ns; /* GPU time charged to the container by this process */
    uint64_t wait_ns;    /* time its threads waited for the container's tokens */
    uint64_t windows;    /* duty-cycle windows closed */
    uint64_t step_mark;  /* where it stands in its job's steps (gs_step_after_kernel) */
    uint64_t reserved[4];
};

struct gs_region_device {
    char uuid[GS_REGION_UUID_LEN]; /* "" = slot unused */
    uint64_t mem_limit;            /* bytes; 0 = unlimited */
    uint64_t mem_used;             /* bytes, all live processes */
    uint32_t sm_limit;             /* percent; 0 = unlimited */
    uint32_t flags;
    union {
        uint64_t compute[26]; /* the compute limiter's account (limiter.h) */
        struct gs_lim_account lim;
    };
};

struct gs_region_proc {
    int32_t pid; /* 0 = slot free; as its own pid namespace numbers it */
    uint32_t flags;
    uint64_t start_time;
    uint64_t pidns;
    uint64_t mem_used[GS_REGION_MAX_DEVICES];
    uint64_t ctx_overhead[GS_REGION_MAX_DEVICES];
    union {
        uint64_t compute[8]; /* the compute limiter's per-process counters */
        struct gs_lim_proc lim;
    };
};

/* One VMM allocation that a process of the container exported
 * (cuMemExportToShareableHandle), so that importers in the container can
 * find it and share its single charge (region_export.h). */
#define GS_REGION_MAX_EXPORTS 512
#define GS_EXPORT_HOLDERS 8 /* processes sharing one record; more are charged as foreign importers */
#define GS_EXPORT_KEYS 2    /* shareable handles of one allocation that importers can match */
#define GS_EXPORT_KEY_LEN 64

enum gs_export_key_type {
    GS_EXPORT_KEY_NONE = 0,
    GS_EXPORT_KEY_FILE = 1,  /* a POSIX fd whose own file names the export: st_dev, st_ino */
    GS_EXPORT_KEY_FABRIC = 2 /* a CU_MEM_HANDLE_TYPE_FABRIC handle: its 64 bytes */
};

struct gs_export_key {
    uint32_t type; /* enum gs_export_key_type */
    uint32_t pad;
    uint8_t bytes[GS_EXPORT_KEY_LEN];
};

struct gs_export_holder {
    int32_t slot;  /* -1 = unused */
    uint32_t refs; /* handles of the record this process holds */
};

struct gs_region_export {
    uint64_t bytes;  /* charged to payer on dev; 0 = record unused */
    uint64_t handle; /* the exporter's allocation handle, as its process numbers it */
    int32_t dev;
    int32_t payer;    /* slot whose mem_used[dev] holds the bytes */
    int32_t exporter; /* slot that keeps the keys valid, or -1 once it let go */
    uint32_t pad;
    struct gs_export_holder holder[GS_EXPORT_HOLDERS];
    struct gs_export_key key[GS_EXPORT_KEYS];
};

_Static_assert(sizeof(struct gs_lim_account) == 26 * sizeof(uint64_t), "limiter account must fill compute[]");
_Static_assert(sizeof(struct gs_lim_proc) == 8 * sizeof(uint64_t), "per-process counters must fill compute[]");

/* The limits of the `gpuslice run` that made a region, as its configuration
 * holds them (per CUDA ordinal the process sees), so that a later run of the
 * same --name is compared with them before any process touches a GPU. */
struct gs_region_run_limits {
    uint32_t set; /* 1: recorded at creation; 0: made by a process, not a run */
    uint32_t compute_mode;
    uint32_t share_weight;
    uint32_t managed_policy;
    uint64_t mem_limit[GS_REGION_MAX_DEVICES];
    uint32_t sm_limit[GS_REGION_MAX_DEVICES];
};

/* The byte of a region file on which every `gpuslice run` using the region
 * holds a shared OFD lock while its command runs: the region is in use
 * before any of its processes takes a slot. */
#define GS_REGION_RUN_BYTE ((off_t)0)

struct gs_region {
    uint64_t magic;
    uint32_t version;
    uint32_t size;
    uint64_t created_unix;
    char container[128];
    pthread_mutex_t lock;
    uint32_t ndevices;
    /* The memory limit the run that made the region set for every device, in
     * MiB (0: none, or per device): for viewers, before any device is used.
     * Never read for enforcement. */
    uint32_t default_limit_mib;
    struct gs_region_run_limits run; /* never read for enforcement */
    struct gs_region_device dev[GS_REGION_MAX_DEVICES];
    struct gs_region_proc proc[GS_REGION_MAX_PROCS];
    struct gs_region_export exports[GS_REGION_MAX_EXPORTS];
};

/* Largest byte count a region may hold in one counter: far above any GPU,
 * low enough that 1024 slots cannot overflow a 64-bit sum. */
#define GS_REGION_MAX_BYTES (1ULL << 50)
/* Largest pid Linux hands out (PID_MAX_LIMIT). */
#define GS_REGION_MAX_PID 4194304

#endif
