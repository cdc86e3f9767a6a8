/*
 * cuInit, the per-call bracket every stateful entry point uses, and the
 * device queries (count, name, UUID, attributes, total memory).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_cuda.h"

static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_state *g_st;
static pid_t g_init_pid; /* a forked child must call cuInit again */

/* CUDA ordinal -> physical device, from CUDA_VISIBLE_DEVICES at cuInit. */
static int g_visible[SIM_MAX_DEVICES];
static int g_nvisible;

/* One CUDA_VISIBLE_DEVICES entry: an index or a UUID ("GPU-...", a unique
 * prefix will do). -1 if it names no device. */
static int parse_visible(const char *tok, size_t len, uint32_t ndevices)
{
    if (len >= 4 && strncmp(tok, "GPU-", 4) == 0) {
        int found = -1;
        for (uint32_t d = 0; d < ndevices; d++) {
            char u[80];
            sim_device_uuid_string((int)d, u, sizeof u);
            if (strncmp(u, tok, len) == 0) {
                if (found >= 0)
                    return -1; /* ambiguous prefix */
                found = (int)d;
            }
        }
        return found;
    }
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (tok[i] < '0' || tok[i] > '9' || v > 1000)
            return -1;
        v = v * 10 + (tok[i] - '0');
    }
    return len && (uint32_t)v < ndevices ? v : -1;
}

/* As the driver does: the list ends at the first entry that names no
 * device or one named before; unset shows every device. */
static void set_visible(uint32_t ndevices)
{
    const char *env = getenv("CUDA_VISIBLE_DEVICES");
    g_nvisible = 0;
    if (!env) {
        for (uint32_t d = 0; d < ndevices; d++)
            g_visible[g_nvisible++] = (int)d;
        return;
    }
    for (const char *p = env; *p && g_nvisible < SIM_MAX_DEVICES;) {
        size_t len = strcspn(p, ",");
        int d = parse_visible(p, len, ndevices);
        for (int i = 0; i < g_nvisible && d >= 0; i++)
            if (g_visible[i] == d)
                d = -1;
        if (d < 0)
            break;
        g_visible[g_nvisible++] = d;
        p += len + (p[len] == ',');
    }
}

int sim_dev_phys(CUdevice ordinal)
{
    return ordinal >= 0 && ordinal < g_nvisible ? g_visible[ordinal] : -1;
}

CUdevice sim_dev_ordinal(int phys)
{
    for (int i = 0; i < g_nvisible; i++)
        if (g_visible[i] == phys)
            return i;
    return -1;
}

struct sim_state *sim_initialized_state(void)
{
    struct sim_state *st = __atomic_load_n(&g_st, __ATOMIC_ACQUIRE);
    if (!st || __atomic_load_n(&g_init_pid, __ATOMIC_ACQUIRE) != getpid())
        return NULL;
    return st;
}

SIM_API cuInit(unsigned int flags)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&g_init_lock);
    if (g_st && g_init_pid != getpid()) {
        /* Forked child: nothing of the parent's CUDA state carries over. */
        sim_ctx_reset_local();
        sim_pool_reset_local();
        sim_state_detach();
        __atomic_store_n(&g_st, NULL, __ATOMIC_RELEASE);
    }
    if (!g_st) {
        struct sim_state *st = sim_state_attach();
        if (!st) {
            rc = CUDA_ERROR_INVALID_VALUE;
        } else {
            set_visible(st->ndevices);
            __atomic_store_n(&g_init_pid, getpid(), __ATOMIC_RELEASE);
            __atomic_store_n(&g_st, st, __ATOMIC_RELEASE);
        }
    }
    if (rc == CUDA_SUCCESS && g_nvisible == 0)
        rc = CUDA_ERROR_NO_DEVICE;
    pthread_mutex_unlock(&g_init_lock);
    return rc;
}

CUresult sim_enter(struct sim_call *c)
{
    struct sim_state *st = sim_initialized_state();
    if (!st)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (sim_state_lock(st) != 0)
        return CUDA_ERROR_UNKNOWN;
    c->st = st;
    c->proc = sim_proc_self(st);
    if (c->proc < 0) {
        sim_state_unlock(st);
        return CUDA_ERROR_OUT_OF_MEMORY; /* process table full */
    }
    return CUDA_SUCCESS;
}

void sim_leave(struct sim_call *c)
{
    sim_state_unlock(c->st);
}

SIM_API cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 13000;
    return CUDA_SUCCESS;
}

/* Checks a CUDA ordinal; *phys (if asked) gets the physical device. */
static CUresult check_device(CUdevice dev, struct sim_state **out, int *phys)
{
    struct sim_state *st = sim_initialized_state();
    if (!st)
        return CUDA_ERROR_NOT_INITIALIZED;
    int p = sim_dev_phys(dev);
    if (p < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (out)
        *out = st;
    if (phys)
        *phys = p;
    return CUDA_SUCCESS;
}

SIM_API cuDeviceGetCount(int *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_state *st = sim_initialized_state();
    if (!st)
        return CUDA_ERROR_NOT_INITIALIZED;
    *count = g_nvisible;
    return CUDA_SUCCESS;
}

SIM_API cuDeviceGet(CUdevice *device, int ordinal)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_device(ordinal, NULL, NULL);
    if (rc == CUDA_SUCCESS)
        *device = ordinal;
    return rc;
}

SIM_API cuDeviceGetName(char *name, int len, CUdevice dev)
{
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_device(dev, NULL, NULL);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* Like the driver: truncate to the buffer. */
    strncpy(name, SIM_DEVICE_NAME, (size_t)len - 1);
    name[len - 1] = '\0';
    return CUDA_SUCCESS;
}

static CUresult get_uuid(CUuuid *uuid, CUdevice dev)
{
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    int phys = -1;
    CUresult rc = check_device(dev, NULL, &phys);
    if (rc == CUDA_SUCCESS)
        sim_device_uuid_bytes(phys, (unsigned char *)uuid->bytes);
    return rc;
}

SIM_API cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return get_uuid(uuid, dev);
}

SIM_API cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    return get_uuid(uuid, dev);
}

/* Values of an H100/H200-class part (sm_90, 132 SMs). */
static const struct {
    CUdevice_attribute attr;
    int value;
} k_attrs[] = {
    { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64 },
    { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647 },
    { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535 },
    { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535 },
    { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152 },
    { CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 65536 },
    { CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32 },
    { CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536 },
    { CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1980000 },
    { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132 },
    { CU_DEVICE_ATTRIBUTE_INTEGRATED, 0 },
    { CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0 },
    { CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 3201000 },
    { CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 6144 },
    { CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 62914560 },
    { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048 },
    { CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1 },
    { CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0 },
    { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9 },
    { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0 },
    { CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1 },
    { CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1 },
    { CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1 },
    { CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1 },
};

SIM_API cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    int phys = -1;
    struct sim_state *st = NULL;
    CUresult rc = check_device(dev, &st, &phys);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (attrib == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) {
        *pi = 0x18 + phys; /* distinct bus per device, stable */
        return CUDA_SUCCESS;
    }
    if (attrib == CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS) {
        *pi = st->pageable_access != 0; /* GPUSLICE_SIM_PAGEABLE_ACCESS */
        return CUDA_SUCCESS;
    }
    for (size_t i = 0; i < sizeof(k_attrs) / sizeof(k_attrs[0]); i++) {
        if (k_attrs[i].attr == attrib) {
            *pi = k_attrs[i].value;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult total_mem(size_t *bytes, CUdevice dev)
{
    struct sim_state *st = NULL;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    int phys = -1;
    CUresult rc = check_device(dev, &st, &phys);
    if (rc == CUDA_SUCCESS)
        *bytes = st->dev[phys].total;
    return rc;
}

SIM_API cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    return total_mem(bytes, dev);
}

SIM_API cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    size_t v = 0;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = total_mem(&v, dev);
    if (rc == CUDA_SUCCESS) /* the 32-bit ABI cannot say more than 4 GiB */
        *bytes = v > UINT_MAX ? UINT_MAX : (unsigned int)v;
    return rc;
}
