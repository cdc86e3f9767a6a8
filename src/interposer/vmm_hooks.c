/*
 * Virtual memory management. A cuMemCreate handle is charged its size on
 * the device its properties name. The driver frees that memory only once
 * the handle is released AND every mapping of it is unmapped (NCCL releases
 * a handle right after mapping it), so the charge stays until both have
 * happened (vmm_maps.h).
 *
 * Sharing: an export is recorded so that an importer of the same container
 * joins its one charge (vmm_share.c). Any other import takes no new memory,
 * but it keeps the exporter's memory alive after the exporter releases it,
 * so the importer pays for what it uses. The driver has no size query for
 * an imported handle; a mapping has one. So each mapping of such a handle
 * is charged its size on the handle's device until it is unmapped. A
 * process importing its own cuMemCreate handle is not charged twice. See
 * docs/memory.md.
 *
 * One lock covers each driver call that ends a handle or a mapping and the
 * bookkeeping after it, and the bookkeeping of calls that make one, so the
 * tables follow the driver's order: a handle value or an address that the
 * driver hands out again is recorded only after its old record is settled.
 */
#include "../core/accounting.h"
#include "../core/vmm_maps.h"
#include "charge.h"
#include "compute_limiter.h"
#include "fork_hooks.h"
#include "host_wait_hooks.h"
#include "log.h"
#include "real_driver.h"
#include "runtime.h"
#include "vmm_share.h"

#include <pthread.h>

static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;

void gs_vmm_fork_child(void)
{
    /* The lock may be held by a thread that does not exist in the child. */
    gs_vmm_maps_abandon();
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    vmm_lock = fresh;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemCreate);
    /* Physical memory lands where prop says, not on the current device;
     * host-located (pinned host) handles take no device memory, but a kernel
     * may spin on them (host_wait_hooks.c). */
    if (prop && prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return gs_host_memory_had(real(handle, size, prop, flags));
    if (gs_mode() == GS_MODE_PASSTHROUGH)
        return real(handle, size, prop, flags);
    struct gs_charge c;
    CUresult rc = gs_charge_reserve(&c, prop ? gs_rt_dev_of_ordinal(prop->location.id) : -1, size);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(handle, size, prop, flags);
    pthread_mutex_lock(&vmm_lock);
    gs_charge_commit(&c, rc, GS_ALLOC_VMM, rc == CUDA_SUCCESS ? *handle : 0);
    pthread_mutex_unlock(&vmm_lock);
    return rc;
}

/* What the end of handle settles, taken out of the allocation table: its
 * share of an export record, or its own charge. A foreign import's marker
 * goes now: its mappings pay for themselves. */
static struct gs_vmm_settle take_settle(CUmemGenericAllocationHandle handle)
{
    struct gs_vmm_settle s = { 0 };
    if (gs_alloc_take(GS_ALLOC_VMM_IMPORT, handle, &s.rec) == 0)
        s.kind = GS_ALLOC_VMM_IMPORT; /* kept for a retain that revives the handle */
    else if (gs_alloc_take(GS_ALLOC_VMM_SHARED, handle, &s.rec) == 0)
        s.kind = GS_ALLOC_VMM_SHARED;
    else if (gs_alloc_take(GS_ALLOC_VMM, handle, &s.rec) == 0)
        s.kind = GS_ALLOC_VMM;
    return s;
}

static void settle(const struct gs_vmm_settle *s)
{
    if (s->kind == GS_ALLOC_VMM_SHARED)
        gs_vmm_share_leave(s->rec.record);
    else if (s->kind == GS_ALLOC_VMM)
        gs_charge_release_rec(&s->rec);
}

/* With vmm_lock held, after a release of handle: 1 if the reference it
 * dropped was one a retain added (the handle lives on), else 0. */
static int retain_released(CUmemGenericAllocationHandle handle)
{
    struct gs_alloc_rec extra;
    if (gs_alloc_get(GS_ALLOC_VMM_RETAINED, handle, &extra) != 0)
        return 0;
    if (extra.bytes > 1) {
        extra.bytes--; /* if this fails, the count stays high: the charge outlives the memory, never the reverse */
        (void)gs_alloc_put(GS_ALLOC_VMM_RETAINED, handle, extra, NULL, NULL);
    } else {
        (void)gs_alloc_take(GS_ALLOC_VMM_RETAINED, handle, &extra);
    }
    return 1;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemRelease);
    if (gs_mode() == GS_MODE_PASSTHROUGH)
        return real(handle);
    pthread_mutex_lock(&vmm_lock);
    CUresult rc = real(handle);
    if (rc == CUDA_SUCCESS && !retain_released(handle)) {
        struct gs_vmm_settle s = take_settle(handle);
        if (!gs_vmm_handle_released(handle, &s))
            settle(&s); /* no mapping keeps it */
    }
    pthread_mutex_unlock(&vmm_lock);
    return rc;
}

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType, unsigned long long flags)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemExportToShareableHandle);
    if (gs_mode() != GS_MODE_ENFORCE)
        return real(shareableHandle, handle, handleType, flags);
    pthread_mutex_lock(&vmm_lock);
    CUresult rc = real(shareableHandle, handle, handleType, flags);
    if (rc == CUDA_SUCCESS)
        gs_vmm_share_exported(handle, shareableHandle, handleType);
    pthread_mutex_unlock(&vmm_lock);
    return rc;
}

/* After a successful import: joins an export of this container, or marks
 * the handle so that its mappings are charged. */
static CUresult import_recorded(CUmemGenericAllocationHandle handle, void *osHandle,
                                CUmemAllocationHandleType shHandleType)
{
    struct gs_alloc_rec own;
    if (gs_alloc_get(GS_ALLOC_VMM, handle, &own) == 0)
        return CUDA_SUCCESS; /* our own cuMemCreate handle: charged already */
    if (gs_vmm_share_imported(handle, osHandle, shHandleType))
        return CUDA_SUCCESS; /* an export of this container, which pays for it once */
    /* The device the memory lives on; the current one if the driver cannot say. */
    gs_pfn_cuMemGetAllocationPropertiesFromHandle props = GS_REAL_CU(cuMemGetAllocationPropertiesFromHandle);
    CUmemAllocationProp prop = { 0 };
    int known = props && props(&prop, handle) == CUDA_SUCCESS;
    int dev = known && prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? gs_rt_dev_of_ordinal(prop.location.id)
                                                                         : gs_rt_dev_current(NULL);
    struct gs_alloc_rec marker = { .bytes = 0, .dev = dev, .slot = -1 };
    if (gs_alloc_put(GS_ALLOC_VMM_IMPORT, handle, marker, NULL, NULL) == 0) {
        if (known && prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            gs_compute_note_host_waits(); /* host memory a kernel may spin on (host_wait_hooks.h) */
        return CUDA_SUCCESS;
    }
    /* Cannot remember it, so it could never be charged: refuse it. */
    gs_log(GS_LOG_ERROR, "out of host memory tracking an imported VMM handle; the import is refused");
    gs_pfn_cuMemRelease release = GS_REAL_CU(cuMemRelease);
    if (release)
        release(handle);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                        CUmemAllocationHandleType shHandleType)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemImportFromShareableHandle);
    if (gs_mode() == GS_MODE_PASSTHROUGH)
        return real(handle, osHandle, shHandleType);
    pthread_mutex_lock(&vmm_lock);
    CUresult rc = real(handle, osHandle, shHandleType);
    if (rc == CUDA_SUCCESS)
        rc = import_recorded(*handle, osHandle, shHandleType);
    pthread_mutex_unlock(&vmm_lock);
    return rc;
}

/* A handle whose end must wait for its mappings: one we charged, alone or
 * through an export record. */
static int charged_handle(CUmemGenericAllocationHandle handle)
{
    struct gs_alloc_rec rec;
    return gs_alloc_get(GS_ALLOC_VMM, handle, &rec) == 0 || gs_alloc_get(GS_ALLOC_VMM_SHARED, handle, &rec) == 0;
}

/* With vmm_lock held: maps, recording the mapping of a charged handle, or
 * charging the mapping of a foreign import. */
static CUresult map_recorded(gs_pfn_cuMemMap real, CUdeviceptr ptr, size_t size, size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    struct gs_alloc_rec imported;
    int foreign = gs_alloc_get(GS_ALLOC_VMM_IMPORT, handle, &imported) == 0;
    if (!foreign && !charged_handle(handle))
        return real(ptr, size, offset, handle, flags); /* host memory, or never charged */
    if (gs_vmm_map_room() != 0) {
        /* Unrecorded, its handle's release would drop a charge the mapping still needs. */
        gs_log(GS_LOG_ERROR, "cannot track another VMM mapping (%u live); cuMemMap refused", gs_vmm_map_count());
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct gs_charge c = { .active = 0 };
    CUresult rc = foreign ? gs_charge_reserve(&c, imported.dev, gs_charge_linear(size)) : CUDA_SUCCESS;
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = real(ptr, size, offset, handle, flags);
    if (rc != CUDA_SUCCESS) {
        gs_charge_commit(&c, rc, GS_ALLOC_VMM_IMPORT, 0); /* gives the reservation back */
        return rc;
    }
    struct gs_alloc_rec charge = { .bytes = c.active ? c.bytes : 0, .dev = c.dev, .slot = c.slot };
    if (gs_vmm_map_add(ptr, size, handle, charge) != 0)
        gs_log(GS_LOG_ERROR, "VMM mapping at 0x%llx not tracked", (unsigned long long)ptr);
    return rc;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemMap);
    if (gs_mode() == GS_MODE_PASSTHROUGH)
        return real(ptr, size, offset, handle, flags);
    pthread_mutex_lock(&vmm_lock);
    CUresult rc = map_recorded(real, ptr, size, offset, handle, flags);
    pthread_mutex_unlock(&vmm_lock);
    return rc;
}

/* With vmm_lock held: handle, which maps va, has one reference more. One
 * released while mapped is live again, and what its release left to the
 * mappings goes back to it; any other handle we charge or mark counts the
 * reference, so that a release settles nothing until the last one. 0, or
 * -1 when out of host memory. */
static int retained(CUmemGenericAllocationHandle handle, CUdeviceptr va)
{
    struct gs_vmm_settle s;
    int revived = gs_vmm_handle_revived(va, handle, &s);
    if (revived < 0)
        return -1;
    if (revived) {
        if (s.kind == 0 || gs_alloc_put(s.kind, handle, s.rec, NULL, NULL) == 0)
            return 0;
        (void)gs_vmm_handle_released(handle, &s); /* back as it was */
        return -1;
    }
    struct gs_alloc_rec extra = { .bytes = 0, .dev = -1, .slot = -1 };
    if (!charged_handle(handle) && gs_alloc_get(GS_ALLOC_VMM_IMPORT, handle, &extra) != 0)
        return 0; /* never charged: nothing to keep */
    if (gs_alloc_get(GS_ALLOC_VMM_RETAINED, handle, &extra) != 0)
        extra.bytes = 0;
    extra.bytes++;
    return gs_alloc_put(GS_ALLOC_VMM_RETAINED, handle, extra, NULL, NULL);
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemRetainAllocationHandle);
    if (gs_mode() == GS_MODE_PASSTHROUGH)
        return real(handle, addr);
    pthread_mutex_lock(&vmm_lock);
    CUresult rc = real(handle, addr);
    if (rc == CUDA_SUCCESS && handle && retained(*handle, (CUdeviceptr)(uintptr_t)addr) != 0) {
        /* Untracked, its release would drop the charge its memory still needs. */
        gs_log(GS_LOG_ERROR, "out of host memory tracking a retained VMM handle; the retain is refused");
        gs_pfn_cuMemRelease release = GS_REAL_CU(cuMemRelease);
        if (release)
            release(*handle);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&vmm_lock);
    return rc;
}

static void unmapped(const struct gs_alloc_rec *charge, const struct gs_vmm_settle *s, void *arg)
{
    (void)arg;
    if (charge->bytes)
        gs_charge_release_rec(charge);
    if (s)
        settle(s); /* the last mapping of a released handle */
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuMemUnmap);
    if (gs_mode() == GS_MODE_PASSTHROUGH)
        return real(ptr, size);
    pthread_mutex_lock(&vmm_lock);
    CUresult rc = real(ptr, size);
    if (rc == CUDA_SUCCESS)
        gs_vmm_unmapped(ptr, size, unmapped, NULL);
    pthread_mutex_unlock(&vmm_lock);
    return rc;
}
