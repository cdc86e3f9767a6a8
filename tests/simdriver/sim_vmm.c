/*
 * Virtual memory management: cuMemCreate charges physical memory (multiples
 * of the 2 MiB granularity) to the calling process; reservations and
 * mappings charge nothing. As on the driver, physical memory is freed only
 * when its handle is released AND every mapping of it is unmapped. VMM
 * objects belong to the process, not to a context.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_cuda.h"

/* The physical device a property names by CUDA ordinal, or -1. */
static int prop_device(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return -1;
    return sim_dev_phys(prop->location.id);
}

SIM_API cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                      CUmemAllocationGranularity_flags option)
{
    struct sim_state *st = sim_initialized_state();
    if (!st)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!granularity || prop_device(prop) < 0 ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = SIM_GRANULE;
    return CUDA_SUCCESS;
}

SIM_API cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                    unsigned long long flags)
{
    if (!handle || size == 0 || size % SIM_GRANULE || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    int dev = prop_device(prop);
    struct sim_alloc *a = NULL;
    rc = dev < 0 ? CUDA_ERROR_INVALID_VALUE : sim_alloc_new(&c, -1, dev, SIM_KIND_VMM_PHYS, size, 0, 0, &a);
    if (rc == CUDA_SUCCESS) {
        a->refs = 1; /* the handle itself */
        a->handles = 1;
        *handle = a->id;
    }
    sim_leave(&c);
    return rc;
}

static struct sim_alloc *find_phys(struct sim_call *c, CUmemGenericAllocationHandle handle)
{
    struct sim_alloc *a = sim_alloc_by_id(c->st, handle);
    if (!a || a->proc != c->proc || a->kind != SIM_KIND_VMM_PHYS || a->released)
        return NULL;
    return a;
}

/* One of our imported handles (cuMemImportFromShareableHandle). */
static struct sim_alloc *find_import(struct sim_call *c, CUmemGenericAllocationHandle handle)
{
    struct sim_alloc *a = sim_alloc_by_id(c->st, handle);
    return a && a->proc == c->proc && a->kind == SIM_KIND_VMM_IMPORT ? a : NULL;
}

/* The physical memory a handle of ours names: our own, or an import's. */
static struct sim_alloc *phys_of_handle(struct sim_call *c, CUmemGenericAllocationHandle handle)
{
    struct sim_alloc *imp = find_import(c, handle);
    return imp ? sim_alloc_by_id(c->st, imp->link) : find_phys(c, handle);
}

SIM_API cuMemRelease(CUmemGenericAllocationHandle handle)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_alloc *imp = find_import(&c, handle);
    struct sim_alloc *a = imp ? NULL : find_phys(&c, handle);
    if (imp) {
        if (--imp->handles == 0)
            sim_alloc_drop(c.st, imp); /* drops its reference to the exporter's memory */
    } else if (!a) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (--a->handles == 0) {
        a->released = 1;
        if (--a->refs == 0)
            sim_alloc_drop(c.st, a);
    }
    sim_leave(&c);
    return rc;
}

SIM_API cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags)
{
    if (!ptr || size == 0 || size % SIM_GRANULE || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The address hint is ignored: we never hand out an address twice anyway. */
    struct sim_alloc *a = NULL;
    rc = sim_alloc_new(&c, -1, 0, SIM_KIND_VA_RESERVE, size, 0, alignment, &a);
    if (rc == CUDA_SUCCESS)
        *ptr = a->va;
    sim_leave(&c);
    return rc;
}

SIM_API cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_alloc *a = sim_alloc_at(&c, ptr, SIM_MASK(SIM_KIND_VA_RESERVE));
    if (!a || a->size != size)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        sim_alloc_drop(c.st, a);
    sim_leave(&c);
    return rc;
}

/* Is [va, va+size) inside one reservation of ours and free of mappings? */
static int range_mappable(struct sim_call *c, uint64_t va, uint64_t size)
{
    int inside = 0;
    for (uint32_t i = 0; i < c->st->alloc_hwm; i++) {
        const struct sim_alloc *a = &c->st->allocs[i];
        if (!a->id || a->proc != c->proc)
            continue;
        if (a->kind == SIM_KIND_VA_RESERVE && va >= a->va && va - a->va <= a->size && size <= a->size - (va - a->va))
            inside = 1;
        if (a->kind == SIM_KIND_VMM_MAP && va < a->va + a->size && a->va < va + size)
            return 0;
    }
    return inside;
}

SIM_API cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                 unsigned long long flags)
{
    if (size == 0 || flags != 0 || ptr % SIM_GRANULE || size % SIM_GRANULE)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_alloc *phys = phys_of_handle(&c, handle);
    struct sim_alloc *m = NULL;
    if (!phys || offset > phys->size || size > phys->size - offset) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (!range_mappable(&c, ptr, size)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        rc = sim_alloc_new(&c, -1, phys->dev, SIM_KIND_VMM_MAP, size, 0, 0, &m);
        if (rc == CUDA_SUCCESS) {
            m->va = ptr;
            m->link = phys->id;
            m->via = handle;
            phys->refs++; /* each mapping keeps the memory alive */
        }
    }
    sim_leave(&c);
    return rc;
}

SIM_API cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    int found = 0;
    for (uint32_t i = 0; i < c.st->alloc_hwm; i++) {
        struct sim_alloc *a = &c.st->allocs[i];
        if (a->id && a->proc == c.proc && a->kind == SIM_KIND_VMM_MAP && a->va >= ptr && a->va - ptr < size) {
            sim_alloc_drop(c.st, a);
            found = 1;
        }
    }
    if (!found)
        rc = CUDA_ERROR_INVALID_VALUE;
    sim_leave(&c);
    return rc;
}

SIM_API cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* Access rights are not modelled; the range must be mapped, though. */
    uint64_t covered = 0;
    for (uint32_t i = 0; i < c.st->alloc_hwm; i++) {
        const struct sim_alloc *a = &c.st->allocs[i];
        if (a->id && a->proc == c.proc && a->kind == SIM_KIND_VMM_MAP && a->va >= ptr && a->va - ptr < size)
            covered += a->size;
    }
    if (covered < size)
        rc = CUDA_ERROR_INVALID_VALUE;
    sim_leave(&c);
    return rc;
}

/* Our mapping that holds va, or NULL. */
static struct sim_alloc *mapping_at(struct sim_call *c, uint64_t va)
{
    for (uint32_t i = 0; i < c->st->alloc_hwm; i++) {
        struct sim_alloc *a = &c->st->allocs[i];
        if (a->id && a->proc == c->proc && a->kind == SIM_KIND_VMM_MAP && va >= a->va && va - a->va < a->size)
            return a;
    }
    return NULL;
}

/* As the driver: the handle that maps addr, one reference more (released
 * once already, it is valid again), to be matched by a cuMemRelease. */
SIM_API cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_alloc *m = mapping_at(&c, (uint64_t)(uintptr_t)addr);
    struct sim_alloc *phys = m ? sim_alloc_by_id(c.st, m->link) : NULL;
    struct sim_alloc *h = m ? sim_alloc_by_id(c.st, m->via) : NULL;
    if (!phys) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (h) {
        if (h == phys && h->handles == 0) { /* released, kept by its mappings: valid again */
            h->released = 0;
            h->refs++;
        }
        h->handles++;
    } else { /* an import released while mapped: its handle value, valid again */
        uint64_t id = phys->id, via = m->via;
        int dev = phys->dev;
        rc = sim_alloc_new(&c, -1, dev, SIM_KIND_VMM_IMPORT, 0, 0, 0, &h);
        if (rc == CUDA_SUCCESS) {
            h->id = via; /* ids are never handed out twice: this one is free */
            h->link = id;
            h->handles = 1;
            sim_alloc_by_id(c.st, id)->refs++;
        }
    }
    if (rc == CUDA_SUCCESS)
        *handle = h->id;
    sim_leave(&c);
    return rc;
}

/*
 * Sharing: a POSIX file descriptor names (exporter pid, its start time,
 * allocation id), written into a memfd, so it can be passed to another
 * process like the driver's. An import is a new handle of the importer's
 * that holds a reference to the exporter's memory (charged to the exporter,
 * as on the driver: the memory stays until every handle and mapping is gone).
 */
#define SIM_SHARE_MAGIC 0x48524853U /* "SHRH" */

struct sim_share {
    uint32_t magic;
    int32_t pid;
    uint64_t start_time;
    uint64_t id;
};

_Static_assert(sizeof(struct sim_share) <= sizeof(CUmemFabricHandle), "a share fits a fabric handle");

SIM_API cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                     CUmemAllocationHandleType handleType, unsigned long long flags)
{
    if (!shareableHandle || flags != 0 ||
        (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && handleType != CU_MEM_HANDLE_TYPE_FABRIC))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    const struct sim_alloc *a = find_phys(&c, handle);
    const struct sim_proc *p = &c.st->procs[c.proc];
    struct sim_share sh = { SIM_SHARE_MAGIC, p->pid, p->start_time, a ? a->id : 0 };
    sim_leave(&c);
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    if (handleType == CU_MEM_HANDLE_TYPE_FABRIC) {
        CUmemFabricHandle fh = { { 0 } };
        memcpy(fh.data, &sh, sizeof sh);
        memcpy(shareableHandle, &fh, sizeof fh);
        return CUDA_SUCCESS;
    }
    int fd = memfd_create("gpuslice-sim-vmm", MFD_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_OPERATING_SYSTEM;
    if (pwrite(fd, &sh, sizeof sh, 0) != (ssize_t)sizeof sh) {
        close(fd);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    *(int *)shareableHandle = fd;
    return CUDA_SUCCESS;
}

SIM_API cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                       CUmemAllocationHandleType shHandleType)
{
    struct sim_share sh = { 0 };
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType == CU_MEM_HANDLE_TYPE_FABRIC && osHandle)
        memcpy(&sh, osHandle, sizeof sh); /* the handle's bytes, not a pointer to an fd */
    else if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
             pread((int)(intptr_t)osHandle, &sh, sizeof sh, 0) != (ssize_t)sizeof sh)
        return CUDA_ERROR_INVALID_VALUE;
    if (sh.magic != SIM_SHARE_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_alloc *src = sim_alloc_by_id(c.st, sh.id);
    /* Gone if released and unmapped everywhere, or if its process died. */
    if (!src || src->kind != SIM_KIND_VMM_PHYS || c.st->procs[src->proc].pid != sh.pid ||
        c.st->procs[src->proc].start_time != sh.start_time) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        uint64_t id = src->id;
        int dev = src->dev;
        struct sim_alloc *imp = NULL;
        rc = sim_alloc_new(&c, -1, dev, SIM_KIND_VMM_IMPORT, 0, 0, 0, &imp);
        if (rc == CUDA_SUCCESS) {
            imp->link = id;
            imp->handles = 1;
            sim_alloc_by_id(c.st, id)->refs++;
            *handle = imp->id;
        }
    }
    sim_leave(&c);
    return rc;
}

SIM_API cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    const struct sim_alloc *phys = phys_of_handle(&c, handle);
    if (!phys) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (sim_dev_ordinal(phys->dev) < 0) {
        rc = CUDA_ERROR_INVALID_DEVICE; /* on a device this process cannot see */
    } else {
        *prop = (CUmemAllocationProp){ .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                       .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                       .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE,
                                                     .id = sim_dev_ordinal(phys->dev) } };
    }
    sim_leave(&c);
    return rc;
}
