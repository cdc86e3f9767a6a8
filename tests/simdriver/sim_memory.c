/*
 * Memory accounting like the real driver's, and the linear allocation entry
 * points (cuMemAlloc*, cuMemAllocPitch*, cuMemAllocManaged, cuMemFree*,
 * cuMemGetInfo*, cuMemGetAddressRange*).
 *
 * Granularity: a device allocation above 1 MiB occupies its size rounded up
 * to 2 MiB; one of at most 1 MiB is carved (512-byte aligned) out of a 2 MiB
 * chunk that its context keeps, so sixteen 1-byte allocations occupy 2 MiB.
 * A chunk is charged while any allocation lives in it.
 */
#include <limits.h>
#include <string.h>

#include "sim_cuda.h"

uint64_t sim_round_up(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

static int free_alloc_slot(struct sim_state *st)
{
    for (uint32_t i = 0; i < st->alloc_hwm; i++)
        if (st->allocs[i].id == 0)
            return (int)i;
    if (st->alloc_hwm < SIM_MAX_ALLOCS)
        return (int)st->alloc_hwm++;
    return -1;
}

/* Hands out fake device addresses: never reused within a process. */
static int take_va(struct sim_proc *p, uint64_t size, uint64_t align, int legacy, uint64_t *va)
{
    uint64_t span = sim_round_up(size ? size : 1, SIM_GRANULE);
    if (!align)
        align = SIM_GRANULE;
    if (legacy) {
        uint64_t v = sim_round_up(p->va32_next, align);
        if (v + span > SIM_VA32_END || v + span < v)
            return -1;
        p->va32_next = v + span;
        *va = v;
    } else {
        uint64_t v = sim_round_up(p->va_next, align);
        p->va_next = v + span;
        *va = v;
    }
    return 0;
}

static int fits(struct sim_state *st, int dev, uint64_t bytes)
{
    uint64_t used = sim_device_used(st, dev);
    return bytes <= st->dev[dev].total && used <= st->dev[dev].total - bytes;
}

/* A place for a small allocation in a chunk of this context, or a new chunk. */
static CUresult carve(struct sim_call *c, int ctx, int dev, uint64_t size, int legacy, int *chunk_out, uint64_t *va)
{
    struct sim_state *st = c->st;
    uint64_t need = sim_round_up(size ? size : 1, SIM_SMALL_ALIGN);
    for (uint32_t k = 0; k < st->chunk_hwm; k++) {
        struct sim_chunk *ch = &st->chunks[k];
        if (ch->proc == c->proc && ch->ctx == ctx && ch->dev == dev && ch->legacy == legacy &&
            ch->top + need <= SIM_GRANULE) {
            *va = ch->va + ch->top;
            ch->top += need;
            ch->live++;
            *chunk_out = (int)k;
            return CUDA_SUCCESS;
        }
    }
    int k = -1;
    for (uint32_t i = 0; i < st->chunk_hwm; i++)
        if (st->chunks[i].proc < 0) {
            k = (int)i;
            break;
        }
    if (k < 0) {
        if (st->chunk_hwm >= SIM_MAX_CHUNKS)
            return CUDA_ERROR_OUT_OF_MEMORY;
        k = (int)st->chunk_hwm++;
    }
    if (!fits(st, dev, SIM_GRANULE))
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t base = 0;
    if (take_va(&st->procs[c->proc], SIM_GRANULE, 0, legacy, &base) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    st->chunks[k] = (struct sim_chunk){
        .va = base, .top = need, .proc = c->proc, .ctx = ctx, .live = 1, .dev = (uint8_t)dev, .legacy = (uint8_t)legacy
    };
    st->procs[c->proc].used[dev] += SIM_GRANULE;
    *va = base;
    *chunk_out = k;
    return CUDA_SUCCESS;
}

CUresult sim_alloc_new(struct sim_call *c, int ctx, int dev, int kind, uint64_t size, int legacy, uint64_t align,
                       struct sim_alloc **out)
{
    struct sim_state *st = c->st;
    int holds_memory = kind != SIM_KIND_VA_RESERVE && kind != SIM_KIND_VMM_MAP && kind != SIM_KIND_IPC_IMPORT &&
                       kind != SIM_KIND_VMM_IMPORT;
    if (holds_memory && size > st->dev[dev].total)
        return CUDA_ERROR_OUT_OF_MEMORY;
    int slot = free_alloc_slot(st);
    if (slot < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_alloc a = { .size = size,
                           .proc = c->proc,
                           .chunk = -1,
                           .ctx = ctx,
                           .dev = (uint8_t)dev,
                           .kind = (uint8_t)kind,
                           .legacy = (uint8_t)legacy };
    if (kind == SIM_KIND_DEVICE && size <= SIM_SMALL_MAX) {
        CUresult rc = carve(c, ctx, dev, size, legacy, &a.chunk, &a.va);
        if (rc != CUDA_SUCCESS)
            return rc;
    } else {
        a.charged = holds_memory ? sim_round_up(size, SIM_GRANULE) : 0;
        if (a.charged && !fits(st, dev, a.charged))
            return CUDA_ERROR_OUT_OF_MEMORY;
        /* A mapping's address is the caller's; everything else gets its own. */
        if (kind != SIM_KIND_VMM_MAP && take_va(&st->procs[c->proc], size, align, legacy, &a.va))
            return CUDA_ERROR_OUT_OF_MEMORY;
        st->procs[c->proc].used[dev] += a.charged;
    }
    a.id = st->next_id++;
    st->allocs[slot] = a;
    *out = &st->allocs[slot];
    return CUDA_SUCCESS;
}

struct sim_alloc *sim_alloc_by_id(struct sim_state *st, uint64_t id)
{
    for (uint32_t i = 0; i < st->alloc_hwm; i++)
        if (id && st->allocs[i].id == id)
            return &st->allocs[i];
    return NULL;
}

void sim_alloc_drop(struct sim_state *st, struct sim_alloc *a)
{
    if (a->chunk >= 0) {
        struct sim_chunk *ch = &st->chunks[a->chunk];
        if (--ch->live == 0) {
            st->procs[ch->proc].used[ch->dev] -= SIM_GRANULE;
            memset(ch, 0, sizeof(*ch));
            ch->proc = -1;
        }
    } else {
        st->procs[a->proc].used[a->dev] -= a->charged;
    }
    uint64_t link = a->kind == SIM_KIND_VMM_MAP || a->kind == SIM_KIND_VMM_IMPORT ? a->link : 0;
    memset(a, 0, sizeof(*a));
    if (link) {
        /* Physical memory goes once released and unmapped everywhere. */
        struct sim_alloc *phys = sim_alloc_by_id(st, link);
        if (phys && --phys->refs == 0)
            sim_alloc_drop(st, phys);
    }
}

struct sim_alloc *sim_alloc_at(struct sim_call *c, uint64_t va, unsigned kind_mask)
{
    struct sim_state *st = c->st;
    for (uint32_t i = 0; i < st->alloc_hwm; i++) {
        struct sim_alloc *a = &st->allocs[i];
        if (a->id && a->proc == c->proc && a->va == va && (kind_mask & SIM_MASK(a->kind)))
            return a;
    }
    return NULL;
}

void sim_drop_ctx_allocs(struct sim_call *c, int ctx)
{
    struct sim_state *st = c->st;
    for (uint32_t i = 0; i < st->alloc_hwm; i++) {
        struct sim_alloc *a = &st->allocs[i];
        if (a->id && a->proc == c->proc && a->ctx == ctx)
            sim_alloc_drop(st, a);
    }
}

/* ---- entry points ---- */

/* Enters and finds the current context and its device. */
static CUresult enter_ctx(struct sim_call *c, int *ctx, int *dev)
{
    CUresult rc = sim_enter(c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = sim_current_ctx(ctx);
    if (rc != CUDA_SUCCESS) {
        sim_leave(c);
        return rc;
    }
    *dev = sim_ctxs[*ctx].dev;
    return CUDA_SUCCESS;
}

static CUresult alloc_linear(uint64_t *dptr, uint64_t size, int kind, int legacy)
{
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    int ctx = -1, dev = 0;
    CUresult rc = enter_ctx(&c, &ctx, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_alloc *a = NULL;
    rc = sim_alloc_new(&c, ctx, dev, kind, size, legacy, 0, &a);
    if (rc == CUDA_SUCCESS)
        *dptr = a->va;
    sim_leave(&c);
    return rc;
}

SIM_API cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t va = 0;
    CUresult rc = alloc_linear(&va, bytesize, SIM_KIND_DEVICE, 0);
    if (rc == CUDA_SUCCESS)
        *dptr = va;
    return rc;
}

SIM_API cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t va = 0;
    CUresult rc = alloc_linear(&va, bytesize, SIM_KIND_DEVICE, 1);
    if (rc == CUDA_SUCCESS)
        *dptr = (CUdeviceptr_v1)va;
    return rc;
}

SIM_API cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    if (!dptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    /* Charged to the device at allocation, in 2 MiB units (see the docs). */
    uint64_t va = 0;
    CUresult rc = alloc_linear(&va, bytesize, SIM_KIND_MANAGED, 0);
    if (rc == CUDA_SUCCESS)
        *dptr = va;
    return rc;
}

static CUresult pitch_size(uint64_t width, uint64_t height, unsigned int elem, uint64_t *pitch, uint64_t *size)
{
    if (width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    *pitch = sim_round_up(width, 512); /* the driver's pitch alignment on sm_90 */
    if (*pitch < width || height > UINT64_MAX / *pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *size = *pitch * height;
    return CUDA_SUCCESS;
}

SIM_API cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                           unsigned int ElementSizeBytes)
{
    uint64_t pitch = 0, size = 0, va = 0;
    if (!dptr || !pPitch)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = pitch_size(WidthInBytes, Height, ElementSizeBytes, &pitch, &size);
    if (rc == CUDA_SUCCESS)
        rc = alloc_linear(&va, size, SIM_KIND_DEVICE, 0);
    if (rc == CUDA_SUCCESS) {
        *dptr = va;
        *pPitch = pitch;
    }
    return rc;
}

SIM_API cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes, unsigned int Height,
                        unsigned int ElementSizeBytes)
{
    uint64_t pitch = 0, size = 0, va = 0;
    if (!dptr || !pPitch)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = pitch_size(WidthInBytes, Height, ElementSizeBytes, &pitch, &size);
    if (rc == CUDA_SUCCESS && (size > UINT_MAX || pitch > UINT_MAX))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS)
        rc = alloc_linear(&va, size, SIM_KIND_DEVICE, 1);
    if (rc == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)va;
        *pPitch = (unsigned int)pitch;
    }
    return rc;
}

static CUresult free_linear(uint64_t ptr)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* cuMemFree also takes stream-ordered allocations (freed at once). */
    struct sim_alloc *a =
        sim_alloc_at(&c, ptr, SIM_MASK(SIM_KIND_DEVICE) | SIM_MASK(SIM_KIND_MANAGED) | SIM_MASK(SIM_KIND_POOL));
    if (a)
        sim_alloc_drop(c.st, a);
    else if (!sim_graph_mem_free(&c, ptr)) /* or a graph allocation */
        rc = CUDA_ERROR_INVALID_VALUE;
    sim_leave(&c);
    return rc;
}

SIM_API cuMemFree_v2(CUdeviceptr dptr)
{
    return dptr ? free_linear(dptr) : CUDA_SUCCESS;
}

SIM_API cuMemFree(CUdeviceptr_v1 dptr)
{
    return dptr ? free_linear(dptr) : CUDA_SUCCESS;
}

static CUresult mem_info(uint64_t *free_b, uint64_t *total)
{
    struct sim_call c;
    int ctx = -1, dev = 0;
    CUresult rc = enter_ctx(&c, &ctx, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* Like the driver: free is what no process on the device holds. */
    uint64_t used = sim_device_used(c.st, dev);
    *total = c.st->dev[dev].total;
    *free_b = used >= *total ? 0 : *total - used;
    sim_leave(&c);
    return CUDA_SUCCESS;
}

SIM_API cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
    uint64_t f = 0, t = 0;
    if (!free_b || !total)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = mem_info(&f, &t);
    if (rc == CUDA_SUCCESS) {
        *free_b = f;
        *total = t;
    }
    return rc;
}

SIM_API cuMemGetInfo(unsigned int *free_b, unsigned int *total)
{
    uint64_t f = 0, t = 0;
    if (!free_b || !total)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = mem_info(&f, &t);
    if (rc == CUDA_SUCCESS) { /* saturate what 32 bits cannot hold */
        *free_b = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
        *total = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    }
    return rc;
}

static CUresult address_range(uint64_t ptr, uint64_t *base, uint64_t *size)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    const unsigned mask = SIM_MASK(SIM_KIND_DEVICE) | SIM_MASK(SIM_KIND_MANAGED) | SIM_MASK(SIM_KIND_POOL) |
                          SIM_MASK(SIM_KIND_IPC_IMPORT) | SIM_MASK(SIM_KIND_VMM_MAP);
    rc = CUDA_ERROR_NOT_FOUND;
    for (uint32_t i = 0; i < c.st->alloc_hwm; i++) {
        const struct sim_alloc *a = &c.st->allocs[i];
        if (a->id && a->proc == c.proc && (mask & SIM_MASK(a->kind)) && ptr >= a->va && ptr - a->va < a->size) {
            *base = a->va;
            *size = a->size;
            rc = CUDA_SUCCESS;
            break;
        }
    }
    if (rc != CUDA_SUCCESS && sim_graph_mem_range(&c, ptr, base, size))
        rc = CUDA_SUCCESS;
    sim_leave(&c);
    return rc;
}

SIM_API cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    uint64_t b = 0, s = 0;
    CUresult rc = address_range(dptr, &b, &s);
    if (rc == CUDA_SUCCESS) {
        if (pbase)
            *pbase = b;
        if (psize)
            *psize = s;
    }
    return rc;
}

SIM_API cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize, CUdeviceptr_v1 dptr)
{
    uint64_t b = 0, s = 0;
    CUresult rc = address_range(dptr, &b, &s);
    if (rc == CUDA_SUCCESS && (b > UINT_MAX || s > UINT_MAX))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        if (pbase)
            *pbase = (CUdeviceptr_v1)b;
        if (psize)
            *psize = (unsigned int)s;
    }
    return rc;
}
