/*
 * What a tenant sees: the limit as the device's total memory, and
 * free = limit - used, clamped at zero (never the huge unsigned number an
 * underflow gives), and never more than the device really has free.
 */
#include "log.h"
#include "real_driver.h"
#include "runtime.h"

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemGetInfo_v2);
    CUresult rc = real(free_bytes, total_bytes);
    if (rc != CUDA_SUCCESS || gs_mode() != GS_MODE_ENFORCE)
        return rc;
    int dev = gs_rt_dev_current(NULL);
    struct gs_region *r = gs_rt_region();
    if (dev < 0 || !r || r->dev[dev].mem_limit == 0)
        return rc;
    uint64_t limit = r->dev[dev].mem_limit;
    if (total_bytes)
        *total_bytes = (size_t)limit;
    if (free_bytes)
        *free_bytes = (size_t)min_u64(gs_region_free_bytes(r, dev), *free_bytes);
    return rc;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuDeviceTotalMem_v2);
    CUresult rc = real(bytes, dev);
    if (rc != CUDA_SUCCESS || gs_mode() != GS_MODE_ENFORCE || !bytes)
        return rc;
    int d = gs_rt_dev_of_ordinal(dev);
    struct gs_region *r = gs_rt_region();
    if (d >= 0 && r && r->dev[d].mem_limit)
        *bytes = (size_t)min_u64(r->dev[d].mem_limit, *bytes);
    return rc;
}

/* Fills the limited view for an NVML device; 0 if a limit applies. */
static int limited_view(nvmlDevice_t device, unsigned long long real_free, unsigned long long *total,
                        unsigned long long *used, unsigned long long *free_out)
{
    if (gs_mode() != GS_MODE_ENFORCE)
        return -1;
    int d = gs_rt_dev_of_nvml(device);
    struct gs_region *r = gs_rt_region();
    if (d < 0 || !r || r->dev[d].mem_limit == 0)
        return -1;
    uint64_t limit = r->dev[d].mem_limit;
    uint64_t in_use = __atomic_load_n(&r->dev[d].mem_used, __ATOMIC_RELAXED);
    *total = limit;
    *used = min_u64(in_use, limit);
    *free_out = min_u64(gs_region_free_bytes(r, d), real_free);
    return 0;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    GS_REAL_NVML_OR_NOT_FOUND(real, nvmlDeviceGetMemoryInfo);
    nvmlReturn_t rc = real(device, memory);
    if (rc == NVML_SUCCESS)
        (void)limited_view(device, memory->free, &memory->total, &memory->used, &memory->free);
    return rc;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    GS_REAL_NVML_OR_NOT_FOUND(real, nvmlDeviceGetMemoryInfo_v2);
    nvmlReturn_t rc = real(device, memory);
    /* The driver's reserved memory is outside any tenant's limit. */
    if (rc == NVML_SUCCESS && limited_view(device, memory->free, &memory->total, &memory->used, &memory->free) == 0)
        memory->reserved = 0;
    return rc;
}
