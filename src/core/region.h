/*
 * The per-container shared state ("region"): one small versioned file mapped
 * by every process of the container, by the `gpuslice` node view and by the
 * node agent. It holds per-device limits and usage and one slot per process.
 *
 * Invariants
 * - A slot is live exactly while the byte of the file at its offset
 *   (gs_region_slot_byte) is write-locked by an open file description of
 *   its process (ofdlock.h). The kernel drops that lock when the process
 *   dies, in whatever pid namespace it ran, so a dead slot is recognised
 *   without judging pids.
 * - dev[d].mem_used == sum over live slots of proc[i].mem_used[d]; it is a
 *   cache that gs_region_reclaim_locked() rebuilds from the slots, so a
 *   process that dies anywhere, even inside the lock, leaves nothing behind.
 * - The lock is a robust process-shared mutex: a holder that dies hands the
 *   next locker EOWNERDEAD, which repairs the region and carries on.
 * - VMM memory exported by one process of the container and imported by
 *   others is charged once, to one holder (its payer), through an export
 *   record (region_export.h); the charge moves to another holder when the
 *   payer lets go or dies, and goes with the last holder.
 */
#ifndef GPUSLICE_REGION_H
#define GPUSLICE_REGION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "region_layout.h"
#include "region_lock.h"

/* Checks every field a reader relies on, one field at a time (so a region
 * that live processes are changing never fails it): magic, version, size,
 * ndevices, NUL-terminated names, pids, flags and byte counts in range.
 * Returns 0, or -1 with the first problem in err. */
int gs_region_check(const struct gs_region *r, char *err, size_t errlen);

/* Maps the region at path, creating and initialising it if needed
 * (create != 0); without create a missing, empty or blank (all-zero) file
 * is refused. Only a regular file is accepted, never through a symbolic
 * link, and only one that passes gs_region_check. Returns NULL and writes
 * what failed and why into err. With fd non-NULL, *fd receives this
 * process's own read-write, close-on-exec descriptor of the file: the one
 * that holds its slot's lock and asks about the others'. */
struct gs_region *gs_region_open(const char *path, int create, int *fd, char *err, size_t errlen);
/* As gs_region_open with create, for a region at a path anyone may create
 * (the default /tmp/gpuslice-<uid>.region): refuses a file that another user
 * owns or that group or others may write, saying so in err. */
struct gs_region *gs_region_open_private(const char *path, int *fd, char *err, size_t errlen);
/* Unmaps r and closes fd (-1: none), dropping any slot lock it holds. */
void gs_region_close(struct gs_region *r, int fd);

/* The byte of the region file whose lock keeps slot alive. */
off_t gs_region_slot_byte(int slot);

/* 1 if some process holds slot's byte, judged through fd (any descriptor
 * of the file except the one holding that very slot, which sees no
 * conflict with itself). An answer the kernel cannot give counts as alive:
 * usage is never freed on a guess. */
int gs_region_slot_alive(int fd, int slot);

/* With the lock held: drop slots of dead processes, judged through fd (see
 * gs_region_slot_alive; self: the caller's own slot, or -1), and rebuild
 * device totals from the slots. Returns the number of slots reclaimed. */
int gs_region_reclaim_locked(struct gs_region *r, int fd, int self);

/* Finds or adds the device with this UUID. A new device takes mem_limit;
 * an existing one keeps the smaller of the two non-zero limits. Returns the
 * index or -1 when the table is full. */
int gs_region_device(struct gs_region *r, const char *uuid, uint64_t mem_limit);

/* Records a device's configured compute cap (percent) for viewers; like
 * memory, the smaller non-zero value wins. */
void gs_region_set_sm_limit(struct gs_region *r, int dev, uint32_t pct);

/* Takes a slot for the calling process and write-locks its byte through
 * fd, which must be a description this process opened itself (never one
 * inherited across fork: the parent shares it). Returns the slot index or
 * -1 if every slot is held by a live process. */
int gs_region_attach(struct gs_region *r, int fd);
/* Releases everything the slot holds and frees it. Its byte stays locked
 * until the process's descriptor closes, at its exit: a free the process
 * still makes (code finalized after the interposer's) then finds the slot
 * empty, never another process's that took it meanwhile. */
void gs_region_detach(struct gs_region *r, int slot);

/* Gives the caller's own descriptor of the region (as for
 * gs_region_attach), or -1. Asked for only when dead slots are to be
 * reclaimed, and never with the region's lock held: finding it may need to
 * open the file again. */
typedef int (*gs_region_fd_fn)(void);

/* Reserves bytes on device dev for slot before the real allocation is made,
 * so that concurrent processes can never overshoot the limit together; when
 * the limit is in the way, dead slots are reclaimed through fd_of's
 * descriptor first. Returns 0 if reserved, -1 if it would exceed the limit. */
int gs_region_reserve(struct gs_region *r, gs_region_fd_fn fd_of, int slot, int dev, uint64_t bytes);
/* Returns bytes to the pool (after a free, or a failed allocation). Clamps
 * at zero: releasing more than the slot holds is a caller bug, reported by
 * the return value -1, never an underflow. */
int gs_region_release(struct gs_region *r, int slot, int dev, uint64_t bytes);

/* As gs_region_reserve and gs_region_release, for a context's overhead:
 * the bytes are also counted in the slot's ctx_overhead. A context is
 * reserved before it is created, and refused past the limit like any
 * allocation. */
int gs_region_reserve_overhead(struct gs_region *r, gs_region_fd_fn fd_of, int slot, int dev, uint64_t bytes);
int gs_region_release_overhead(struct gs_region *r, int slot, int dev, uint64_t bytes);

/* Adds overhead bytes already spent (a measured context overhead above
 * what was reserved for it), even past the limit. */
void gs_region_charge_force(struct gs_region *r, int slot, int dev, uint64_t bytes);

/* free = limit - used, clamped at zero (limit 0 means unlimited: returns
 * UINT64_MAX). */
uint64_t gs_region_free_bytes(const struct gs_region *r, int dev);

#endif
