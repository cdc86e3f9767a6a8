/*
 * Collective kernels under a compute limit (compute_collective.h). Per
 * device, a ring of event pairs brackets the collectives in flight; a
 * harvest (at the next collective, or when a window closes) reads the ones
 * that completed and charges each its kernel's spin-free estimate
 * (gs_coll_est_add) on the device it ran on: nothing one GPU's collective
 * spins for is charged to a rank on another.
 */
#define _GNU_SOURCE
#include "compute_collective.h"
#include "compute_cost.h"
#include "../core/collective.h"
#include "../core/func_class.h"
#include "../core/limiter.h"
#include "compute_capture.h"
#include "compute_clock.h"
#include "log.h"
#include "real_driver.h"
#include "runtime.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RING 64            /* collectives in flight measured per device */
#define KEYS 32            /* kernels and grids with an estimate of their own per device */
#define CLASS_BITS 10      /* a thread's cache of which functions are collectives: 1024 ways */
#define SPUN_NS 1000000ULL /* a span this much past twice its estimate waited for a peer */

struct coll_key {
    const void *f; /* the kernel's function, or the executable graph */
    unsigned blocks;
    struct gs_coll_est est;
};

enum slot_state { SLOT_FREE, SLOT_LAUNCHING, SLOT_MEASURED, SLOT_UNMEASURED };
struct coll_slot {
    CUevent start, end;
    CUcontext ctx; /* the context current when its events were made */
    int key;       /* index in keys[] */
    int graph;     /* a graph's launch: its work is in a window's busy interval */
    enum slot_state state;
};

struct coll_dev {
    pthread_mutex_t lock;
    unsigned gen; /* gs_rt_fork_generation + 1 when the ring was last used */
    uint32_t head, tail;
    uint32_t next_key;
    uint64_t spun_ns; /* when a collective last spun for its peers well past its estimate */
    struct coll_slot slot[RING];
    struct coll_key keys[KEYS];
};

static struct coll_dev g_dev[GS_REGION_MAX_DEVICES] = { [0 ... GS_REGION_MAX_DEVICES -
                                                         1] = { .lock = PTHREAD_MUTEX_INITIALIZER } };

/* Which functions are collectives: asked of the driver once per function
 * and process (again after an unload), cached per thread (a launch's
 * lookup is a compare). */
static pthread_mutex_t g_class_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gs_fclass g_class; /* g_class_lock */
/* Moved on where the driver may hand a function's handle out again for
 * another kernel (gs_compute_collective_unloaded): a thread's cache of an
 * older generation starts again empty at its next lookup. */
static unsigned g_class_gen;
struct class_way {
    CUfunction f;
    int coll;
};
struct class_cache {
    unsigned gen;
    struct class_way way[1U << CLASS_BITS];
};
/* On the heap behind an initial-exec TLS pointer, as compute_limiter.c's
 * per-thread state: looked up on every limited launch, where a dynamic TLS
 * access is a __tls_get_addr call. Freed at the thread's exit. */
static __thread struct class_cache *t_class __attribute__((tls_model("initial-exec")));
static pthread_once_t class_once = PTHREAD_ONCE_INIT;
static pthread_key_t class_key;

static void class_free(void *cache)
{
    t_class = NULL;
    free(cache);
}

static void class_key_make(void)
{
    (void)pthread_key_create(&class_key, class_free);
}

/* This thread's cache, made at its first lookup; NULL where no memory is
 * left (each lookup then asks the shared table). */
static struct class_cache *thread_class(void)
{
    struct class_cache *c = t_class;
    if (GS_LIKELY(c != NULL))
        return c;
    pthread_once(&class_once, class_key_make);
    c = calloc(1, sizeof *c);
    if (c)
        (void)pthread_setspecific(class_key, c);
    t_class = c;
    return c;
}

static int classify(CUfunction f)
{
    if (!f)
        return 0;
    pthread_mutex_lock(&g_class_lock);
    int coll = gs_fclass_get(&g_class, f);
    const char *name = NULL;
    if (coll < 0) {
        /* a failed lookup (no current context, say) is not kept: asked again */
        gs_pfn_cuFuncGetName get = GS_REAL_CU(cuFuncGetName);
        gs_pfn_cuKernelGetName get_kernel = GS_REAL_CU(cuKernelGetName);
        int named = get && get(&name, f) == CUDA_SUCCESS;
        if (!named) /* a library's kernel (CUkernel), which cuLaunchKernel takes cast */
            named = get_kernel && get_kernel(&name, (CUkernel)(void *)f) == CUDA_SUCCESS;
        coll = named && gs_collective_name(name);
        if (named)
            gs_fclass_put(&g_class, f, coll);
    }
    pthread_mutex_unlock(&g_class_lock);
    if (coll && name) /* logged outside the lock: a blocked stderr stalls no other thread's lookup */
        gs_log(GS_LOG_DEBUG, "collective kernel %s: charged its time without waiting for peers", name);
    return coll;
}

/* Every answer, the threads' cached ones too, is asked again. g_class_lock
 * held, or no other thread. */
static void forget_answers(void)
{
    gs_fclass_clear(&g_class);
    __atomic_add_fetch(&g_class_gen, 1, __ATOMIC_RELEASE);
}

void gs_compute_collective_fork_child(void)
{
    /* the other threads are gone, and may have held these */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    g_class_lock = fresh;
    forget_answers(); /* and may have been clearing the table */
    for (int d = 0; d < GS_REGION_MAX_DEVICES; d++)
        g_dev[d].lock = fresh;
}

int gs_compute_is_collective(CUfunction f)
{
    struct class_cache *c = thread_class();
    unsigned gen = __atomic_load_n(&g_class_gen, __ATOMIC_ACQUIRE);
    unsigned way = gs_fclass_hash(f, CLASS_BITS);
    if (GS_LIKELY(c && c->gen == gen && c->way[way].f == f && f))
        return c->way[way].coll;
    int coll = classify(f);
    if (c) {
        if (c->gen != gen) {
            memset(c->way, 0, sizeof c->way);
            c->gen = gen;
        }
        c->way[way] = (struct class_way){ .f = f, .coll = coll };
    }
    return coll;
}

void gs_compute_collective_unloaded(void)
{
    if (gs_mode() == GS_MODE_PASSTHROUGH)
        return; /* nothing is asked, so nothing to forget */
    pthread_mutex_lock(&g_class_lock);
    forget_answers();
    pthread_mutex_unlock(&g_class_lock);
}

static CUevent timing_event(CUevent *e)
{
    gs_pfn_cuEventCreate create = GS_REAL_CU(cuEventCreate);
    if (!*e && create && create(e, 0) != CUDA_SUCCESS)
        *e = NULL;
    return *e;
}

/* Slot sl's two events, made in the current context where it has none. */
static int slot_events(struct coll_slot *sl)
{
    if (!sl->start && !sl->end) {
        gs_pfn_cuCtxGetCurrent current = GS_REAL_CU(cuCtxGetCurrent);
        if (!current || current(&sl->ctx) != CUDA_SUCCESS)
            sl->ctx = NULL;
    }
    return timing_event(&sl->start) && timing_event(&sl->end);
}

/* The ring of device d, emptied if a fork left the parent's in it. */
static struct coll_dev *ring_of(int d)
{
    struct coll_dev *c = &g_dev[d];
    unsigned gen = __atomic_load_n(&gs_rt_fork_generation, __ATOMIC_RELAXED) + 1;
    if (c->gen != gen) {
        for (int i = 0; i < RING; i++)
            c->slot[i] = (struct coll_slot){ .state = SLOT_FREE };
        c->head = c->tail = 0;
        c->gen = gen;
    }
    return c;
}

static int key_of(struct coll_dev *c, const void *f, unsigned blocks)
{
    for (int i = 0; i < KEYS; i++)
        if (c->keys[i].f == f && c->keys[i].blocks == blocks)
            return i;
    int k = (int)(c->next_key++ % KEYS);
    c->keys[k] = (struct coll_key){ .f = f, .blocks = blocks };
    return k;
}

/* GPU ns from event a to event b (negative: b came first); 0 and *ok = 0
 * when either cannot be read. */
static int64_t between(gs_pfn_cuEventElapsedTime elapsed, CUevent a, CUevent b, int *ok)
{
    float ms = 0;
    if (!elapsed || elapsed(&ms, a, b) != CUDA_SUCCESS) {
        *ok = 0;
        return 0;
    }
    return (int64_t)((double)ms * 1e6);
}

/* Charges the completed collectives at the ring's tail; lock held. */
static void harvest_locked(struct coll_dev *c, struct gs_lim_account *a)
{
    gs_pfn_cuEventQuery query = GS_REAL_CU(cuEventQuery);
    gs_pfn_cuEventElapsedTime elapsed = GS_REAL_CU(cuEventElapsedTime);
    while (c->tail != c->head) {
        struct coll_slot *s = &c->slot[c->tail % RING];
        if (s->state == SLOT_LAUNCHING)
            return; /* its launch is under way in another thread */
        if (s->state == SLOT_MEASURED) {
            CUresult q = query ? query(s->end) : CUDA_ERROR_NOT_FOUND;
            if (q == CUDA_ERROR_NOT_READY)
                return;
            int ok = q == CUDA_SUCCESS;
            int64_t measured = ok ? between(elapsed, s->start, s->end, &ok) : 0;
            if (ok && measured >= 0) {
                uint64_t span = (uint64_t)measured;
                uint64_t work = gs_coll_est_add(&c->keys[s->key].est, span);
                uint64_t est = gs_coll_est_now(&c->keys[s->key].est);
                if (span > 2 * est + SPUN_NS)
                    __atomic_store_n(&c->spun_ns, gs_compute_now(), __ATOMIC_RELAXED);
                if (span > est)
                    gs_cost_add(GS_COST_SPIN, span - est);
                if (!s->graph)
                    gs_lim_charge_collective(a, span, work);
                else if (est && span > est)
                    gs_lim_charge_collective(a, span - est, 0); /* the spin a busy interval left out: NVML sees it */
                if (span > 10000000ULL)
                    gs_log(GS_LOG_DEBUG, "a collective spanned %llu us, charged %llu us",
                           (unsigned long long)(span / 1000), (unsigned long long)(work / 1000));
            }
        }
        s->state = SLOT_FREE;
        c->tail++;
    }
}

void gs_compute_collective_harvest(int d)
{
    struct gs_region *r = gs_rt_region();
    if (d < 0 || d >= GS_REGION_MAX_DEVICES || !r)
        return;
    struct coll_dev *c = &g_dev[d];
    if (__atomic_load_n(&c->head, __ATOMIC_RELAXED) == __atomic_load_n(&c->tail, __ATOMIC_RELAXED) ||
        !gs_compute_sync_enter())
        return;
    pthread_mutex_lock(&c->lock);
    harvest_locked(ring_of(d), &r->dev[d].lim);
    pthread_mutex_unlock(&c->lock);
    gs_compute_sync_leave();
}

/* Brackets a launch of f (a collective's kernel, or a graph holding one)
 * on stream s with a ring slot's events; a token for after, or -1. */
static int bracket(const void *f, unsigned blocks, CUstream s, int graph)
{
    CUdevice ord = -1;
    int d = gs_rt_dev_current(&ord);
    struct gs_region *r = gs_rt_region();
    if (d < 0 || d >= GS_REGION_MAX_DEVICES || !r || !r->dev[d].lim.configured)
        return -1; /* no limit on this device (the account is set up at its first kernel) */
    gs_pfn_cuEventRecord rec = GS_REAL_CU(cuEventRecord);
    if (!rec || !gs_compute_sync_enter())
        return -1;
    struct gs_lim_account *a = &r->dev[d].lim;
    struct coll_dev *c = &g_dev[d];
    int token = -1;
    gs_compute_step_mark(r, 1);
    pthread_mutex_lock(&c->lock);
    ring_of(d);
    harvest_locked(c, a);
    int k = key_of(c, f, blocks);
    struct coll_slot *sl = &c->slot[c->head % RING];
    if (c->head - c->tail >= RING) {
        /* too many in flight to measure: charged what its kernel takes (a
         * graph, as any graph) */
        uint64_t est = gs_coll_est_now(&c->keys[k].est);
        if (!graph)
            gs_lim_charge_collective(a, est, est);
    } else if (slot_events(sl) && rec(sl->start, s) == CUDA_SUCCESS) {
        sl->key = k;
        sl->graph = graph;
        sl->state = SLOT_LAUNCHING;
        token = (int)(c->head % RING) + d * RING;
        c->head++;
    }
    pthread_mutex_unlock(&c->lock);
    gs_compute_sync_leave();
    return token;
}

int gs_compute_collective_before(CUfunction f, unsigned blocks, CUstream s)
{
    if (gs_compute_capturing()) {
        gs_compute_capture_saw_collective(); /* it runs inside a graph launch, gated as one */
        return -1;
    }
    return bracket(f, blocks, s, 0);
}

int gs_compute_collective_graph_before(CUgraphExec g, CUstream s)
{
    if (gs_compute_capturing())
        return -1; /* a graph captured into another: charged as that one */
    return bracket(g, 0, s, 1);
}

void gs_compute_collective_after(int token, CUstream s, CUresult rc)
{
    int d = token / RING;
    struct coll_dev *c = &g_dev[d];
    gs_pfn_cuEventRecord rec = GS_REAL_CU(cuEventRecord);
    pthread_mutex_lock(&c->lock);
    struct coll_slot *sl = &c->slot[token % RING];
    /* a failed launch or end marker leaves the slot unmeasured: the harvest frees it */
    int measured = rc == CUDA_SUCCESS && rec && sl->end && gs_compute_sync_enter();
    if (measured) {
        measured = rec(sl->end, s) == CUDA_SUCCESS;
        gs_compute_sync_leave();
    }
    sl->state = measured ? SLOT_MEASURED : SLOT_UNMEASURED;
    pthread_mutex_unlock(&c->lock);
}

void gs_compute_collective_forget(CUcontext ctx)
{
    struct gs_region *r = gs_rt_region();
    gs_pfn_cuEventDestroy_v2 destroy = GS_REAL_CU(cuEventDestroy_v2);
    for (int d = 0; d < GS_REGION_MAX_DEVICES; d++) {
        struct coll_dev *c = &g_dev[d];
        pthread_mutex_lock(&c->lock);
        ring_of(d);
        for (uint32_t i = 0; i < RING; i++) {
            struct coll_slot *sl = &c->slot[i];
            if (sl->ctx != ctx || (!sl->start && !sl->end))
                continue;
            /* in flight: its work goes with the context, and its events
             * can no longer be read. Charged what its kernel takes, as one
             * too many to measure is */
            if ((sl->state == SLOT_LAUNCHING || sl->state == SLOT_MEASURED) && !sl->graph && r) {
                uint64_t est = gs_coll_est_now(&c->keys[sl->key].est);
                gs_lim_charge_collective(&r->dev[d].lim, est, est);
            }
            if (sl->state != SLOT_FREE)
                sl->state = SLOT_UNMEASURED; /* the harvest frees it unread */
            if (sl->start && destroy)
                destroy(sl->start);
            if (sl->end && destroy)
                destroy(sl->end);
            sl->start = sl->end = NULL;
        }
        pthread_mutex_unlock(&c->lock);
    }
}

int gs_compute_collective_in_flight(int d)
{
    if (d < 0 || d >= GS_REGION_MAX_DEVICES)
        return 0;
    return __atomic_load_n(&g_dev[d].head, __ATOMIC_RELAXED) != __atomic_load_n(&g_dev[d].tail, __ATOMIC_RELAXED);
}

static uint64_t overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1)
{
    int64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? (uint64_t)(hi - lo) : 0;
}

uint64_t gs_compute_collective_spin(int d, CUevent from, uint64_t len_ns)
{
    if (d < 0 || d >= GS_REGION_MAX_DEVICES || !from)
        return 0;
    struct coll_dev *c = &g_dev[d];
    if (__atomic_load_n(&c->head, __ATOMIC_RELAXED) == __atomic_load_n(&c->tail, __ATOMIC_RELAXED))
        return 0;
    struct gs_region *r = gs_rt_region();
    gs_pfn_cuEventQuery query = GS_REAL_CU(cuEventQuery);
    gs_pfn_cuEventElapsedTime elapsed = GS_REAL_CU(cuEventElapsedTime);
    uint64_t spin = 0;
    if (!r)
        return 0;
    pthread_mutex_lock(&c->lock);
    ring_of(d);
    for (uint32_t i = c->tail; i != c->head; i++) {
        struct coll_slot *s = &c->slot[i % RING];
        if (s->state != SLOT_MEASURED || !query || query(s->end) != CUDA_SUCCESS)
            continue;
        int ok = 1;
        int64_t b = between(elapsed, from, s->start, &ok), e = between(elapsed, from, s->end, &ok);
        uint64_t work = gs_coll_est_now(&c->keys[s->key].est);
        if (s->graph && work == 0)
            continue;    /* its spin-free time is not known yet: a graph is charged whole till then */
        if (ok && e > b) /* the wait comes first; its own work ends the span */
            spin += overlap(0, (int64_t)len_ns, b, e - (int64_t)(work < (uint64_t)(e - b) ? work : (uint64_t)(e - b)));
    }
    /* the completed ones lie before any later interval: charged now, they
     * are not read again at every probe (a TP decoder makes two a layer) */
    harvest_locked(c, &r->dev[d].lim);
    pthread_mutex_unlock(&c->lock);
    return spin > len_ns ? len_ns : spin;
}

int gs_compute_collective_spun(int d, uint64_t now)
{
    if (d < 0 || d >= GS_REGION_MAX_DEVICES)
        return 0;
    uint64_t at = __atomic_load_n(&g_dev[d].spun_ns, __ATOMIC_RELAXED);
    return at && gs_lim_recent(at, now, GS_LIM_THROTTLED_NS);
}

void gs_compute_step_mark(struct gs_region *r, int collective)
{
    int s = gs_rt_slot();
    if (s < 0 || s >= GS_REGION_MAX_PROCS)
        return;
    uint64_t *m = &r->proc[s].lim.step_mark;
    uint64_t old = __atomic_load_n(m, __ATOMIC_RELAXED);
    uint64_t next = collective ? gs_step_after_collective(old) : gs_step_after_kernel(old);
    /* the kernel's case is a load and nothing more on almost every launch;
     * a process's threads may race, hence the exchange */
    while (next != old && !__atomic_compare_exchange_n(m, &old, next, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        next = collective ? gs_step_after_collective(old) : gs_step_after_kernel(old);
}

int gs_compute_is_rank(const struct gs_region *r)
{
    int s = gs_rt_slot();
    return s >= 0 && s < GS_REGION_MAX_PROCS &&
           __atomic_load_n(&r->proc[s].lim.step_mark, __ATOMIC_RELAXED) >= gs_step_after_collective(0);
}

int gs_compute_peer_ahead(const struct gs_region *r)
{
    int s = gs_rt_slot();
    if (s < 0 || s >= GS_REGION_MAX_PROCS)
        return 0;
    uint64_t mine = __atomic_load_n(&r->proc[s].lim.step_mark, __ATOMIC_RELAXED);
    for (int i = 0; i < GS_REGION_MAX_PROCS; i++)
        if (i != s && __atomic_load_n(&r->proc[i].pid, __ATOMIC_RELAXED) != 0 &&
            __atomic_load_n(&r->proc[i].lim.step_mark, __ATOMIC_ACQUIRE) > mine)
            return 1;
    return 0;
}
