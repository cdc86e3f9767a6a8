/* The region's lock and its repair (see region_lock.h). */
#include "region_lock.h"

#include <errno.h>

void gs_region_rebuild_totals_locked(struct gs_region *r)
{
    uint64_t used[GS_REGION_MAX_DEVICES] = { 0 };
    for (int i = 0; i < GS_REGION_MAX_PROCS; i++)
        if (r->proc[i].pid != 0)
            for (int d = 0; d < GS_REGION_MAX_DEVICES; d++)
                used[d] += r->proc[i].mem_used[d];
    for (int d = 0; d < GS_REGION_MAX_DEVICES; d++)
        r->dev[d].mem_used = used[d];
}

int gs_region_lock(struct gs_region *r)
{
    int rc = pthread_mutex_lock(&r->lock);
    if (rc == EOWNERDEAD) {
        /* The holder died mid-update: slots are the truth, rebuild totals. */
        gs_region_rebuild_totals_locked(r);
        pthread_mutex_consistent(&r->lock);
        return 0;
    }
    return rc == 0 ? 0 : -1;
}

void gs_region_unlock(struct gs_region *r)
{
    pthread_mutex_unlock(&r->lock);
}
