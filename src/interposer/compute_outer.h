/* The limiter's slow outer loop (compute_outer.c). */
#ifndef GPUSLICE_COMPUTE_OUTER_H
#define GPUSLICE_COMPUTE_OUTER_H

#include <stdint.h>

#include "../core/region.h"

/* At most every GS_LIM_OUTER_NS per container and device, from any of its
 * processes: NVML corrections and share-mode targets. */
void gs_compute_outer(struct gs_region *r, int dev, uint64_t now);

/* Whether other containers of device dev's ledger were active at this
 * process's last outer run. */
int gs_compute_others_active(int dev);

#endif
