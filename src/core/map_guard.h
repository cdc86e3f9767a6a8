/*
 * Shared mappings of files that another party can shrink. Every container on
 * a GPU maps its device ledger read-write, so any of them can truncate it,
 * and a process that then touches the lost pages would die of SIGBUS. A
 * guarded range turns such a fault into zeroed private pages over the whole
 * range and marks it tripped: its owner reads an empty ledger (which it
 * already treats as "no other container") instead of crashing.
 *
 * The SIGBUS handler is installed on the first guard and chains to the one
 * it found for faults outside every guarded range.
 */
#ifndef GPUSLICE_MAP_GUARD_H
#define GPUSLICE_MAP_GUARD_H

#include <stddef.h>

/* Guards [base, base+len). 0, or -1 when every guard slot is taken (the
 * mapping then stays unguarded). */
int gs_map_guard_add(void *base, size_t len);
/* Stops guarding the range that starts at base (before it is unmapped). */
void gs_map_guard_remove(const void *base);
/* 1 once a fault in the range starting at base was absorbed. */
int gs_map_guard_tripped(const void *base);
/* Clears that mark, before the range is mapped again; sets it again where
 * that failed. */
void gs_map_guard_rearm(const void *base);
void gs_map_guard_trip(const void *base);

#endif
