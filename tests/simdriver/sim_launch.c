/*
 * Streams, events, modules and every launch entry point. A function named
 * "sleep_us:N" runs for N microseconds of exclusive device time per launch
 * (so does "ncclKernel_sleep_us:N", a kernel named as NCCL's that is none),
 * "wave_us:N" for N microseconds per wave of SIM_SMS blocks;
 * "ncclDevKernel_AllReduce_sim:N:R:G" is a collective of group G among R
 * processes that waits on the device for its peers, then runs N microseconds
 * (sim_timeline.h); "spin_flag" spins on a host flag (its first parameter,
 * a uint32's address in host memory the device reaches: sim_host_memory.c)
 * until the host sets it, holding back what is queued after it as
 * cuStreamWaitValue32 does, with no API call that says so; any other name
 * takes no time. cuStreamWaitValue32 holds
 * back what is queued after it until host memory holds the value (see
 * host_waits_hold), and a host function (cuLaunchHostFunc) what is queued
 * after it until it returns, on a thread of its own. Launches go onto the device
 * timeline (sim_timeline.c): they return at once and the work completes
 * later, time-sliced with other processes' work. Events complete when the work before them has; their
 * timestamps are the timeline's. Synchronisation really waits.
 *
 * Work launched into a capturing stream is recorded, not run, and the rules
 * of capture (what invalidates it) are sim_capture.c's.
 *
 * Handles point into fixed process-local tables, so a stale handle is
 * detected without touching freed memory: CUDA_ERROR_INVALID_HANDLE, or
 * with GPUSLICE_SIM_STRICT_HANDLES=1 an abort naming it (on the driver a
 * destroyed handle is undefined behaviour, and its value may be a new
 * object's). A context's streams and events go with it.
 */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sim_capture.h"
#include "sim_cuda.h"
#include "sim_export.h"
#include "sim_timeline.h"

#define SIM_SMS 132                      /* blocks per wave for wave_us: functions */
#define SIM_MAX_PENDING_NS 2000000000ULL /* a launch blocks beyond this much queued work */
#define MAX_GRAPHS 256

#define MAX_STREAMS 1024
#define MAX_EVENTS 4096
#define MAX_MODULES 256
#define MAX_FUNCS 2048
#define NAME_LEN 128

struct sim_stream {
    int in_use;
    int ctx;
};
struct sim_event {
    int in_use;
    int ctx;
    int recorded;
    unsigned int flags;
    uint64_t t_ns;
    int pending; /* recorded behind work not done yet */
    int dev;
    uint64_t target;   /* the process's submitted work when recorded */
    CUstream captured; /* last recorded into this capturing stream, or NULL */
};
struct sim_graph {
    int in_use;
    int func;
    unsigned int count;         /* launches of func per graph launch */
    uint64_t gap_ns;            /* idle device time between consecutive ones */
    struct sim_graph_body body; /* func < 0: a captured graph's parts */
};
struct sim_module {
    int in_use;
    int library; /* loaded by cuLibraryLoadData: its functions are kernels (CUkernel) */
    int ctx;     /* the context index it was loaded in (a library: -1, it has none) */
};
struct sim_func {
    int in_use;
    int module;
    char name[NAME_LEN]; /* what cuFuncGetName returns: stable while the function lives */
    uint64_t dur_ns;
    int per_wave;
    int coll;       /* a collective of ... */
    unsigned ranks; /* ... this many processes */
    unsigned group; /* ... in this group */
    int spin_flag;  /* spins until the host flag its first parameter points at is set */
};

#define COLL_PREFIX "ncclDevKernel_AllReduce_sim:"
#define COLL_MAX_US 1000000000ULL /* a collective's own work: at most 1000 s */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_stream g_streams[MAX_STREAMS];
static struct sim_event g_events[MAX_EVENTS];
static struct sim_module g_modules[MAX_MODULES];
static struct sim_func g_funcs[MAX_FUNCS];
static struct sim_graph g_graphs[MAX_GRAPHS];

/* Index of a live handle in its table, or -1. Every table entry starts with
 * its in_use flag. */
static int live_index(const void *h, const void *table, size_t n, size_t elem)
{
    uintptr_t p = (uintptr_t)h, t = (uintptr_t)table;
    if (p < t || p >= t + n * elem || (p - t) % elem)
        return -1;
    const int *in_use = (const int *)h;
    if (*in_use)
        return (int)((p - t) / elem);
    const char *strict = getenv("GPUSLICE_SIM_STRICT_HANDLES");
    if (strict && !strcmp(strict, "1")) {
        fprintf(stderr, "gpuslice-sim: use of destroyed handle %p\n", h);
        abort();
    }
    return -1;
}
#define HANDLE_INDEX(table, n, h) live_index((const void *)(h), (table), (n), sizeof((table)[0]))

/* Checks cuInit and a current context (launches need one). */
static CUresult need_ctx(void)
{
    int ctx = -1;
    return sim_need_ctx(&ctx);
}

/* Device of the calling thread's current context, or -1. */
static int current_dev(void)
{
    int ctx = -1;
    if (sim_current_ctx(&ctx) != CUDA_SUCCESS)
        return -1;
    return sim_ctxs[ctx].dev;
}

/* What a launch puts on the timeline: ns of work, a collective's (coll)
 * or a graph's nodes with idle gaps between them (graph). */
struct sim_submission {
    uint64_t ns;
    const struct sim_func *coll;
    const struct sim_graph *graph;
};

/* Queues it on dev; 0 when the queue is too full to take it now. Lock held. */
static int try_submit(struct sim_call *c, int dev, const struct sim_submission *sub)
{
    uint64_t now = sim_now_ns();
    sim_tl_advance(c->st, dev, now);
    const struct sim_work *w = &c->st->procs[c->proc].work[dev];
    if (w->submitted - w->done >= SIM_MAX_PENDING_NS)
        return 0;
    if (sub->coll)
        return sim_tl_collective(c->st, c->proc, dev, sub->ns, sub->coll->group, sub->coll->ranks, now) == 0;
    if (sub->graph)
        return sim_tl_submit_graph(c->st, c->proc, dev, sub->ns, sub->graph->count, sub->graph->gap_ns, now) == 0;
    sim_tl_submit(c->st, c->proc, dev, sub->ns, now);
    return 1;
}

/* Puts a launch's work on the timeline; blocks while too much is queued,
 * like a full push buffer. */
static CUresult submit_launch(const struct sim_submission *sub)
{
    int dev = current_dev();
    if ((sub->ns == 0 && !sub->coll && !sub->graph) || dev < 0)
        return CUDA_SUCCESS;
    for (;;) {
        struct sim_call c;
        CUresult rc = sim_enter(&c);
        if (rc != CUDA_SUCCESS)
            return rc;
        int queued = try_submit(&c, dev, sub);
        sim_leave(&c);
        if (queued)
            return CUDA_SUCCESS;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

/* ns of work (a collective: coll). */
static CUresult submit(uint64_t ns, const struct sim_func *coll)
{
    struct sim_submission sub = { .ns = ns, .coll = coll };
    return submit_launch(&sub);
}

/* Waits for host memory (cuStreamWaitValue32), process-local as that
 * memory is. The sim takes the address for a host one, as a mapped pinned
 * allocation's device pointer is under unified addressing. What was queued
 * after a wait (past `at` of the process's work on dev) completes, as the
 * host sees it -- events, queries, synchronisation -- only once the value
 * holds; the timeline runs on meanwhile (a simplification: the device is
 * not held, and events behind the wait keep the timeline's stamps). */
#define MAX_HOST_WAITS 64
/* How often a wait for work that a host wait holds back looks again: a
 * poll every 20 us of a waiter spinning a core would crowd a 2-core machine. */
#define HOST_WAIT_POLL_NS 1000000ULL
struct host_wait {
    int dev;
    uint64_t at;
    const volatile uint32_t *addr;
    uint32_t value;
    unsigned cmp; /* CU_STREAM_WAIT_VALUE_GEQ 0, EQ 1, AND 2, NOR 3 */
    void *owned;  /* freed with the wait: a host function's call (addr is in it) */
};
static struct host_wait g_host_waits[MAX_HOST_WAITS];
static int g_nhost_waits;

static int host_value_holds(const struct host_wait *h)
{
    uint32_t v = *h->addr;
    switch (h->cmp) {
    case 0: return (int32_t)(v - h->value) >= 0; /* GEQ, cyclic as the driver's */
    case 1: return v == h->value;
    case 2: return (v & h->value) != 0;
    default: return ~(v | h->value) != 0;
    }
}

/* Whether a wait on dev before target still holds that work back; a wait
 * whose value held is passed for good, as on the device. */
static int host_waits_hold(int dev, uint64_t target)
{
    int held = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_nhost_waits;) {
        struct host_wait *h = &g_host_waits[i];
        if (h->dev == dev && h->at < target && host_value_holds(h)) {
            free(h->owned);
            *h = g_host_waits[--g_nhost_waits];
            continue;
        }
        held |= h->dev == dev && h->at < target;
        i++;
    }
    pthread_mutex_unlock(&g_lock);
    return held;
}

/* The process's submitted work on the current device; for_event: an event
 * recorded now, which may itself wait for the process's slice
 * (sim_tl_event_mark). */
static CUresult work_mark(int *dev, uint64_t *target, int *done, int for_event)
{
    *dev = current_dev();
    *target = 0;
    *done = 1;
    if (*dev < 0)
        return CUDA_SUCCESS;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t now = sim_now_ns();
    sim_tl_advance(c.st, *dev, now);
    const struct sim_work *w = &c.st->procs[c.proc].work[*dev];
    *target = for_event ? sim_tl_event_mark(c.st, c.proc, *dev, now) : w->submitted;
    *done = w->done >= w->submitted;
    sim_leave(&c);
    if (*done)
        *done = !host_waits_hold(*dev, *target);
    return CUDA_SUCCESS;
}

/* Whether the process's work up to target on dev is done; if so, when. */
static CUresult work_poll(int dev, uint64_t target, int *done, uint64_t *when, uint64_t *eta)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t now = sim_now_ns();
    sim_tl_advance(c.st, dev, now);
    const struct sim_work *w = &c.st->procs[c.proc].work[dev];
    *done = w->done >= target;
    if (*done && when)
        *when = sim_tl_done_time(w, target);
    if (!*done && eta)
        *eta = sim_tl_eta(c.st, dev, target - w->done);
    sim_leave(&c);
    if (*done && host_waits_hold(dev, target)) {
        *done = 0;
        if (eta)
            *eta = HOST_WAIT_POLL_NS; /* the host acts when it will: no timeline to wait out */
    }
    return CUDA_SUCCESS;
}

static CUresult work_wait(int dev, uint64_t target, uint64_t *when)
{
    for (;;) {
        int done = 0;
        uint64_t eta = 0;
        CUresult rc = work_poll(dev, target, &done, when, &eta);
        if (rc != CUDA_SUCCESS || done)
            return rc;
        if (eta < 20000)
            eta = 20000;
        if (eta > 2000000)
            eta = 2000000;
        struct timespec ts = { 0, (long)eta };
        nanosleep(&ts, NULL);
    }
}

CUresult sim_drain_current(void)
{
    int dev, done;
    uint64_t target;
    CUresult rc = work_mark(&dev, &target, &done, 0);
    if (rc != CUDA_SUCCESS || done)
        return rc;
    return work_wait(dev, target, NULL);
}

CUresult sim_drain_dev(int dev)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    sim_tl_advance(c.st, dev, sim_now_ns());
    uint64_t target = c.st->procs[c.proc].work[dev].submitted;
    sim_leave(&c);
    return work_wait(dev, target, NULL);
}

int sim_stream_valid(CUstream s)
{
    /* 0x1 is CU_STREAM_LEGACY, 0x2 CU_STREAM_PER_THREAD. */
    if (s == NULL || s == (CUstream)(uintptr_t)1 || s == (CUstream)(uintptr_t)2)
        return 1;
    pthread_mutex_lock(&g_lock);
    int ok = HANDLE_INDEX(g_streams, MAX_STREAMS, s) >= 0;
    pthread_mutex_unlock(&g_lock);
    return ok;
}

/* ---- streams ---- */

SIM_API cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    int ctx = -1;
    if (!phStream || Flags > 1) /* 1 = CU_STREAM_NON_BLOCKING */
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = need_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    sim_current_ctx(&ctx);
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < MAX_STREAMS; i++) {
        if (!g_streams[i].in_use) {
            g_streams[i] = (struct sim_stream){ 1, ctx };
            *phStream = (CUstream)(void *)&g_streams[i];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static CUresult stream_destroy(CUstream s)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_lock);
    int i = HANDLE_INDEX(g_streams, MAX_STREAMS, s);
    if (i >= 0)
        g_streams[i].in_use = 0;
    pthread_mutex_unlock(&g_lock);
    return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API cuStreamDestroy(CUstream hStream)
{
    return stream_destroy(hStream);
}

SIM_API cuStreamDestroy_v2(CUstream hStream)
{
    return stream_destroy(hStream);
}

static CUresult stream_sync(CUstream hStream)
{
    CUresult rc = need_ctx();
    if (rc == CUDA_SUCCESS && !sim_stream_valid(hStream))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS)
        rc = sim_capture_unsafe(hStream);
    if (rc == CUDA_SUCCESS)
        rc = sim_drain_current(); /* all of the process's streams form one queue */
    return rc;
}

SIM_API cuStreamSynchronize(CUstream hStream)
{
    return stream_sync(hStream);
}

SIM_API cuStreamSynchronize_ptsz(CUstream hStream)
{
    return stream_sync(hStream);
}

SIM_API cuStreamQuery(CUstream hStream)
{
    CUresult rc = need_ctx();
    if (rc == CUDA_SUCCESS && !sim_stream_valid(hStream))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS)
        rc = sim_capture_unsafe(hStream);
    if (rc != CUDA_SUCCESS)
        return rc;
    int dev, done;
    uint64_t target;
    rc = work_mark(&dev, &target, &done, 0);
    return rc != CUDA_SUCCESS ? rc : done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

/* Queues w (its addr, value and cmp; its owned memory, freed with it) on
 * the current device as a point in the queue of its own: what comes after
 * it, an event too, is past `at`, and waits until w's value holds. No
 * device: nothing to wait for. CUDA_ERROR_OUT_OF_MEMORY when the table is
 * full (nothing queued, w.owned not taken). */
static CUresult queue_host_wait(struct host_wait w)
{
    CUresult rc = submit(1, NULL);
    int done = 0;
    uint64_t at = 0;
    w.dev = -1;
    if (rc == CUDA_SUCCESS)
        rc = work_mark(&w.dev, &at, &done, 0);
    if (rc != CUDA_SUCCESS || w.dev < 0)
        return rc;
    w.at = at - 1;
    pthread_mutex_lock(&g_lock);
    if (g_nhost_waits < MAX_HOST_WAITS)
        g_host_waits[g_nhost_waits++] = w;
    else
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static CUresult wait_value(CUstream s, CUdeviceptr addr, uint32_t value, unsigned int flags)
{
    unsigned cmp = flags & ~(1U << 30); /* CU_STREAM_WAIT_VALUE_FLUSH: nothing to flush here */
    CUresult rc = need_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!addr || (addr & 3) || cmp > 3 || !sim_stream_valid(s))
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_capture_status(s) != 0)
        return CUDA_ERROR_NOT_SUPPORTED; /* not modelled in a capture */
    return queue_host_wait(
        (struct host_wait){ .addr = (const volatile uint32_t *)(uintptr_t)addr, .value = value, .cmp = cmp });
}

SIM_API cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, uint32_t value, unsigned int flags)
{
    return wait_value(stream, addr, value, flags);
}

SIM_API cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, uint32_t value, unsigned int flags)
{
    return wait_value(stream, addr, value, flags);
}

void sim_drop_ctx_handles(int ctx)
{
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < MAX_STREAMS; i++)
        if (g_streams[i].ctx == ctx)
            g_streams[i].in_use = 0;
    for (int i = 0; i < MAX_EVENTS; i++)
        if (g_events[i].ctx == ctx)
            g_events[i].in_use = 0;
    pthread_mutex_unlock(&g_lock);
}

/* ---- events ---- */

SIM_API cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    int ctx = -1;
    if (!phEvent || (Flags & ~0x7U))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = need_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    sim_current_ctx(&ctx);
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < MAX_EVENTS; i++) {
        if (!g_events[i].in_use) {
            g_events[i] = (struct sim_event){ .in_use = 1, .ctx = ctx, .flags = Flags };
            *phEvent = (CUevent)(void *)&g_events[i];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

SIM_API cuEventRecord(CUevent hEvent, CUstream hStream)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!sim_stream_valid(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    int cap = sim_capture_status(hStream);
    if (cap == 2)
        return SIM_ERR_CAPTURE_INVALIDATED;
    if (cap == 1) { /* a node of the graph: the event is now the capture's */
        pthread_mutex_lock(&g_lock);
        int i = HANDLE_INDEX(g_events, MAX_EVENTS, hEvent);
        if (i >= 0)
            g_events[i].captured = hStream;
        pthread_mutex_unlock(&g_lock);
        return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    }
    /* the record is work of its own, stamped when it ends: a record between
     * two kernels took an H200 1.3-1.6 us (GPUSLICE_SIM_EVENT_NS) */
    const struct sim_state *st = sim_state_attach();
    if (st && st->event_ns) {
        pthread_mutex_lock(&g_lock);
        int known = HANDLE_INDEX(g_events, MAX_EVENTS, hEvent) >= 0;
        pthread_mutex_unlock(&g_lock);
        CUresult rc = known ? submit(st->event_ns, NULL) : CUDA_SUCCESS;
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    int dev = -1, done = 1;
    uint64_t target = 0;
    if (work_mark(&dev, &target, &done, 1) != CUDA_SUCCESS)
        dev = -1, done = 1;
    uint64_t now = sim_now_ns();
    pthread_mutex_lock(&g_lock);
    int i = HANDLE_INDEX(g_events, MAX_EVENTS, hEvent);
    if (i >= 0) {
        g_events[i].recorded = 1;
        g_events[i].t_ns = now; /* final when no work is ahead of it */
        g_events[i].pending = !done;
        g_events[i].dev = dev;
        g_events[i].target = target;
        g_events[i].captured = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Settles a pending event: wait != 0 blocks until its work is done. */
static CUresult event_settle(CUevent e, int wait)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_lock);
    int i = HANDLE_INDEX(g_events, MAX_EVENTS, e);
    CUstream captured = i >= 0 ? g_events[i].captured : NULL;
    pthread_mutex_unlock(&g_lock);
    if (captured) { /* last recorded in a capture: not a thing that completes */
        sim_capture_invalidate(captured);
        return SIM_ERR_CAPTURED_EVENT;
    }
    if (i >= 0) {
        CUresult urc = sim_capture_unsafe(NULL);
        if (urc != CUDA_SUCCESS)
            return urc;
    }
    pthread_mutex_lock(&g_lock);
    i = HANDLE_INDEX(g_events, MAX_EVENTS, e);
    int pend = i >= 0 && g_events[i].pending;
    int dev = i >= 0 ? g_events[i].dev : -1;
    uint64_t target = i >= 0 ? g_events[i].target : 0;
    pthread_mutex_unlock(&g_lock);
    if (i < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!pend)
        return CUDA_SUCCESS;
    uint64_t when = 0;
    int done = 0;
    CUresult rc = wait ? work_wait(dev, target, &when) : work_poll(dev, target, &done, &when, NULL);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!wait && !done)
        return CUDA_ERROR_NOT_READY;
    pthread_mutex_lock(&g_lock);
    if (g_events[i].in_use && g_events[i].pending && g_events[i].target == target) {
        g_events[i].pending = 0;
        g_events[i].t_ns = when;
    }
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

SIM_API cuEventSynchronize(CUevent hEvent)
{
    return event_settle(hEvent, 1);
}

SIM_API cuEventQuery(CUevent hEvent)
{
    return event_settle(hEvent, 0);
}

SIM_API cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = event_settle(hStart, 0);
    if (rc == CUDA_SUCCESS)
        rc = event_settle(hEnd, 0);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_lock);
    int a = HANDLE_INDEX(g_events, MAX_EVENTS, hStart);
    int b = HANDLE_INDEX(g_events, MAX_EVENTS, hEnd);
    if (a < 0 || b < 0 || (g_events[a].flags & 0x2) || (g_events[b].flags & 0x2))
        rc = CUDA_ERROR_INVALID_HANDLE; /* 0x2 = CU_EVENT_DISABLE_TIMING */
    else if (!g_events[a].recorded || !g_events[b].recorded)
        rc = CUDA_ERROR_INVALID_HANDLE;
    else
        *pMilliseconds = (float)((double)((int64_t)(g_events[b].t_ns - g_events[a].t_ns)) / 1e6);
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static CUresult event_destroy(CUevent e)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_lock);
    int i = HANDLE_INDEX(g_events, MAX_EVENTS, e);
    if (i >= 0)
        g_events[i].in_use = 0;
    pthread_mutex_unlock(&g_lock);
    return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API cuEventDestroy(CUevent hEvent)
{
    return event_destroy(hEvent);
}

SIM_API cuEventDestroy_v2(CUevent hEvent)
{
    return event_destroy(hEvent);
}

/* ---- modules and functions ---- */

/* A module, or a library (CUDA 12's context-independent loading), which is
 * a module whose functions are kernels (CUkernel). */
static CUresult module_load(void **module, const void *image, int library)
{
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    int ctx = -1;
    CUresult rc = sim_need_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < MAX_MODULES; i++) {
        if (!g_modules[i].in_use) {
            g_modules[i] = (struct sim_module){ .in_use = 1, .library = library, .ctx = library ? -1 : ctx };
            *module = &g_modules[i];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* A live module of the kind asked for (library or not), or -1. g_lock held. */
static int module_index(const void *hmod, int library)
{
    int m = HANDLE_INDEX(g_modules, MAX_MODULES, hmod);
    return m >= 0 && g_modules[m].library == library ? m : -1;
}

SIM_API cuModuleLoadData(CUmodule *module, const void *image)
{
    return module_load((void **)module, image, 0);
}

/* What a function's name says it does. A name that claims to be a
 * collective must be one: CUDA_ERROR_INVALID_VALUE otherwise. */
static CUresult parse_func(struct sim_func *f, const char *name)
{
    unsigned long long us = 0, ranks = 0, group = 0;
    if (strncmp(name, COLL_PREFIX, strlen(COLL_PREFIX)) == 0) {
        const char *args = name + strlen(COLL_PREFIX);
        int end = 0; /* digits and colons only: no sign, space or 0x slips through sscanf */
        if (strspn(args, "0123456789:") != strlen(args) ||
            sscanf(args, "%llu:%llu:%llu%n", &us, &ranks, &group, &end) != 3 || args[end] || us > COLL_MAX_US ||
            ranks < SIM_COLL_MIN_RANKS || ranks > SIM_COLL_MAX_RANKS || group >= SIM_COLL_GROUPS)
            return CUDA_ERROR_INVALID_VALUE;
        f->coll = 1;
        f->ranks = (unsigned)ranks;
        f->group = (unsigned)group;
        f->dur_ns = us * 1000ULL;
    } else if (sscanf(name, "sleep_us:%llu", &us) == 1 || sscanf(name, "ncclKernel_sleep_us:%llu", &us) == 1) {
        f->dur_ns = us * 1000ULL; /* the second: a tenant's kernel that borrowed NCCL's name */
    } else if (strcmp(name, "spin_flag") == 0) {
        f->spin_flag = 1;
    } else if (sscanf(name, "wave_us:%llu", &us) == 1) {
        f->dur_ns = us * 1000ULL;
        f->per_wave = 1;
    }
    return CUDA_SUCCESS;
}

static CUresult get_function(CUfunction *hfunc, const void *hmod, const char *name, int library)
{
    struct sim_func parsed = { .in_use = 1 };
    if (!hfunc || !name || strlen(name) >= NAME_LEN || parse_func(&parsed, name) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_lock);
    int m = module_index(hmod, library);
    if (m >= 0) {
        /* Every name exists: a module's image is not parsed. Same name, same handle. */
        int free_i = -1;
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        for (int i = 0; i < MAX_FUNCS; i++) {
            if (g_funcs[i].in_use && g_funcs[i].module == m && strcmp(g_funcs[i].name, name) == 0) {
                free_i = i;
                break;
            }
            if (!g_funcs[i].in_use && free_i < 0)
                free_i = i;
        }
        if (free_i >= 0) {
            if (!g_funcs[free_i].in_use) {
                g_funcs[free_i] = parsed;
                g_funcs[free_i].module = m;
                strcpy(g_funcs[free_i].name, name);
            }
            *hfunc = (CUfunction)(void *)&g_funcs[free_i];
            rc = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

SIM_API cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    return get_function(hfunc, hmod, name, 0);
}

/* Module m and its functions go. g_lock held. */
static void unload_locked(int m)
{
    g_modules[m].in_use = 0;
    for (int i = 0; i < MAX_FUNCS; i++)
        if (g_funcs[i].in_use && g_funcs[i].module == m)
            g_funcs[i].in_use = 0;
}

static CUresult module_unload(const void *hmod, int library)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_lock);
    int m = module_index(hmod, library);
    if (m >= 0)
        unload_locked(m);
    pthread_mutex_unlock(&g_lock);
    return m >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

void sim_modules_ctx_gone(int ctx)
{
    pthread_mutex_lock(&g_lock);
    for (int m = 0; m < MAX_MODULES; m++)
        if (g_modules[m].in_use && !g_modules[m].library && g_modules[m].ctx == ctx)
            unload_locked(m);
    pthread_mutex_unlock(&g_lock);
}

SIM_API cuModuleUnload(CUmodule hmod)
{
    return module_unload(hmod, 0);
}

/* A library's kernel launches cast to a CUfunction, as the driver's does;
 * it is named by cuKernelGetName only (the driver does not document that
 * cuFuncGetName takes one, so the sim refuses it). Unlike the driver's, a
 * library needs a current context. */
SIM_API cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions, void **jitOptionsValues,
                          unsigned int numJitOptions, CUlibraryOption *libraryOptions, void **libraryOptionValues,
                          unsigned int numLibraryOptions)
{
    (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
    (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
    return module_load((void **)library, code, 1);
}

SIM_API cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    return get_function((CUfunction *)(void *)pKernel, library, name, 1);
}

SIM_API cuLibraryUnload(CUlibrary library)
{
    return module_unload(library, 1);
}

static CUresult func_name(const char **name, const void *h, int library)
{
    if (!name || !h)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_lock);
    int fi = HANDLE_INDEX(g_funcs, MAX_FUNCS, h);
    if (fi >= 0 && g_modules[g_funcs[fi].module].library != library)
        fi = -1;
    if (fi >= 0)
        *name = g_funcs[fi].name; /* lives in the table until the module is unloaded */
    pthread_mutex_unlock(&g_lock);
    return fi >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API cuFuncGetName(const char **name, CUfunction hfunc)
{
    return func_name(name, hfunc, 0);
}

SIM_API cuKernelGetName(const char **name, CUkernel hfunc)
{
    return func_name(name, hfunc, 1);
}

/* ---- launches ---- */

/* A spin_flag kernel's launch: the flag its parameters point at must lie in
 * host memory the device reaches (elsewhere the device would fault: the sim
 * refuses the launch instead). Not modelled in a capture. */
static CUresult spin_on_flag(CUstream s, void **params)
{
    const CUdeviceptr *arg = params ? (const CUdeviceptr *)params[0] : NULL;
    const volatile uint32_t *flag = arg ? (const volatile uint32_t *)(uintptr_t)*arg : NULL;
    if (!flag || ((uintptr_t)flag & 3) || !sim_host_reachable((const void *)(uintptr_t)flag, sizeof *flag))
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_capture_status(s) != 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    return queue_host_wait((struct host_wait){ .addr = flag, .value = 1, .cmp = 0 });
}

static CUresult check_launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                             unsigned int by, unsigned int bz, CUstream s, void **params)
{
    CUresult rc = need_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_lock);
    int fi = HANDLE_INDEX(g_funcs, MAX_FUNCS, f);
    struct sim_func fn = fi >= 0 ? g_funcs[fi] : (struct sim_func){ 0 };
    pthread_mutex_unlock(&g_lock);
    if (fi < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    uint64_t dur = fn.dur_ns;
    if (!sim_stream_valid(s))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (fn.spin_flag)
        return spin_on_flag(s, params);
    if (fn.per_wave)
        dur *= ((uint64_t)gx * gy * gz + SIM_SMS - 1) / SIM_SMS;
    struct sim_graph_part coll = { .ranks = fn.ranks, .group = fn.group };
    if (sim_capture_launch(s, dur, fn.coll ? &coll : NULL, &rc))
        return rc;
    return submit(dur, fn.coll ? &fn : NULL);
}

SIM_API cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    return check_launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, kernelParams);
}

SIM_API cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                            unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                            unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    return check_launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, kernelParams);
}

static CUresult launch_ex(const CUlaunchConfig *cfg, CUfunction f, void **params)
{
    if (!cfg)
        return CUDA_ERROR_INVALID_VALUE;
    return check_launch(f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ,
                        cfg->hStream, params);
}

SIM_API cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    return launch_ex(config, f, kernelParams);
}

SIM_API cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    return launch_ex(config, f, kernelParams);
}

SIM_API cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                  unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                  unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)
{
    return check_launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, kernelParams);
}

SIM_API cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                       unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                       unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                       void **kernelParams)
{
    return check_launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, kernelParams);
}

/* All the work of a captured graph's parts. */
static uint64_t body_ns(const struct sim_graph_body *b)
{
    uint64_t ns = 0;
    for (unsigned i = 0; i < b->n && i < SIM_GRAPH_PARTS; i++)
        ns += b->part[i].ns + b->part[i].coll_ns;
    return ns;
}

/* Queues a captured graph's parts in order, each collective as a launched
 * one: it waits for its peers. */
static CUresult run_body(const struct sim_graph_body *b)
{
    CUresult rc = CUDA_SUCCESS;
    for (unsigned i = 0; i < b->n && i < SIM_GRAPH_PARTS && rc == CUDA_SUCCESS; i++) {
        const struct sim_graph_part *p = &b->part[i];
        rc = submit(p->ns, NULL);
        struct sim_func coll = { .coll = 1, .ranks = p->ranks, .group = p->group };
        if (rc == CUDA_SUCCESS && p->ranks)
            rc = submit(p->coll_ns, &coll);
    }
    return rc;
}

static CUresult graph_launch(CUgraphExec g, CUstream s)
{
    CUresult rc = need_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The sim has no graph-building API: gpusliceSimGraphCreate makes graphs
     * that take time; any other non-NULL executable graph runs in no time. */
    if (!g || !sim_stream_valid(s))
        return CUDA_ERROR_INVALID_HANDLE;
    if (sim_graph_mem_launch(g, &rc)) /* a graph with memory nodes (no kernels) */
        return rc;
    struct sim_graph gr = { 0 };
    uint64_t kernel_ns = 0;
    pthread_mutex_lock(&g_lock);
    int gi = HANDLE_INDEX(g_graphs, MAX_GRAPHS, g);
    if (gi >= 0)
        gr = g_graphs[gi];
    if (gi >= 0 && gr.func >= 0 && g_funcs[gr.func].in_use)
        kernel_ns = g_funcs[gr.func].dur_ns;
    pthread_mutex_unlock(&g_lock);
    uint64_t gaps = gr.count > 1 ? (uint64_t)(gr.count - 1) * gr.gap_ns : 0;
    uint64_t ns = gr.func < 0 ? body_ns(&gr.body) : kernel_ns * gr.count + gaps;
    if (sim_capture_launch(s, ns, NULL, &rc)) /* a graph captured into another: its time, no waits */
        return rc;
    if (gr.func < 0)
        return run_body(&gr.body);
    if (!gaps)
        return submit(ns, NULL);
    struct sim_submission sub = { .ns = kernel_ns, .graph = &gr };
    return submit_launch(&sub);
}

/* An executable graph of count launches of f (one wave each), gap_ns of
 * idle device time between consecutive ones. */
static CUresult graph_create(CUgraphExec *out, CUfunction f, unsigned int count, uint64_t gap_ns)
{
    if (!out || !count || (gap_ns && count - 1 > SIM_GAP_QUEUE))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = need_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_lock);
    int fi = HANDLE_INDEX(g_funcs, MAX_FUNCS, f);
    if (fi >= 0) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        for (int i = 0; i < MAX_GRAPHS; i++)
            if (!g_graphs[i].in_use) {
                g_graphs[i] = (struct sim_graph){ .in_use = 1, .func = fi, .count = count, .gap_ns = gap_ns };
                *out = (CUgraphExec)(void *)&g_graphs[i];
                rc = CUDA_SUCCESS;
                break;
            }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* Sim only: an executable graph of count launches of f. */
SIM_EXPORT CUresult gpusliceSimGraphCreate(CUgraphExec *out, CUfunction f, unsigned int count);
SIM_EXPORT CUresult gpusliceSimGraphCreate(CUgraphExec *out, CUfunction f, unsigned int count)
{
    return graph_create(out, f, count, 0);
}

/* Sim only: the same with gap_us of idle device time between consecutive
 * launches (a graph whose nodes wait for each other; at most SIM_GAP_QUEUE
 * gaps). */
SIM_EXPORT CUresult gpusliceSimGraphCreateGaps(CUgraphExec *out, CUfunction f, unsigned int count,
                                               unsigned long long gap_us);
SIM_EXPORT CUresult gpusliceSimGraphCreateGaps(CUgraphExec *out, CUfunction f, unsigned int count,
                                               unsigned long long gap_us)
{
    if (gap_us > 1000000ULL)
        return CUDA_ERROR_INVALID_VALUE; /* at most 1 s a gap */
    return graph_create(out, f, count, gap_us * 1000ULL);
}

CUresult sim_graph_of_body(CUgraphExec *out, const struct sim_graph_body *body)
{
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < MAX_GRAPHS; i++)
        if (!g_graphs[i].in_use) {
            g_graphs[i] = (struct sim_graph){ .in_use = 1, .func = -1, .body = *body };
            *out = (CUgraphExec)(void *)&g_graphs[i];
            rc = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

SIM_API cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream);
}

SIM_API cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream);
}

/* A host function queued on dev: it runs on a thread of its own once the
 * work before it (up to `before`) is done, as on a driver's thread, and what
 * is queued after it waits for it through a host wait on `done`. So a host
 * function that waits for its own launching thread holds that thread's
 * synchronisation until it returns, as on a GPU. */
struct host_call {
    CUhostFn fn;
    void *data;
    int dev;
    uint64_t before;
    volatile uint32_t done;
};

static void *host_call_run(void *arg)
{
    struct host_call *h = arg;
    work_wait(h->dev, h->before, NULL);
    h->fn(h->data);
    __atomic_store_n(&h->done, 1, __ATOMIC_RELEASE); /* the last touch: the wait that owns h may free it now */
    return NULL;
}

static CUresult host_func(CUstream s, CUhostFn fn, void *data)
{
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = need_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!sim_stream_valid(s))
        return CUDA_ERROR_INVALID_HANDLE;
    if (sim_capture_launch(s, 0, NULL, &rc))
        return rc; /* a host node of the graph: the sim's graphs do not run it */
    struct host_call *h = calloc(1, sizeof *h);
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *h = (struct host_call){ .fn = fn, .data = data };
    int done = 0;
    rc = work_mark(&h->dev, &h->before, &done, 0);
    if (rc == CUDA_SUCCESS && h->dev < 0)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS)
        rc = queue_host_wait((struct host_wait){ .addr = &h->done, .value = 1, .cmp = 0, .owned = h });
    if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_OUT_OF_MEMORY) {
        free(h);
        return rc;
    }
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) { /* the table is full: run it here once the work before it is done,
                                           * late rather than refused */
        rc = sim_drain_current();
        if (rc == CUDA_SUCCESS)
            fn(data);
        free(h);
        return rc;
    }
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, host_call_run, h) != 0)
        host_call_run(h); /* no thread to be had: in the caller, late rather than never */
    pthread_attr_destroy(&attr);
    return CUDA_SUCCESS;
}

SIM_API cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    return host_func(hStream, fn, userData);
}

SIM_API cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    return host_func(hStream, fn, userData);
}

/* A later CUDA 13's (13.1 here: the version is a guess), with a host-task sync mode, which the sim's host thread
 * ignores (it sleeps whichever is asked). */
SIM_API cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn, void *userData, unsigned int syncMode)
{
    (void)syncMode;
    return host_func(hStream, fn, userData);
}

SIM_API cuLaunchHostFunc_v2_ptsz(CUstream hStream, CUhostFn fn, void *userData, unsigned int syncMode)
{
    (void)syncMode;
    return host_func(hStream, fn, userData);
}

/* A variant newer than the interposer, with v2's ABI: a name no driver has,
 * handed out for "CUDA 13.9" (sim_proc_address.c) and exported. */
SIM_API cuLaunchHostFunc_v99(CUstream hStream, CUhostFn fn, void *userData, unsigned int syncMode)
{
    (void)syncMode;
    return host_func(hStream, fn, userData);
}
