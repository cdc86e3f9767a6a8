/*
 * This process's VMM mappings, and what each mapped handle's release must
 * settle. The driver frees a VMM allocation only once its handle is
 * released AND every mapping of it is unmapped (NCCL releases a handle
 * right after mapping it), so its charge may only go then.
 *
 * - A mapping is recorded with its handle and its own charge (an import
 *   from another container pays per mapping; every other mapping 0 bytes).
 * - A handle has an entry while it has mappings. Released with mappings
 *   left, the entry keeps what the release must settle (the handle's
 *   alloc_table record, taken out of that table, so that the driver may
 *   hand the same handle value out again) until its last mapping goes.
 * - Process-local and not thread-safe: the caller holds one lock across
 *   each driver call and its update here, so the table follows the
 *   driver's order.
 */
#ifndef GPUSLICE_VMM_MAPS_H
#define GPUSLICE_VMM_MAPS_H

#include "alloc_table.h"

#include <stdint.h>

/* Far more mappings than any GPU's memory holds at the 2 MiB granularity. */
#define GS_VMM_MAX_MAPS (1U << 20)

/* What the end of a handle settles: its alloc_table record (kind 0: nothing). */
struct gs_vmm_settle {
    enum gs_alloc_kind kind;
    struct gs_alloc_rec rec;
};

/* Makes room for one more mapping, of a handle not seen yet too, so that
 * gs_vmm_map_add cannot fail once the real cuMemMap succeeded. 0, or -1
 * when the table is full or out of host memory. */
int gs_vmm_map_room(void);

/* Records the mapping [va, va + size) of handle, with its own charge.
 * 0, or -1 when there was no room (see gs_vmm_map_room). */
int gs_vmm_map_add(uint64_t va, uint64_t size, uint64_t handle, struct gs_alloc_rec charge);

/* handle was released. 1 if mappings still keep its memory: settle is kept
 * until the last of them goes. 0 if none does: the caller settles now. */
int gs_vmm_handle_released(uint64_t handle, const struct gs_vmm_settle *settle);

/* cuMemRetainAllocationHandle gave handle, which maps va, a reference
 * again after its release: 1 if the entry of that mapping is handle's,
 * released: it is live again and *settle, what its release had left to
 * the mappings, goes back to the caller. 0 if there is no such entry; -1
 * when out of host memory (nothing changed). */
int gs_vmm_handle_revived(uint64_t va, uint64_t handle, struct gs_vmm_settle *settle);

/* Called for each mapping dropped: its charge, and the settle of its handle
 * when that was the last mapping of a released handle (else NULL). */
typedef void (*gs_vmm_unmapped_fn)(const struct gs_alloc_rec *charge, const struct gs_vmm_settle *settle, void *arg);

/* Drops every mapping that starts in [va, va + size), as cuMemUnmap does
 * (one call may cover the mappings of several handles), calling unmapped
 * for each. Returns how many. */
int gs_vmm_unmapped(uint64_t va, uint64_t size, gs_vmm_unmapped_fn unmapped, void *arg);

/* Live mappings, and handles that have an entry (mapped, or released and
 * still mapped). */
uint32_t gs_vmm_map_count(void);
uint32_t gs_vmm_handle_count(void);

/* Forgets every entry without freeing it: in a forked child, a thread of
 * the parent may have been in the middle of an update. */
void gs_vmm_maps_abandon(void);

/* Caps the number of mappings (tests); GS_VMM_MAX_MAPS by default. */
void gs_vmm_maps_set_max(uint32_t max);

#endif
