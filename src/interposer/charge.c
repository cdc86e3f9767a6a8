#include "charge.h"
#include "log.h"
#include "runtime.h"

CUresult gs_charge_reserve(struct gs_charge *c, int dev, uint64_t bytes)
{
    c->active = 0;
    if (gs_mode() == GS_MODE_PASSTHROUGH || bytes == 0)
        return CUDA_SUCCESS;
    if (gs_rt_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev == GS_DEV_UNTRACKED)
        return CUDA_ERROR_OUT_OF_MEMORY; /* cannot account for it, so refuse it */
    if (dev < 0)
        return CUDA_SUCCESS; /* no current device: the real call fails on its own */
    struct gs_region *r = gs_rt_region();
    int s = gs_rt_slot();
    if (!r || s < 0)
        return CUDA_ERROR_OUT_OF_MEMORY; /* cannot account for it, so refuse it */
    if (gs_region_reserve(r, gs_rt_region_fd, s, dev, bytes) != 0) {
        gs_log(GS_LOG_INFO, "allocation of %llu bytes refused: %llu of %llu bytes in use on %s",
               (unsigned long long)bytes, (unsigned long long)r->dev[dev].mem_used,
               (unsigned long long)r->dev[dev].mem_limit, r->dev[dev].uuid);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->active = 1;
    c->dev = dev;
    c->slot = s;
    c->bytes = bytes;
    return CUDA_SUCCESS;
}

void gs_charge_commit(struct gs_charge *c, CUresult rc, enum gs_alloc_kind kind, uint64_t handle)
{
    if (!c->active)
        return;
    struct gs_region *r = gs_rt_region();
    if (rc != CUDA_SUCCESS) {
        gs_region_release(r, c->slot, c->dev, c->bytes);
        return;
    }
    struct gs_alloc_rec rec = { .bytes = c->bytes, .dev = c->dev, .slot = c->slot };
    struct gs_alloc_rec old;
    int replaced = 0;
    if (gs_alloc_put(kind, handle, rec, &old, &replaced) != 0) {
        /* Out of host memory: we cannot remember it, so its free cannot
         * release it. It stays charged until the process exits: counted
         * too long, never too little. */
        gs_log(GS_LOG_ERROR, "out of host memory tracking an allocation; it stays charged until the process exits");
    } else if (replaced) {
        /* The driver handed out an address we still held: its free went
         * around us. Drop the stale charge so it cannot leak. */
        gs_region_release(r, old.slot, old.dev, old.bytes);
    }
}

void gs_charge_release(enum gs_alloc_kind kind, uint64_t handle)
{
    struct gs_alloc_rec rec;
    gs_charge_free_end(kind, handle, &rec, gs_charge_free_begin(kind, handle, &rec), CUDA_SUCCESS);
}

void gs_charge_release_rec(const struct gs_alloc_rec *rec)
{
    struct gs_region *r = gs_rt_region();
    if (r && gs_region_release(r, rec->slot, rec->dev, rec->bytes) != 0)
        gs_log(GS_LOG_WARN, "released more than was charged on device %d; usage clamped at zero", rec->dev);
}

int gs_charge_free_begin(enum gs_alloc_kind kind, uint64_t handle, struct gs_alloc_rec *rec)
{
    return gs_mode() != GS_MODE_PASSTHROUGH && gs_alloc_take(kind, handle, rec) == 0;
}

void gs_charge_free_end(enum gs_alloc_kind kind, uint64_t handle, const struct gs_alloc_rec *rec, int taken,
                        CUresult rc)
{
    if (!taken) {
        if (rc == CUDA_SUCCESS && gs_mode() != GS_MODE_PASSTHROUGH)
            gs_log(GS_LOG_DEBUG, "free of untracked handle 0x%llx (kind %d): nothing was charged",
                   (unsigned long long)handle, (int)kind);
        return;
    }
    if (rc == CUDA_SUCCESS)
        gs_charge_release_rec(rec);
    else if (gs_alloc_put(kind, handle, *rec, NULL, NULL) != 0)
        /* the charge stays with nothing to release it: more than is used,
         * never less */
        gs_log(GS_LOG_WARN, "out of host memory keeping the record of 0x%llx after a failed free",
               (unsigned long long)handle);
}
