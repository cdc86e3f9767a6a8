/*
 * Process-local record of what each live allocation was charged, so a free
 * releases exactly what was counted. Device pointers are only meaningful in
 * the process that made them, so this never lives in the shared region (a
 * dead process's charges are reclaimed wholesale through its region slot).
 *
 * Thread-safe: 64 stripes, each behind a one-atomic spinlock; no syscalls.
 */
#ifndef GPUSLICE_ALLOC_TABLE_H
#define GPUSLICE_ALLOC_TABLE_H

#include <stdint.h>

/* Kinds keep handles of different object types apart in one table. */
enum gs_alloc_kind {
    GS_ALLOC_PTR = 1,           /* device pointer: classic, pitch, managed, async, pool */
    GS_ALLOC_VMM = 2,           /* cuMemCreate handle */
    GS_ALLOC_ARRAY = 3,         /* CUarray */
    GS_ALLOC_MIPMAP = 4,        /* CUmipmappedArray */
    GS_ALLOC_IPC = 5,           /* pointer returned by cuIpcOpenMemHandle */
    GS_ALLOC_VMM_IMPORT = 6,    /* handle from cuMemImportFromShareableHandle (0 bytes: a marker) */
    GS_ALLOC_GRAPH = 8,         /* graph allocation node of a live executable graph, by its address */
    GS_ALLOC_VMM_SHARED = 9,    /* handle of an export record (region_export.h): exported, or imported from it */
    GS_ALLOC_CTX = 10,          /* context made by cuCtxCreate*, by its CUcontext: its overhead */
    GS_ALLOC_VMM_RETAINED = 11, /* VMM handle: bytes counts the references cuMemRetainAllocationHandle added */
    GS_ALLOC_POOL = 12          /* memory pool: dev is where its memory lands (0 bytes: a marker) */
};

struct gs_alloc_rec {
    uint64_t bytes;
    int32_t dev;
    union {
        int32_t slot;   /* region slot that was charged */
        int32_t record; /* GS_ALLOC_VMM_SHARED: the region's export record, which holds the charge */
    };
};

/* Records a charge. Returns 0, or -1 if out of host memory. A key already
 * present is overwritten (the driver reused an address we never saw freed);
 * its old record is returned through *replaced when replaced != NULL. */
int gs_alloc_put(enum gs_alloc_kind kind, uint64_t handle, struct gs_alloc_rec rec, struct gs_alloc_rec *replaced,
                 int *was_replaced);

/* Removes and returns the record. Returns 0, or -1 if unknown. */
int gs_alloc_take(enum gs_alloc_kind kind, uint64_t handle, struct gs_alloc_rec *out);

/* Copies the record without removing it. Returns 0, or -1 if unknown. */
int gs_alloc_get(enum gs_alloc_kind kind, uint64_t handle, struct gs_alloc_rec *out);

/* Drops everything (a forked child starts with no allocations). */
void gs_alloc_clear(void);

/* Lock/unlock all stripes around fork() so the child never inherits a held
 * stripe lock. */
void gs_alloc_lock_all(void);
void gs_alloc_unlock_all(void);

#endif
