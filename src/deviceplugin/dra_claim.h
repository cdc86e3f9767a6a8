/*
 * DRA: what an allocated ResourceClaim gives this node's driver, as a pure
 * function of the claim's JSON and a snapshot of the node (no I/O), so that
 * unit tests and the fuzz target run the very rule NodePrepareResources
 * runs. See docs/dra.md.
 *
 * The node publishes one device per GPU, named gs_dra_device_name(index),
 * in the pool named after the node, with two consumable capacities:
 * "memory" (bytes, 1 MiB steps) and "cores" (percent, 0..100; 0 = no cap).
 * A claim's results for our driver become the limits of one gpuslice
 * container (the claim): per GPU, the sum of what its results consumed.
 */
#ifndef GPUSLICE_DP_DRA_CLAIM_H
#define GPUSLICE_DP_DRA_CLAIM_H

#include <stddef.h>
#include <stdint.h>

#include "annotation.h"
#include "placement.h"

#define GS_DRA_DRIVER_DEFAULT "gpu.gpuslice.io"
#define GS_DRA_CAP_MEMORY "memory"
#define GS_DRA_CAP_CORES "cores"
#define GS_DRA_MEMORY_STEP (1LL << 20)         /* consumed memory is whole MiB */
#define GS_DRA_MEMORY_DEFAULT (1LL << 30)      /* requestPolicy default: 1 GiB */
#define GS_DRA_CORES_TOTAL 100                 /* a GPU's "cores" capacity */
#define GS_DRA_CORES_DEFAULT 0                 /* requestPolicy default: no cap */
#define GS_DRA_MAX_RESULTS 16                  /* results of our driver per claim */
#define GS_DRA_CONFIG_API "gpu.gpuslice.io/v1" /* opaque configuration: apiVersion ... */
#define GS_DRA_CONFIG_KIND "GpuConfig"         /* ... and kind */
#define GS_DRA_CLAIM_MAX_BYTES (1 << 20)       /* longest claim JSON read */
#define GS_DRA_NAME_MAX 64                     /* a device name or a DNS label, with NUL */
#define GS_DRA_REQUEST_MAX 128                 /* "request" or "request/subrequest", with NUL */

/* The device name of the GPU at NVML index i: "gpu-<i>". */
void gs_dra_device_name(unsigned index, char *out, size_t len);

/* One allocation result of our driver. */
struct gs_dra_result {
    char request[GS_DRA_REQUEST_MAX];
    char device[GS_DRA_NAME_MAX];
    int gpu;              /* index into the node view */
    int64_t memory_bytes; /* consumed */
    unsigned cores;       /* consumed, 0..100 */
};

/* The claim's allocation on this node. */
struct gs_dra_alloc {
    int nresults;
    struct gs_dra_result r[GS_DRA_MAX_RESULTS];
    /* Per GPU (sums of the results on it): the limits, in the form the
     * device-plugin path writes them (gs_limits_text, gs_roster_entry_of). */
    struct gs_assignment a;
    int gpu[GS_ASSIGN_MAX_GPUS];   /* view index of a.gpus[i] */
    int order[GS_ASSIGN_MAX_GPUS]; /* positions of a.gpus sorted by NVML index */
};

/* Parses ResourceClaim JSON text (as the API server serves it) and takes
 * the results of driver: each must be in the node's pool (v->node), name a
 * device of the node that is healthy (v->gpus[].healthy), and consume memory (whole MiB, > 0) and optionally cores
 * (0..100), nothing else; per GPU, the sums must fit the GPU (memory) and
 * 100 (cores). The compute mode is cap unless an opaque configuration of
 * driver in the allocation (from the claim or its class) says
 * {"apiVersion": GS_DRA_CONFIG_API, "kind": GS_DRA_CONFIG_KIND, "mode":
 * "share"}; any other parameters, or two that disagree, are refused. The
 * claim's metadata.uid must be uid. Returns 0, or -1 with
 * a one-line reason naming the bad field in err; never reads past len. */
int gs_dra_claim_parse(const char *text, size_t len, const char *driver, const struct gs_node_view *v, const char *uid,
                       struct gs_dra_alloc *out, char *err, size_t errlen);

/* The claim's pin: a header naming the claim uid, "mode cap|share", then
 * one line per GPU, "<uuid> <memory MiB> <cores>", in NVML order. A prepared claim whose
 * allocation reads differently is refused (docs/dra.md). */
void gs_dra_pin_text(const struct gs_dra_alloc *al, const char *uid, char *out, size_t len);

#endif
