/*
 * The process list a tenant sees: its own container's processes, with the
 * pids of its own pid namespace and the memory gpuslice charged them. NVML
 * itself reports host pids (which mean nothing inside a container) and
 * every tenant's processes (which are none of its business).
 */
#include "log.h"
#include "nvml_procs.h"
#include "real_driver.h"
#include "runtime.h"

#include "../core/procinfo.h"

struct proc_entry {
    unsigned int pid;
    unsigned long long used;
};

/* Live processes of our container with usage on region device d. */
static unsigned int collect(const struct gs_region *r, int d, struct proc_entry *out, unsigned int cap)
{
    uint64_t my_ns = gs_proc_pidns();
    unsigned int n = 0;
    for (int i = 0; i < GS_REGION_MAX_PROCS; i++) {
        const struct gs_region_proc *p = &r->proc[i];
        int32_t pid = __atomic_load_n(&p->pid, __ATOMIC_RELAXED);
        uint64_t used = __atomic_load_n(&p->mem_used[d], __ATOMIC_RELAXED);
        if (pid <= 0 || used == 0 || p->pidns != my_ns || !gs_proc_alive(pid, p->start_time, p->pidns, my_ns))
            continue;
        if (n < cap)
            out[n] = (struct proc_entry){ (unsigned int)pid, used };
        n++;
    }
    return n;
}

/* Our view for device, or -1 to let the real driver answer. */
static int own_view(nvmlDevice_t device, struct proc_entry *entries, unsigned int cap, unsigned int *n)
{
    if (gs_mode() != GS_MODE_ENFORCE)
        return -1;
    int d = gs_rt_dev_of_nvml(device);
    struct gs_region *r = gs_rt_region();
    if (d < 0 || !r)
        return -1;
    *n = collect(r, d, entries, cap);
    return 0;
}

/* NVML's sizing protocol: *count in = capacity; out = entries needed. */
#define FILL_PROCESS_LIST(real, device, count, infos, assign)                                                          \
    do {                                                                                                               \
        struct proc_entry e_[GS_REGION_MAX_PROCS];                                                                     \
        unsigned int n_ = 0;                                                                                           \
        if (!(count))                                                                                                  \
            return NVML_ERROR_INVALID_ARGUMENT;                                                                        \
        if (own_view((device), e_, GS_REGION_MAX_PROCS, &n_) != 0)                                                     \
            return (real)((device), (count), (infos));                                                                 \
        unsigned int cap_ = *(count);                                                                                  \
        *(count) = n_;                                                                                                 \
        if (n_ > cap_ || (n_ > 0 && !(infos)))                                                                         \
            return NVML_ERROR_INSUFFICIENT_SIZE;                                                                       \
        for (unsigned int i_ = 0; i_ < n_; i_++) {                                                                     \
            assign;                                                                                                    \
        }                                                                                                              \
        return NVML_SUCCESS;                                                                                           \
    } while (0)

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos)
{
    GS_REAL_NVML_OR_NOT_FOUND(real, nvmlDeviceGetComputeRunningProcesses);
    FILL_PROCESS_LIST(real, device, infoCount, infos,
                      infos[i_] = ((nvmlProcessInfo_v1_t){ .pid = e_[i_].pid, .usedGpuMemory = e_[i_].used }));
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    GS_REAL_NVML_OR_NOT_FOUND(real, nvmlDeviceGetComputeRunningProcesses_v2);
    FILL_PROCESS_LIST(real, device, infoCount, infos, infos[i_] = gs_nvml_proc_entry(e_[i_].pid, e_[i_].used));
}

/* In the driver's layout: 32-byte entries on the 535 branch (nvml_procs.h). */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    GS_REAL_NVML_OR_NOT_FOUND(real, nvmlDeviceGetComputeRunningProcesses_v3);
    FILL_PROCESS_LIST(real, device, infoCount, infos, gs_nvml_v3_put(infos, i_, e_[i_].pid, e_[i_].used));
}
