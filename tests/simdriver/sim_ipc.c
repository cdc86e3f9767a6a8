/*
 * CUDA IPC. A handle names (exporter pid, its start time, allocation id).
 * Opening it in another process maps the same physical memory, so nothing
 * new is charged; the importer gets its own address, which
 * cuMemGetAddressRange resolves. Opening one allocation twice in a process
 * returns the same address and needs two closes, like the driver.
 */
#include <string.h>

#include "sim_cuda.h"

#define SIM_IPC_MAGIC 0x43504953U /* "SIPC" */

struct sim_ipc_handle {
    uint32_t magic;
    int32_t pid;
    uint64_t start_time;
    uint64_t id;
};
_Static_assert(sizeof(struct sim_ipc_handle) <= CU_IPC_HANDLE_SIZE, "IPC handle too big");

SIM_API cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    const struct sim_alloc *a = sim_alloc_at(&c, dptr, SIM_MASK(SIM_KIND_DEVICE));
    if (!a) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        const struct sim_proc *p = &c.st->procs[c.proc];
        struct sim_ipc_handle h = { SIM_IPC_MAGIC, p->pid, p->start_time, a->id };
        memset(pHandle, 0, sizeof(*pHandle));
        memcpy(pHandle->reserved, &h, sizeof(h));
    }
    sim_leave(&c);
    return rc;
}

static CUresult ipc_open(CUdeviceptr *pdptr, const CUipcMemHandle *handle, unsigned int flags)
{
    if (!pdptr || (flags & ~1U)) /* 1 = CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_ipc_handle h;
    memcpy(&h, handle->reserved, sizeof(h));
    if (h.magic != SIM_IPC_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    int ctx = -1;
    rc = sim_current_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        goto out;
    const struct sim_alloc *src = sim_alloc_by_id(c.st, h.id);
    /* Gone if freed, or if its process died (pruned on entry). */
    if (!src || src->kind != SIM_KIND_DEVICE || c.st->procs[src->proc].pid != h.pid ||
        c.st->procs[src->proc].start_time != h.start_time) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    if (src->proc == c.proc) { /* the driver refuses to import into the exporter */
        rc = CUDA_ERROR_INVALID_CONTEXT;
        goto out;
    }
    for (uint32_t i = 0; i < c.st->alloc_hwm; i++) {
        struct sim_alloc *a = &c.st->allocs[i];
        if (a->id && a->proc == c.proc && a->kind == SIM_KIND_IPC_IMPORT && a->link == h.id) {
            a->refs++;
            *pdptr = a->va;
            goto out;
        }
    }
    uint64_t size = src->size, id = src->id;
    int dev = src->dev;
    struct sim_alloc *imp = NULL;
    rc = sim_alloc_new(&c, ctx, dev, SIM_KIND_IPC_IMPORT, size, 0, 0, &imp);
    if (rc == CUDA_SUCCESS) {
        imp->link = id;
        imp->refs = 1;
        *pdptr = imp->va;
    }
out:
    sim_leave(&c);
    return rc;
}

SIM_API cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    return ipc_open(pdptr, &handle, Flags);
}

SIM_API cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    return ipc_open(pdptr, &handle, Flags);
}

SIM_API cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_alloc *a = sim_alloc_at(&c, dptr, SIM_MASK(SIM_KIND_IPC_IMPORT));
    if (!a)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (--a->refs == 0)
        sim_alloc_drop(c.st, a);
    sim_leave(&c);
    return rc;
}
