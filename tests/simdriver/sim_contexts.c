/*
 * Contexts. Each live context charges the configured overhead to its process
 * on its device; the primary context from its first retain until its last
 * release. Destroying a context frees the memory it owns, as on the driver.
 */
#include <string.h>
#include <unistd.h>

#include "sim_cuda.h"

/* Slots 0..SIM_MAX_DEVICES-1 are the primary contexts, so their handles stay
 * the same across retain/release cycles like the driver's do. */
struct sim_ctx sim_ctxs[SIM_MAX_CTX];

/* Current context of this thread; only valid in the process that set it. */
static __thread int t_current = -1;
static __thread pid_t t_current_pid;

void sim_ctx_reset_local(void)
{
    memset(sim_ctxs, 0, sizeof(sim_ctxs));
}

int sim_ctx_index(CUcontext ctx)
{
    const struct sim_ctx *p = (const struct sim_ctx *)(void *)ctx;
    if (p < sim_ctxs || p >= sim_ctxs + SIM_MAX_CTX)
        return -1;
    int idx = (int)(p - sim_ctxs);
    if (sim_ctxs[idx].magic != SIM_CTX_MAGIC || !sim_ctxs[idx].in_use)
        return -1;
    return idx;
}

CUcontext sim_ctx_handle(int index)
{
    return (CUcontext)(void *)&sim_ctxs[index];
}

static void set_current(int idx)
{
    t_current = idx;
    t_current_pid = getpid();
}

CUresult sim_current_ctx(int *ctx)
{
    if (t_current < 0 || t_current_pid != getpid())
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!sim_ctxs[t_current].in_use)
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *ctx = t_current;
    return CUDA_SUCCESS;
}

CUresult sim_need_ctx(int *ctx)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    return sim_current_ctx(ctx);
}

static CUresult charge_overhead(struct sim_call *c, int dev)
{
    struct sim_state *st = c->st;
    if (sim_device_used(st, dev) + st->ctx_overhead > st->dev[dev].total)
        return CUDA_ERROR_OUT_OF_MEMORY;
    st->procs[c->proc].used[dev] += st->ctx_overhead;
    st->procs[c->proc].contexts[dev]++;
    return CUDA_SUCCESS;
}

static void deactivate(struct sim_call *c, int idx)
{
    struct sim_ctx *x = &sim_ctxs[idx];
    struct sim_proc *p = &c->st->procs[c->proc];
    sim_drop_ctx_allocs(c, idx);
    sim_drop_ctx_handles(idx);
    p->used[x->dev] -= c->st->ctx_overhead;
    p->contexts[x->dev]--;
    x->in_use = 0;
    x->refcount = 0;
}

static CUresult create_ctx(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    dev = sim_dev_phys(dev);
    if (dev < 0) {
        rc = CUDA_ERROR_INVALID_DEVICE;
        goto out;
    }
    int idx = -1;
    for (int i = SIM_MAX_DEVICES; i < SIM_MAX_CTX; i++)
        if (!sim_ctxs[i].in_use) {
            idx = i;
            break;
        }
    if (idx < 0) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    rc = charge_overhead(&c, dev);
    if (rc != CUDA_SUCCESS)
        goto out;
    sim_ctxs[idx] = (struct sim_ctx){ .magic = SIM_CTX_MAGIC, .in_use = 1, .dev = dev, .flags = flags };
    set_current(idx); /* cuCtxCreate makes the new context current */
    *pctx = sim_ctx_handle(idx);
out:
    sim_leave(&c);
    return rc;
}

SIM_API cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return create_ctx(pctx, flags, dev);
}

SIM_API cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return create_ctx(pctx, flags, dev);
}

SIM_API cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
                       CUdevice dev)
{
    /* Execution affinity (SM partitions) is not modelled. */
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    return create_ctx(pctx, flags, dev);
}

SIM_API cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags, CUdevice dev)
{
    return create_ctx(pctx, flags, dev);
}

/* Before a call that frees context idx (a destroy of one of cuCtxCreate's;
 * with primary, the release that drops the last reference, or a reset):
 * waits for its work, as the driver's destroy does (all of the process's
 * work on the device, in the sim). A call that will fail or free nothing
 * does not wait; the caller checks again under the lock. */
static void wait_for_ctx_work(int idx, int primary, int reset)
{
    struct sim_call c;
    if (idx < 0 || sim_enter(&c) != CUDA_SUCCESS)
        return;
    const struct sim_ctx *x = &sim_ctxs[idx];
    int goes = x->in_use && x->primary == primary && (!primary || reset || x->refcount == 1);
    int dev = goes ? x->dev : -1;
    sim_leave(&c);
    if (dev >= 0)
        (void)sim_drain_dev(dev);
}

static CUresult destroy_ctx(CUcontext ctx)
{
    wait_for_ctx_work(sim_ctx_index(ctx), 0, 0);
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    int idx = sim_ctx_index(ctx);
    if (idx < 0 || sim_ctxs[idx].primary) {
        rc = CUDA_ERROR_INVALID_CONTEXT;
    } else {
        deactivate(&c, idx);
        if (t_current == idx)
            t_current = -1;
    }
    sim_leave(&c);
    if (rc == CUDA_SUCCESS)
        sim_modules_ctx_gone(idx); /* its modules go with it; outside the state's lock, so a context
                                    * another thread makes at idx in between loses its modules too
                                    * (the tests make contexts on one thread) */
    return rc;
}

SIM_API cuCtxDestroy(CUcontext ctx)
{
    return destroy_ctx(ctx);
}

SIM_API cuCtxDestroy_v2(CUcontext ctx)
{
    return destroy_ctx(ctx);
}

SIM_API cuCtxSetCurrent(CUcontext ctx)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx) {
        set_current(-1);
        return CUDA_SUCCESS;
    }
    int idx = sim_ctx_index(ctx);
    if (idx < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    set_current(idx);
    return CUDA_SUCCESS;
}

SIM_API cuCtxGetCurrent(CUcontext *pctx)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    int idx = -1;
    *pctx = sim_current_ctx(&idx) == CUDA_SUCCESS ? sim_ctx_handle(idx) : NULL;
    return CUDA_SUCCESS;
}

SIM_API cuCtxGetDevice(CUdevice *device)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    int idx = -1;
    CUresult rc = sim_current_ctx(&idx);
    if (rc == CUDA_SUCCESS)
        *device = sim_dev_ordinal(sim_ctxs[idx].dev);
    return rc;
}

SIM_API cuCtxSynchronize(void)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    int idx = -1;
    CUresult rc = sim_current_ctx(&idx);
    return rc == CUDA_SUCCESS ? sim_drain_current() : rc;
}

SIM_API cuCtxSynchronize_v2(CUcontext ctx)
{
    if (!ctx)
        return cuCtxSynchronize();
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (sim_ctx_index(ctx) < 0)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    sim_leave(&c);
    return rc == CUDA_SUCCESS ? sim_drain_current() : rc; /* the current device's queue, whichever ctx */
}

SIM_API cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    dev = sim_dev_phys(dev);
    if (dev < 0) {
        rc = CUDA_ERROR_INVALID_DEVICE;
        goto out;
    }
    struct sim_ctx *x = &sim_ctxs[dev];
    if (!x->in_use) {
        rc = charge_overhead(&c, dev);
        if (rc != CUDA_SUCCESS)
            goto out;
        *x = (struct sim_ctx){ .magic = SIM_CTX_MAGIC, .in_use = 1, .dev = dev, .primary = 1 };
    }
    x->refcount++;
    *pctx = sim_ctx_handle(dev);
out:
    sim_leave(&c);
    return rc;
}

/* reset: the context goes whatever its refcount. */
static CUresult primary_release(CUdevice dev, int reset)
{
    int phys = sim_dev_phys(dev);
    if (phys >= 0)
        wait_for_ctx_work(phys, 1, reset); /* the primary context's slot is its device's */
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    dev = sim_dev_phys(dev);
    if (dev < 0)
        rc = CUDA_ERROR_INVALID_DEVICE;
    else if (!sim_ctxs[dev].in_use)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else if (reset || --sim_ctxs[dev].refcount == 0)
        deactivate(&c, dev);
    sim_leave(&c);
    return rc;
}

SIM_API cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return primary_release(dev, 0);
}

SIM_API cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return primary_release(dev, 0);
}

SIM_API cuDevicePrimaryCtxReset(CUdevice dev)
{
    return primary_release(dev, 1);
}

SIM_API cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    return primary_release(dev, 1);
}
