/*
 * DRA: the objects the driver writes, built as pure functions (no I/O):
 * the node's ResourceSlice (resource.k8s.io/v1) and a claim's CDI spec.
 * See docs/dra.md for their fields.
 */
#ifndef GPUSLICE_DP_DRA_OBJECTS_H
#define GPUSLICE_DP_DRA_OBJECTS_H

#include <jansson.h>
#include <stdint.h>

#include "container_edits.h"
#include "inventory.h"

#define GS_DRA_API "resource.k8s.io/v1"
#define GS_CDI_VERSION "0.6.0"
#define GS_CDI_KIND "gpuslice.io/gpu" /* our CDI devices: gpuslice.io/gpu=<claim uid> */

/* The node's ResourceSlice, named gs_dra_slice_name: one device per healthy
 * GPU of gpus[0..n) (an unhealthy one leaves it), each with the attributes
 * uuid, index, productName, computeCapability, driverVersion (driver, as
 * semver; left out when the driver's version is not numeric) and numaNode
 * (when known), the capacities memory (the GPU's, whole MiB; request
 * policy: default 1Gi, from 1Mi in steps of 1Mi) and cores (100; default 0
 * = no cap, 0..100 in steps of 1), and allowMultipleAllocations. The
 * pool is the node, at generation gen. A new reference. */
json_t *gs_dra_slice(const char *node, const char *driver, int64_t gen, const struct gs_nvml_gpu *gpus, int n,
                     const char *driver_version);
/* "<node>-<driver>", or -1 when it does not fit len. */
int gs_dra_slice_name(const char *node, const char *driver, char *out, size_t len);

/* The CDI spec of claim uid: one device named uid whose containerEdits
 * are e (the environment and mounts of the device-plugin path, mounts as
 * bind mounts, read-only where e says). A new reference. */
json_t *gs_dra_cdi_spec(const char *uid, const struct gs_container_edits *e);

#endif
