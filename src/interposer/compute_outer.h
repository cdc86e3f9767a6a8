/* The limiter's slow outer loop (compute_outer.c). */
#ifndef GPUSLICE_COMPUTE_OUTER_H
#define GPUSLICE_COMPUTE_OUTER_H

#include <stdint.h>

#include "../core/region.h"

/* At most every GS_LIM_OUTER_NS per container and device, from any of its
 * processes: NVML corrections and share-mode targets. */
void gs_compute_outer(struct gs_region *r, int dev, uint64_t now);

/* Whether the gap probe looks at CPU gaps from GS_LIM_FINE_GAP_NS on device
 * dev: other containers of its ledger were busy at this process's last
 * outer run, and the device was not busy well under our cap. */
int gs_compute_fine_probe(int dev);

/* Whether CUDA-graph launches on device dev are measured as other launches
 * (no probe from the fine gap, no marker each): at this process's last
 * outer run NVML's per-process samples measured its time, alone on the
 * device. */
int gs_compute_graph_coarse(int dev);

/* Whether this process keeps its queue on device dev shallow
 * (GPUSLICE_SHARE_YIELD_US): share mode, using a light neighbour's part
 * (gs_lim_yields) at its last outer run. */
int gs_compute_yield(int dev);

#endif
