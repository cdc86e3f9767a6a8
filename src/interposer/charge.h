/*
 * Reserve-then-allocate: every counted allocation reserves its bytes in the
 * region under the lock BEFORE the real driver call, then either records
 * them (success) or gives them back (failure). Concurrent processes of one
 * container can therefore never overshoot the limit together.
 */
#ifndef GPUSLICE_CHARGE_H
#define GPUSLICE_CHARGE_H

#include "../abi/cuda_abi.h"
#include "../core/alloc_table.h"

#include <stdint.h>

struct gs_charge {
    int active; /* 0: nothing reserved (passthrough or zero bytes) */
    int dev;
    int slot;
    uint64_t bytes;
};

/* Reserves bytes on region device dev (from gs_rt_dev_*). Returns
 * CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY over the limit, or
 * CUDA_ERROR_NOT_INITIALIZED when gpuslice is failing closed. */
CUresult gs_charge_reserve(struct gs_charge *c, int dev, uint64_t bytes);

/* After the real call: keep the reservation under (kind, handle) if rc is
 * CUDA_SUCCESS, otherwise give it back. */
void gs_charge_commit(struct gs_charge *c, CUresult rc, enum gs_alloc_kind kind, uint64_t handle);

/* After a successful free: release exactly what (kind, handle) was charged.
 * Untracked handles (allocated before gpuslice was loaded, or with no limit
 * in force) were never charged, so nothing is released. */
void gs_charge_release(enum gs_alloc_kind kind, uint64_t handle);

/* Releases a record already taken out of the allocation table. */
void gs_charge_release_rec(const struct gs_alloc_rec *rec);

/* A free in two steps around the driver's call. Before it, (kind, handle)'s
 * record is taken out of the table (1 if there was one): once the driver has
 * freed, it may hand the same address to another thread's allocation at
 * once, whose record a take after the call would remove, leaving that
 * allocation uncharged for its life. After it, the record is released if
 * the free succeeded, else put back. */
int gs_charge_free_begin(enum gs_alloc_kind kind, uint64_t handle, struct gs_alloc_rec *rec);
void gs_charge_free_end(enum gs_alloc_kind kind, uint64_t handle, const struct gs_alloc_rec *rec, int taken,
                        CUresult rc);

#endif
