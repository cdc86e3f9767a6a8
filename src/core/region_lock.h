/* The region's lock: a robust process-shared mutex, so that a holder that
 * dies hands the next locker EOWNERDEAD, which repairs the region. */
#ifndef GPUSLICE_REGION_LOCK_H
#define GPUSLICE_REGION_LOCK_H

#include "region_layout.h"

/* Lock/unlock; lock repairs the region when the previous holder died.
 * Returns 0, or -1 if the lock is unrecoverable. */
int gs_region_lock(struct gs_region *r);
void gs_region_unlock(struct gs_region *r);

/* With the lock held: device totals rebuilt from the slots, which are the
 * truth. */
void gs_region_rebuild_totals_locked(struct gs_region *r);

#endif
