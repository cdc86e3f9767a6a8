/* The limiter's slow outer loop (compute_outer.c). */
#ifndef GPUSLICE_COMPUTE_OUTER_H
#define GPUSLICE_COMPUTE_OUTER_H

#include <stdint.h>

#include "../core/region.h"

/* At most every GS_LIM_OUTER_NS per container and device, from any of its
 * processes: NVML corrections and share-mode targets. Claims the run and
 * hands it to the process's outer thread. */
void gs_compute_outer(struct gs_region *r, int dev, uint64_t now);

/* One run of the outer loop for device dev, now (nothing once stopped). */
void gs_compute_outer_run(struct gs_region *r, int dev);

/* At exit: waits for a run in progress; no run reads NVML after it. */
void gs_compute_outer_stop(void);

/* compute_outer_thread.c: hands a claimed run of device dev to the outer
 * thread, started at the first; 0 where there is none (run it inline). */
int gs_compute_outer_post(int dev);

/* The outer loop's locks around fork(), taken by the outer thread's
 * handlers (fork_hooks.h): no run is in progress at a fork. */
void gs_compute_outer_fork_prepare(void);
void gs_compute_outer_fork_parent(void);
void gs_compute_outer_fork_child(void);

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
