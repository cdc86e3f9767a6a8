/*
 * Host memory the device reaches: cuMemAllocHost[_v2], cuMemHostAlloc and
 * cuMemFreeHost (pinned allocations), cuMemHostRegister[_v2] and
 * cuMemHostUnregister (pinned ranges of the program's own memory). Under
 * unified addressing such memory's device pointer is its host address, so a
 * kernel may spin on a flag there that the host writes while it runs
 * (sim_launch.c's "spin_flag"). With GPUSLICE_SIM_PAGEABLE_ACCESS=1 the
 * device reaches any host memory, as HMM lets it, and says so through
 * CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS. Process-local, as the memory
 * is; no device memory is taken.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cuda.h"

#define MAX_HOST_RANGES 256
#define HOST_PAGE 4096

/* cuMemHostAlloc: CU_MEMHOSTALLOC_PORTABLE | _DEVICEMAP | _WRITECOMBINED. */
#define HOST_ALLOC_FLAGS 0x7u
/* cuMemHostRegister: CU_MEMHOSTREGISTER_PORTABLE | _DEVICEMAP | _IOMEMORY | _READ_ONLY. */
#define HOST_REGISTER_FLAGS 0xfu

struct host_range {
    uintptr_t base;
    size_t size;
    int allocated; /* ours to free (cuMemFreeHost), else registered */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct host_range g_ranges[MAX_HOST_RANGES];
static int g_nranges;

/* The range starting at p of the kind asked for, or -1. g_lock held. */
static int range_at(uintptr_t p, int allocated)
{
    for (int i = 0; i < g_nranges; i++)
        if (g_ranges[i].base == p && g_ranges[i].allocated == allocated)
            return i;
    return -1;
}

static int overlaps_locked(uintptr_t p, size_t size)
{
    for (int i = 0; i < g_nranges; i++)
        if (p < g_ranges[i].base + g_ranges[i].size && g_ranges[i].base < p + size)
            return 1;
    return 0;
}

static CUresult add_range(void *p, size_t size, int allocated)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    if (overlaps_locked((uintptr_t)p, size))
        rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    else if (g_nranges == MAX_HOST_RANGES)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else
        g_ranges[g_nranges++] = (struct host_range){ (uintptr_t)p, size, allocated };
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* Removes the range at p of the kind asked for; whether there was one. */
static int take_range(const void *p, int allocated)
{
    pthread_mutex_lock(&g_lock);
    int i = range_at((uintptr_t)p, allocated);
    if (i >= 0)
        g_ranges[i] = g_ranges[--g_nranges];
    pthread_mutex_unlock(&g_lock);
    return i >= 0;
}

int sim_host_reachable(const void *p, size_t len)
{
    struct sim_state *st = sim_initialized_state();
    if (st && st->pageable_access)
        return 1;
    uintptr_t a = (uintptr_t)p;
    int found = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_nranges && !found; i++)
        found = a >= g_ranges[i].base && a + len <= g_ranges[i].base + g_ranges[i].size && a + len >= a;
    pthread_mutex_unlock(&g_lock);
    return found;
}

static CUresult host_alloc(void **pp, size_t bytes, unsigned int flags)
{
    if (!pp || !bytes || (flags & ~HOST_ALLOC_FLAGS) || bytes > SIZE_MAX - HOST_PAGE)
        return CUDA_ERROR_INVALID_VALUE;
    int ctx = -1;
    CUresult rc = sim_need_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    size_t size = (bytes + HOST_PAGE - 1) / HOST_PAGE * HOST_PAGE;
    void *p = NULL;
    if (posix_memalign(&p, HOST_PAGE, size) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, 0, size);
    rc = add_range(p, size, 1);
    if (rc != CUDA_SUCCESS) {
        free(p);
        return rc == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED ? CUDA_ERROR_OUT_OF_MEMORY : rc;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

SIM_API cuMemAllocHost(void **pp, unsigned int bytesize)
{
    return host_alloc(pp, bytesize, 0);
}

SIM_API cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return host_alloc(pp, bytesize, 0);
}

SIM_API cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    return host_alloc(pp, bytesize, Flags);
}

SIM_API cuMemFreeHost(void *p)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!p || !take_range(p, 1))
        return CUDA_ERROR_INVALID_VALUE;
    free(p);
    return CUDA_SUCCESS;
}

static CUresult host_register(void *p, size_t bytes, unsigned int flags)
{
    if (!p || !bytes || (flags & ~HOST_REGISTER_FLAGS) || (uintptr_t)p + bytes < (uintptr_t)p)
        return CUDA_ERROR_INVALID_VALUE;
    int ctx = -1;
    CUresult rc = sim_need_ctx(&ctx);
    return rc != CUDA_SUCCESS ? rc : add_range(p, bytes, 0);
}

SIM_API cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    return host_register(p, bytesize, Flags);
}

SIM_API cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    return host_register(p, bytesize, Flags);
}

SIM_API cuMemHostUnregister(void *p)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    return p && take_range(p, 0) ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}
