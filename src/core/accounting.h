/*
 * How many bytes of the limit an allocation is charged. The numbers follow
 * what the driver really takes, measured with NVML on an H200 (driver 580):
 * an allocation above 1 MiB occupies its size rounded up to 2 MiB; smaller
 * ones are packed into shared 2 MiB chunks, so they are charged their size
 * rounded to 4 KiB (a process's chunk slack, at most 2 MiB, is left to the
 * context overhead margin). See docs/memory.md.
 */
#ifndef GPUSLICE_ACCOUNTING_H
#define GPUSLICE_ACCOUNTING_H

#include <stdint.h>

#define GS_MIB (1024ULL * 1024ULL)
#define GS_LARGE_PAGE (2ULL * GS_MIB)

/* Bytes charged for a linear allocation of size bytes. */
uint64_t gs_charge_linear(uint64_t size);

/* Bytes charged for an array: width x height x depth x channels x element
 * size, each dimension at least 1, rounded up to 2 MiB. format is a
 * CUarray_format value; an unknown format is charged 16 bytes per channel
 * (the widest) so that we overcount rather than undercount. Saturates at
 * UINT64_MAX instead of overflowing. */
uint64_t gs_charge_array(uint64_t width, uint64_t height, uint64_t depth, unsigned channels, int format);

/* Sum over mip levels, each dimension halving down to 1. */
uint64_t gs_charge_mipmapped(uint64_t width, uint64_t height, uint64_t depth, unsigned channels, int format,
                             unsigned levels);

#endif
