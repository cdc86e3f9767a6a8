/* NVML's process lists in the installed driver's layout (nvml_procs.h). */
#include "nvml_procs.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "real_driver.h"

#define ENTRY_R535 32 /* nvmlProcessInfo_t and its usedGpuCcProtectedMemory */
#define NOT_MIG 0xFFFFFFFFU

_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "the 24-byte _v3 entry");

size_t gs_nvml_v3_entry_size(void)
{
    static size_t size; /* 0: not looked at yet; the answer is the same each time */
    size_t s = __atomic_load_n(&size, __ATOMIC_RELAXED);
    if (!s) {
        int r535 = GS_REAL_NVML(nvmlDeviceGetConfComputeMemSizeInfo) != NULL &&
                   GS_REAL_NVML(nvmlDeviceGetRunningProcessDetailList) == NULL;
        s = r535 ? ENTRY_R535 : sizeof(nvmlProcessInfo_t);
        __atomic_store_n(&size, s, __ATOMIC_RELAXED);
    }
    return s;
}

int gs_nvml_compute_procs(nvmlDevice_t h, unsigned int *pids, unsigned long long *used, unsigned int cap)
{
    gs_pfn_nvmlDeviceGetComputeRunningProcesses_v3 list = GS_REAL_NVML(nvmlDeviceGetComputeRunningProcesses_v3);
    size_t size = gs_nvml_v3_entry_size();
    unsigned char *buf = cap ? malloc((size_t)cap * size) : NULL;
    unsigned int n = cap;
    int got = -1;
    if (h && list && buf && list(h, &n, (nvmlProcessInfo_t *)(void *)buf) == NVML_SUCCESS) {
        got = (int)(n < cap ? n : cap);
        for (int i = 0; i < got; i++) {
            nvmlProcessInfo_t e; /* the first 24 bytes are the same in both layouts */
            memcpy(&e, buf + (size_t)i * size, sizeof e);
            pids[i] = e.pid;
            if (used)
                used[i] = e.usedGpuMemory;
        }
    }
    free(buf);
    return got;
}

nvmlProcessInfo_t gs_nvml_proc_entry(unsigned int pid, unsigned long long used)
{
    return (
        nvmlProcessInfo_t){ .pid = pid, .usedGpuMemory = used, .gpuInstanceId = NOT_MIG, .computeInstanceId = NOT_MIG };
}

void gs_nvml_v3_put(void *infos, unsigned int i, unsigned int pid, unsigned long long used)
{
    size_t size = gs_nvml_v3_entry_size();
    unsigned char *at = (unsigned char *)infos + (size_t)i * size;
    nvmlProcessInfo_t e = gs_nvml_proc_entry(pid, used);
    memset(at, 0, size);
    memcpy(at, &e, sizeof e);
}
