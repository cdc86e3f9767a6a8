/*
 * NVML's process lists as the installed driver lays them out. The _v3
 * queries (nvmlDeviceGet*RunningProcesses_v3) fill entries of 24 bytes
 * (nvmlProcessInfo_t), except on the 535 driver branch, whose entries carry
 * a fifth field, usedGpuCcProtectedMemory (32 bytes); the next branch went
 * back to 24 and moved that field to nvmlDeviceGetRunningProcessDetailList.
 * A library that has nvmlDeviceGetConfComputeMemSizeInfo (new in 535) but
 * not the detail list (new after it) is of that branch. Read or written at
 * 24 bytes there, a list's second entry is misread, and a buffer sized for
 * 24-byte entries overflows. tests/abi/nvml_v3_rule.sh holds this rule to
 * NVIDIA's nvml.h of releases 12.1 to 12.9 (the 535 branch's 12.2.81 and
 * 12.2.128: 32 bytes).
 */
#ifndef GPUSLICE_NVML_PROCS_H
#define GPUSLICE_NVML_PROCS_H

#include <stddef.h>

#include "../abi/nvml_abi.h"

/* The size of one _v3 entry the installed driver fills: 24 or 32. */
size_t gs_nvml_v3_entry_size(void);

/* Device h's compute processes through the real _v3 query: up to cap pids
 * and, where used is not NULL, their used memory
 * (NVML_VALUE_NOT_AVAILABLE_ULL: unknown). Returns how many (at most cap),
 * or -1 where NVML did not answer. */
int gs_nvml_compute_procs(nvmlDevice_t h, unsigned int *pids, unsigned long long *used, unsigned int cap);

/* The 24-byte entry of a process: pid and used memory, not a MIG instance. */
nvmlProcessInfo_t gs_nvml_proc_entry(unsigned int pid, unsigned long long used);

/* Entry i of a _v3 list the program handed NVML, in the driver's layout:
 * gs_nvml_proc_entry, and no protected memory. */
void gs_nvml_v3_put(void *infos, unsigned int i, unsigned int pid, unsigned long long used);

#endif
