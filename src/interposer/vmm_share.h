/*
 * VMM memory shared inside one container: an export is recorded in the
 * region (region_export.h) so that an importer of the same container shares
 * its single charge instead of paying again. See docs/memory.md.
 */
#ifndef GPUSLICE_VMM_SHARE_H
#define GPUSLICE_VMM_SHARE_H

#include "../abi/cuda_abi.h"

/* After a successful cuMemExportToShareableHandle of our own, charged
 * handle: records it, if the shareable handle names it soundly. */
void gs_vmm_share_exported(CUmemGenericAllocationHandle handle, const void *shareable, CUmemAllocationHandleType type);

/* After a successful import: 1 if it joined an export of this container
 * (the container pays already: charge nothing), 0 if it must be charged. */
int gs_vmm_share_imported(CUmemGenericAllocationHandle handle, const void *os_handle, CUmemAllocationHandleType type);

/* This process let go of one handle of export record `record` (its
 * GS_ALLOC_VMM_SHARED record, taken out of the allocation table): released,
 * and no mapping of it left. At its last handle the process leaves the
 * record, and the charge moves on or goes. */
void gs_vmm_share_leave(int record);

#endif
