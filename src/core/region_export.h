/*
 * Export records: VMM memory that one process of a container exported
 * (cuMemExportToShareableHandle) and others of the same container imported
 * is charged once, to one holder, its payer.
 *
 * - The exporter's charge (from cuMemCreate) becomes the record's: it stays
 *   in the payer's slot, so device totals and the slots keep agreeing.
 * - An importer that finds the record by its key joins it and is charged
 *   nothing for the handle or its mappings.
 * - When the payer lets go of its last handle, or dies, the charge moves to
 *   another holder; with none left, it is released.
 * - A key is only valid while the exporter holds the allocation (it keeps
 *   what makes the key unique alive, see vmm_share.c); after that nobody
 *   new can join, and a later importer is charged as a foreign one.
 *
 * Every function takes the region lock itself unless its name ends in
 * _locked. Slots and records are indexes into the region.
 */
#ifndef GPUSLICE_REGION_EXPORT_H
#define GPUSLICE_REGION_EXPORT_H

#include <stddef.h>

#include "region_layout.h"

/* A new record of bytes on dev, already charged to slot, which holds one
 * handle of it and keeps key valid. Returns its index, or -1 when the table
 * is full or the lock unusable (importers are then charged as foreign). */
int gs_region_export_new(struct gs_region *r, int slot, int dev, uint64_t bytes, const struct gs_export_key *key);

/* The exporter (slot) exported record idx once more: adds key. 0, or -1
 * when the record has no room for another key. */
int gs_region_export_add_key(struct gs_region *r, int idx, int slot, const struct gs_export_key *key);

/* slot imported a handle named by key: joins the record with that valid
 * key. Returns its index and its device through *dev, or -1 when none
 * matches or the record has no room for another holder. */
int gs_region_export_join(struct gs_region *r, int slot, const struct gs_export_key *key, int *dev);

/* slot released one handle of record idx. At its last one it leaves: the
 * charge moves to another holder if it paid, or is released with the
 * record when nobody else holds it. Returns 0, or -1 when slot did not
 * hold the record (nothing changes then). */
int gs_region_export_leave(struct gs_region *r, int idx, int slot);

/* With the lock held: every slot with gone[slot] != 0 leaves every record
 * at once (a process that died or detaches). */
void gs_region_exports_drop_locked(struct gs_region *r, const unsigned char gone[GS_REGION_MAX_PROCS]);

/* Checks the export table of a region that passed the header checks (for
 * gs_region_check). 0, or -1 with the problem in err. */
int gs_region_exports_check(const struct gs_region *r, char *err, size_t errlen);

#endif
