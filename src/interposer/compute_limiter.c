/*
 * The launch gate: duty-cycle windows per thread and device, charged to the
 * container's token account in the region (src/core/limiter.c has the maths;
 * docs/compute.md the why).
 *
 * Fast path (inside an open window): a clock read, two compares, a counter;
 * at most every MARK_EVERY_NS of launching or of estimated GPU work an event
 * record that marks how far the GPU got. No system call. After a CPU gap of
 * GS_LIM_GAP_NS or more, a probe (a query of each stream used) asks whether
 * the thread's work drained meanwhile: if so the busy interval ended at the
 * last marker (or last launch), is charged, and a new one starts -- the gap
 * is not GPU time. While other containers of the device ledger are busy
 * (gs_lim_count_busy) the probe looks at gaps from GS_LIM_FINE_GAP_NS, unless
 * the device is busy well under our cap (gs_lim_bound_holds); so do a CUDA
 * graph's launch and the launch after it, always, and every launch while c
 * is not learnt (gs_lim_learning). Slow path (window
 * over): drain what the window launched, charge its last busy interval, wait
 * while the container is in debt, open the next.
 */
#define _GNU_SOURCE
#include "compute_limiter.h"
#include "compute_capture.h"
#include "compute_clock.h"
#include "compute_collective.h"
#include "compute_cost.h"
#include "compute_drain.h"
#include "compute_ledger.h"
#include "compute_outer.h"
#include "fork_hooks.h"
#include "log.h"
#include "real_driver.h"
#include "runtime.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define MAX_STREAMS 4
#define MARK_EVERY_NS 500000ULL     /* a progress marker every 0.5 ms of launching or of GPU work */
#define MAX_SLEEP_NS 10000000ULL    /* re-check the account at least every 10 ms */
#define TURN_GRACE_NS 2000000ULL    /* a window holds the device ledger's turn 2 ms past its end at least */
#define DRAIN_HOLD_NS 1000000000ULL /* ... and while it drains, up to 1 s */
/* A rank whose slot of the turn frame ended this recently follows a peer
 * rank that began the step before it ended (follows_peer): well above the
 * skew between ranks' launches after a collective, well under a step */
#define EDGE_FOLLOW_NS GS_LEDGER_SLOT_GRACE_NS
/* A thread whose last busy intervals all ended at its own wait for its work
 * (a torch step's .item(), a training step's synchronize) is trusted to
 * end the next one there too: its launches then get no marker each, and the
 * one recorded at the wait measures the interval whole. On an H200 a
 * CUDA-graph inference step capped at 30 took four event records, 114-120
 * us busy against 108 alone (docs/compute.md, "Measuring costs GPU time").
 * One interval that ends elsewhere (a gap probe, a window's end) is priced
 * from the GPU time per launch, and marking resumes. */
#define SYNC_ENDS_TRUSTED 3

int gs_compute_state;

/* A thread's state on one device. Another thread's destroy of a stream or
 * context (gs_compute_forget) writes the streams, overflow and gen, and reads
 * limited, ctx and the streams, all under the owner's tstate lock: the owner
 * writes those under it too, and reads overflow only under it, so that
 * what it hands the driver from them is never a destroyed handle. */
struct tdev {
    unsigned gen;                                  /* gs_rt_fork_generation + 1 when set up; 0: never, or ctx gone */
    int8_t limited;                                /* -1 unknown, 0 no, 1 yes */
    uint8_t have_start, have_mark, overflow, turn; /* turn: the window holds the ledger's turn */
    uint8_t draining;                              /* the window extended the turn to drain (gs_ledger_extend) */
    uint8_t graph_last;                            /* the last launch was a CUDA graph's */
    uint8_t graph_marks;                           /* launches after the interval's last graph still marked each */
    uint8_t sync_mark; /* the last marker came at the tenant's wait, after its last launch */
    uint8_t sync_ends; /* intervals in a row that ended there, up to SYNC_ENDS_TRUSTED */
    int nstreams;
    uint32_t in_interval;    /* launches in the current busy interval */
    uint32_t at_mark;        /* ... up to and including the one its last marker follows */
    uint32_t since_mark;     /* launches since the last marker */
    uint64_t per_launch_ns;  /* GPU time per launch the markers measured (EMA); 0: unknown */
    uint64_t last_launch_ns; /* clock at the last launch of the window */
    uint64_t mark_ns;        /* clock at the last marker */
    uint64_t slot_end_ns;    /* the end of the turn-frame slot the last window took the turn in; 0: none */
    uint64_t touched_ns;     /* running free: when it last marked itself active in the ledger */
    struct gs_lim_window w;
    CUstream streams[MAX_STREAMS];
    CUevent drain[MAX_STREAMS];
    CUevent ev_start, ev_mark;
    CUcontext ctx; /* the context its events were made in */
    /* another thread's destroy of ctx ended the open window unclosed: when
     * that destroy returned (LOST_PENDING while it runs); 0: none */
    uint64_t lost_ns;
};
#define LOST_PENDING UINT64_MAX
/* Each thread's devices, on the heap behind one pointer in the initial-exec
 * TLS model: a library's TLS in the default (dynamic) model costs a
 * __tls_get_addr call per access, several per launch on the gate's fast
 * path. Small, so that `gpuslice run`'s dlopen of the library still finds
 * room in the static TLS block. Every thread's is listed (states, under
 * states_lock), so that a destroy in one thread reaches them all. */
struct tstate {
    pthread_mutex_t lock; /* see struct tdev */
    /* the owner is ending windows with their events (end_windows): a
     * destroy of a context waits for it to finish (gs_compute_forget) */
    int ending;
    pthread_cond_t ended;
    struct gs_drainer *drainer; /* the owner's: its windows' drains (compute_drain.h) */
    struct tstate *prev, *next;
    struct tdev dev[GS_REGION_MAX_DEVICES];
};
static __thread struct tstate *t_state __attribute__((tls_model("initial-exec")));
static pthread_mutex_t states_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tstate *states;
static __thread uint32_t t_gate_tick __attribute__((tls_model("initial-exec")));

/* A thread's state ends with the thread (exit_key), and the process's
 * exiting thread's with the process (an atexit handler, which runs before
 * the driver's library is torn down). */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void close_window(struct tdev *t, struct gs_region *r, int d, uint64_t close_ns);
static uint64_t charge_window(struct tdev *t, struct gs_region *r, int d, struct gs_ledger *l, int slot, uint64_t end,
                              int measured);

/* Whether t was set up in this process and its context still lives. */
static int tdev_current(const struct tdev *t)
{
    return __atomic_load_n(&t->gen, __ATOMIC_RELAXED) == __atomic_load_n(&gs_rt_fork_generation, __ATOMIC_RELAXED) + 1;
}

/* Charges t's window that another thread's destroy (or release, or reset)
 * of its context ended (gs_compute_forget) as busy from its start until that
 * call returned, unmeasured: its events went with the context, and a
 * destroy waits for its work. Dropped with the state, the window's work ran
 * uncharged (a thread's 40 ms of queued work under a cap of 30 on the
 * simulated driver). Under ts's lock throughout: at exit another thread may
 * charge it (process_exit), and the owner's set-up afresh publishes under
 * that lock, so neither sees the window half charged. */
static void charge_lost_window(struct tstate *ts, struct tdev *t, struct gs_region *r, int d)
{
    uint64_t charge = 0;
    pthread_mutex_lock(&ts->lock);
    uint64_t lost = t->lost_ns;
    t->lost_ns = 0;
    if (lost && t->w.open && t->limited == 1 && !tdev_current(t) && r) {
        uint64_t at = lost == LOST_PENDING ? gs_compute_now() : lost;
        struct gs_lim_close_facts f = { .start_ns = t->w.start_ns,
                                        .planned_end_ns = t->w.end_ns,
                                        .close_ns = at,
                                        .drained_ns = at,
                                        .undrained = 1,
                                        .last_launch_ns = t->last_launch_ns,
                                        .mark_ns = -1 };
        int measured;
        uint64_t end = gs_lim_window_end(&f, &measured);
        int slot;
        struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
        charge = charge_window(t, r, d, l, slot, end, measured);
    }
    pthread_mutex_unlock(&ts->lock);
    if (charge) /* logged unlocked: a full stderr must not hold the state's lock */
        gs_log(GS_LOG_INFO,
               "another thread destroyed or released the context of an open window: charged as busy until then "
               "(%llu us)",
               (unsigned long long)(charge / 1000));
}

/* Ends the open windows of ts (those whose events are ctx's; NULL: all) as
 * a window's end does (drained, charged) and destroys their events. Left
 * open, a thread's or a process's last window was never charged: a thread
 * per kernel ran at 0.99 of the device under cap 10 on the simulated
 * driver, and each thread left six events behind. A forked child's copy of
 * a parent thread's state (another gen) holds the parent's events and
 * windows, and a state whose context is gone holds dead events: only
 * forgotten. */
static void end_windows(struct tstate *ts, CUcontext ctx)
{
    struct gs_region *r = gs_rt_region();
    gs_pfn_cuEventDestroy_v2 destroy = GS_REAL_CU(cuEventDestroy_v2);
    for (int d = 0; d < GS_REGION_MAX_DEVICES; d++) {
        struct tdev *t = &ts->dev[d];
        /* checked and marked under the lock that a destroy of the context
         * takes first: it then waits until the events are done with */
        pthread_mutex_lock(&ts->lock);
        int mine = !ctx || (t->limited == 1 && t->ctx == ctx);
        int live = mine && t->limited == 1 && tdev_current(t);
        if (live)
            ts->ending = 1;
        pthread_mutex_unlock(&ts->lock);
        if (mine && !live) {
            charge_lost_window(ts, t, r, d);
            t->w.open = 0;
        }
        if (!live)
            continue;
        if (t->w.open && r && gs_compute_sync_enter()) {
            close_window(t, r, d, gs_compute_now());
            gs_compute_sync_leave();
        }
        int slot;
        struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
        if (t->w.open && t->turn && l) /* a capture kept it open: the others must not see it active */
            gs_ledger_close_window(l, slot, gs_compute_now(), t->draining);
        t->draining = 0;
        t->w.open = 0;
        CUevent events[] = { t->drain[0], t->drain[1], t->drain[2], t->drain[3], t->ev_start, t->ev_mark };
        _Static_assert(MAX_STREAMS == 4, "every drain event is destroyed");
        for (size_t i = 0; destroy && i < sizeof events / sizeof events[0]; i++)
            if (events[i])
                destroy(events[i]);
        pthread_mutex_lock(&ts->lock);
        t->limited = -1; /* a later launch sets it up afresh */
        ts->ending = 0;
        pthread_cond_broadcast(&ts->ended);
        pthread_mutex_unlock(&ts->lock);
    }
}

static void thread_exit(void *arg)
{
    struct tstate *ts = arg;
    end_windows(ts, NULL);
    pthread_mutex_lock(&states_lock);
    if (ts->prev)
        ts->prev->next = ts->next;
    else
        states = ts->next;
    if (ts->next)
        ts->next->prev = ts->prev;
    pthread_mutex_unlock(&states_lock);
    t_state = NULL;
    gs_drainer_release(ts->drainer);
    pthread_cond_destroy(&ts->ended);
    pthread_mutex_destroy(&ts->lock);
    free(ts);
}

static void process_exit(void)
{
    if (t_state)
        end_windows(t_state, NULL);
    /* other threads' windows that a destroy ended: an exit runs no other
     * thread's destructor (not waited for: a destroy under way in another
     * thread holds the list) */
    struct gs_region *r = gs_rt_region();
    if (pthread_mutex_trylock(&states_lock) != 0)
        return;
    for (struct tstate *ts = states; ts; ts = ts->next)
        for (int d = 0; ts != t_state && d < GS_REGION_MAX_DEVICES; d++)
            charge_lost_window(ts, &ts->dev[d], r, d);
    pthread_mutex_unlock(&states_lock);
}

static void make_exit_key(void)
{
    (void)pthread_key_create(&exit_key, thread_exit);
    (void)atexit(process_exit);
}

static void decide(void)
{
    int on = 0;
    if (gs_mode() == GS_MODE_ENFORCE && gs_rt.cfg.core_policy != GS_CORE_POLICY_DISABLE) {
        if (gs_rt.cfg.compute_mode == GS_COMPUTE_SHARE)
            on = 1;
        for (int i = 0; i < GS_MAX_DEVICES; i++)
            if (gs_rt.cfg.sm_limit[i] > 0 && gs_rt.cfg.sm_limit[i] < 100)
                on = 1;
    }
    __atomic_store_n(&gs_compute_state, on ? GS_COMPUTE_ON : GS_COMPUTE_OFF, __ATOMIC_RELAXED);
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };
    nanosleep(&ts, NULL);
}

static CUevent make_event(unsigned flags)
{
    gs_pfn_cuEventCreate create = GS_REAL_CU(cuEventCreate);
    CUevent e = NULL;
    if (!create || create(&e, flags) != CUDA_SUCCESS)
        return NULL;
    return e;
}

/* t becomes n, under the lock that a destroy in another thread takes. The
 * events of what t was are not destroyed: t's context is gone, or t is a
 * forked child's copy of the parent's. */
static void publish(struct tdev *t, const struct tdev *n)
{
    pthread_mutex_lock(&t_state->lock);
    *t = *n;
    pthread_mutex_unlock(&t_state->lock);
}

/* Whether the process queued work that waits for its host
 * (gs_compute_note_host_waits). */
static int host_waits;

void gs_compute_note_host_waits(void)
{
    if (!__atomic_load_n(&host_waits, __ATOMIC_RELAXED))
        __atomic_store_n(&host_waits, 1, __ATOMIC_RELAXED);
}

/* A device that reaches pageable host memory (HMM, ATS) lets a kernel spin
 * on a flag anywhere in the host's memory, which no API call shows: the
 * process drains with the bound there. */
static void note_pageable_access(CUdevice ord)
{
    gs_pfn_cuDeviceGetAttribute get = GS_REAL_CU(cuDeviceGetAttribute);
    int reaches = 0;
    if (__atomic_load_n(&host_waits, __ATOMIC_RELAXED) || !get ||
        get(&reaches, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, ord) != CUDA_SUCCESS || !reaches)
        return;
    gs_log(GS_LOG_INFO, "device %d reaches pageable host memory: this process's drains wait with a bound", ord);
    gs_compute_note_host_waits();
}

/* Sets up this thread's view of device d (ordinal ord). */
static void setup(struct tdev *t, struct gs_region *r, int d, CUdevice ord)
{
    struct tdev n = { .gen = __atomic_load_n(&gs_rt_fork_generation, __ATOMIC_RELAXED) + 1, .limited = 0 };
    unsigned limit = ord >= 0 && ord < GS_MAX_DEVICES ? gs_rt.cfg.sm_limit[ord] : 0;
    int share = gs_rt.cfg.compute_mode == GS_COMPUTE_SHARE;
    if (!share && (limit == 0 || limit >= 100)) {
        publish(t, &n);
        return;
    }
    note_pageable_access(ord);
    enum gs_lim_mode mode = share ? GS_LIM_SHARE : GS_LIM_CAP;
    struct gs_lim_account *a = &r->dev[d].lim;
    uint64_t since = gs_compute_now();
    while (gs_lim_account_init(a, mode, limit, gs_rt.cfg.share_weight, gs_compute_now()) != 0) {
        if (gs_compute_now() - since > GS_LIM_CLAIM_TIMEOUT_NS) {
            gs_log(GS_LOG_INFO,
                   "the compute account of device %d was left half set up (its process died); "
                   "setting it up again",
                   ord);
            gs_lim_account_take_over(a, mode, limit, gs_rt.cfg.share_weight, gs_compute_now());
        } else {
            sleep_ns(100000);
        }
    }
    for (int i = 0; i < MAX_STREAMS; i++)
        n.drain[i] = make_event(0x2); /* CU_EVENT_DISABLE_TIMING */
    n.ev_start = make_event(0);
    n.ev_mark = make_event(0);
    gs_pfn_cuCtxGetCurrent current = GS_REAL_CU(cuCtxGetCurrent);
    if (!current || current(&n.ctx) != CUDA_SUCCESS)
        n.ctx = NULL;
    n.limited = 1;
    publish(t, &n);
    gs_compute_ledger_join(r, d);
    gs_log(GS_LOG_DEBUG, "compute limiter on device %d: %s %u%%, weight %u", ord, share ? "share" : "cap", limit,
           gs_rt.cfg.share_weight);
}

static void count_charge(struct gs_region *r, uint64_t charge, int window)
{
    int s = gs_rt_slot();
    if (s >= 0) {
        __atomic_add_fetch(&r->proc[s].lim.charged_ns, charge, __ATOMIC_RELAXED);
        __atomic_add_fetch(&r->proc[s].lim.windows, (uint64_t)window, __ATOMIC_RELAXED);
    }
}

/* Ends t's window, its last busy interval ending at end (measured: that end
 * was measured): hands on the device ledger's turn it held (l, slot) and
 * charges the container. The charge. */
static uint64_t charge_window(struct tdev *t, struct gs_region *r, int d, struct gs_ledger *l, int slot, uint64_t end,
                              int measured)
{
    if (l && t->turn)
        gs_ledger_close_window(l, slot, gs_compute_now(), t->draining); /* the next container's turn */
    t->turn = t->draining = 0;
    uint64_t charge = gs_lim_close(&t->w, &r->dev[d].lim, end, measured);
    count_charge(r, charge, 1);
    return charge;
}

/* GPU time from the interval's start event to its last marker, or -1; each
 * reading teaches the GPU time per launch that prices launches made after
 * the marker (gs_lim_window_end). */
static int64_t read_mark(struct tdev *t, gs_pfn_cuEventElapsedTime elapsed)
{
    float ms = 0;
    if (!t->have_start || !t->have_mark || !elapsed || elapsed(&ms, t->ev_start, t->ev_mark) != CUDA_SUCCESS)
        return -1;
    int64_t mark = (int64_t)((double)ms * 1e6);
    if (mark < 0)
        mark = 0;
    if (t->at_mark) {
        uint64_t per = (uint64_t)mark / t->at_mark;
        t->per_launch_ns = t->per_launch_ns ? (t->per_launch_ns + per) / 2 : per;
    }
    return mark;
}

/* The facts of the current busy interval on device d for gs_lim_window_end.
 * Sliced: a share container beside active members of the device ledger,
 * where the charge decides who wants more; a capped one keeps the launch
 * bound (charged more, it only gets less than its cap). */
static struct gs_lim_close_facts interval_facts(struct tdev *t, const struct gs_region *r, int d,
                                                gs_pfn_cuEventElapsedTime elapsed)
{
    int64_t mark = read_mark(t, elapsed);
    return (struct gs_lim_close_facts){ .start_ns = t->w.busy_from,
                                        .last_launch_ns = t->last_launch_ns,
                                        .mark_ns = mark,
                                        .after_mark = mark >= 0 ? t->since_mark : t->in_interval,
                                        .per_launch_ns = t->per_launch_ns,
                                        .sliced = r->dev[d].lim.mode == GS_LIM_SHARE && gs_compute_fine_probe(d) };
}

/* A busy interval of the window that ends at end: less the time its streams
 * may have waited for a collective's peers (gs_compute_collective_spin). */
static uint64_t less_collective_spin(const struct tdev *t, int d, uint64_t end)
{
    if (!t->have_start || end <= t->w.busy_from)
        return end;
    return end - gs_compute_collective_spin(d, t->ev_start, end - t->w.busy_from);
}

/* The current busy interval ends: did it end at the tenant's own wait, with
 * nothing launched after the marker there? */
static void note_interval_end(struct tdev *t)
{
    int at_sync = t->sync_mark && t->have_mark && t->since_mark == 0;
    t->sync_ends = at_sync ? (uint8_t)(t->sync_ends < SYNC_ENDS_TRUSTED ? t->sync_ends + 1 : SYNC_ENDS_TRUSTED) : 0;
    t->sync_mark = 0;
}

/* Records the interval's progress marker on s, behind the work queued there
 * so far: the launches up to here are then measured, not priced. Its host
 * time counts as a marker's, and as also's where that is another kind. */
static int record_mark(struct tdev *t, CUstream s, enum gs_cost also)
{
    gs_pfn_cuEventRecord rec = GS_REAL_CU(cuEventRecord);
    uint64_t m0 = gs_compute_now();
    int marked = t->ev_mark && rec && rec(t->ev_mark, s) == CUDA_SUCCESS;
    uint64_t took = gs_compute_now() - m0;
    gs_cost_add(GS_COST_MARK, took);
    if (also != GS_COST_MARK)
        gs_cost_add(also, took);
    if (marked) {
        t->have_mark = 1;
        t->at_mark = t->in_interval;
        t->since_mark = 0;
    }
    return marked;
}

/* A new busy interval starts at the launch about to be made. */
static void interval_begin(struct tdev *t, CUstream s, uint64_t now, gs_pfn_cuEventRecord rec)
{
    t->have_start = t->ev_start && rec && rec(t->ev_start, s) == CUDA_SUCCESS;
    t->have_mark = 0;
    t->mark_ns = now;
    t->in_interval = t->at_mark = t->since_mark = 0;
    t->graph_marks = 0;
}

/* Whether the interval's work on every stream it used has drained; if so
 * the next interval starts with none. Never while the streams are unknown
 * (overflow: too many, or one destroyed). */
static int streams_drained(struct tdev *t, gs_pfn_cuStreamQuery query)
{
    pthread_mutex_lock(&t_state->lock);
    int drained = !t->overflow;
    for (int i = 0; i < t->nstreams && drained; i++)
        drained = query(t->streams[i]) == CUDA_SUCCESS;
    if (drained)
        t->nstreams = 0;
    pthread_mutex_unlock(&t_state->lock);
    return drained;
}

/* A launch on s after a CPU gap: if the thread's work drained during the
 * gap, its busy interval ended when the last marker completed (or with the
 * last launch, if later), and a new one starts now. learning: the probe
 * came only because c is not learnt (gs_lim_learning); the gap it found
 * counts as occupancy, not charged. */
static void probe_gap(struct tdev *t, struct gs_region *r, int d, CUstream s, uint64_t now, int learning)
{
    gs_pfn_cuEventRecord rec = GS_REAL_CU(cuEventRecord);
    gs_pfn_cuStreamQuery query = GS_REAL_CU(cuStreamQuery);
    gs_pfn_cuEventElapsedTime elapsed = GS_REAL_CU(cuEventElapsedTime);
    if (!t->have_start || !rec || !query || !elapsed || !gs_compute_sync_enter())
        return;
    /* timed from here, not from now: an outer run (2-4 ms) or a window's
     * extension may have come between, and was counted as the probe's */
    uint64_t from = gs_compute_now();
    /* a stream query, not an event recorded and queried: a decoder probes
     * after nearly every kernel, and the record is most of the probe's cost */
    int drained = streams_drained(t, query);
    uint64_t lap = from;
    gs_cost_lap(&lap, GS_COST_PROBE_QUERY);
    if (drained) {
        uint64_t closing = lap;
        struct gs_lim_close_facts f = interval_facts(t, r, d, elapsed);
        gs_cost_lap(&lap, GS_COST_PROBE_READ);
        f.planned_end_ns = f.close_ns = now;
        int measured;
        uint64_t end = gs_lim_window_end(&f, &measured);
        if (!measured)
            end = now; /* nothing measured: the gap is charged (never less than the truth) */
        end = less_collective_spin(t, d, end);
        count_charge(r, gs_lim_busy_interval(&t->w, &r->dev[d].lim, end, now, measured ? t->in_interval : 0), 0);
        if (learning)
            gs_lim_uncharged_gap(&r->dev[d].lim, end, now);
        note_interval_end(t);
        uint64_t started = gs_compute_now();
        interval_begin(t, s, now, rec);
        gs_cost_lap(&started, GS_COST_PROBE_START);
        gs_cost_lap(&closing, GS_COST_PROBE_DRAINED);
    }
    gs_compute_sync_leave();
    gs_cost_add(GS_COST_PROBE, gs_compute_now() - from);
}

/* Waits for the window's recorded events (with whole_ctx, the context's
 * work first) on the thread's drainer, for at most DRAIN_HOLD_NS: 1 where it
 * gave up (*drained is then the clock at the bound). A given-up drainer
 * keeps the events; the window gets new ones. */
static int drain_bounded(struct tdev *t, const int *recorded, int n, const CUevent *events, int ne, int whole_ctx,
                         uint64_t close_ns, uint64_t *drained)
{
    if (gs_drain(&t_state->drainer, t->ctx, events, ne, whole_ctx, DRAIN_HOLD_NS, drained) != GS_DRAIN_GAVE_UP)
        return 0;
    /* the work may wait for its host, which acts only once this launch
     * returns */
    *drained = gs_compute_now();
    gs_log(GS_LOG_INFO, "a window's work was not done %llu ms after it closed: charged as busy until now",
           (unsigned long long)((*drained - close_ns) / 1000000));
    pthread_mutex_lock(&t_state->lock);
    for (int i = 0; i < n; i++)
        if (recorded[i])
            t->drain[i] = make_event(0x2); /* CU_EVENT_DISABLE_TIMING */
    pthread_mutex_unlock(&t_state->lock);
    return 1;
}

/* Drains the window's work and charges it. */
static void close_window(struct tdev *t, struct gs_region *r, int d, uint64_t close_ns)
{
    gs_pfn_cuEventRecord rec = GS_REAL_CU(cuEventRecord);
    gs_pfn_cuEventQuery query = GS_REAL_CU(cuEventQuery);
    gs_pfn_cuEventElapsedTime elapsed = GS_REAL_CU(cuEventElapsedTime);
    /* past the streams we track, or with one destroyed (then gone from the
     * list), the whole context is drained below */
    int n = 0, pending = 0, recorded[MAX_STREAMS] = { 0 };
    pthread_mutex_lock(&t_state->lock);
    int overflow = t->overflow;
    n = t->nstreams;
    for (int i = 0; i < n; i++)
        recorded[i] = t->drain[i] && rec && rec(t->drain[i], t->streams[i]) == CUDA_SUCCESS;
    pthread_mutex_unlock(&t_state->lock);
    for (int i = 0; i < n; i++)
        if (recorded[i] && query && query(t->drain[i]) == CUDA_ERROR_NOT_READY)
            pending = 1;
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    if ((pending || overflow) && l && t->turn) {
        if (gs_compute_collective_in_flight(d)) {
            /* our queue may wait for a collective's peer on another GPU,
             * which may wait there for the turn of a container whose
             * collective waits for us here: held through the drain, the
             * turns made a cycle that only their bounds broke (two TP jobs
             * capped 30 / 70 on 2 x H200: 2.4 steps/s, steps of 6 s) */
            gs_ledger_close_window(l, slot, close_ns, 0);
            t->turn = 0;
        } else {
            t->draining = (uint8_t)gs_ledger_extend(l, slot, close_ns, close_ns + DRAIN_HOLD_NS);
        }
    }
    pending |= overflow; /* the drain waits for the whole context */
    uint64_t drained = 0;
    int undrained = 0;
    if (pending) {
        uint64_t from = gs_compute_now();
        CUevent events[MAX_STREAMS];
        int ne = 0;
        for (int i = 0; i < n; i++)
            if (recorded[i])
                events[ne++] = t->drain[i];
        if (__atomic_load_n(&host_waits, __ATOMIC_RELAXED))
            undrained = drain_bounded(t, recorded, n, events, ne, overflow, close_ns, &drained);
        else
            drained = gs_drain_unbounded(events, ne, overflow); /* as the driver waits: one wake-up */
        gs_cost_add(GS_COST_DRAIN, gs_compute_now() - from);
    }
    struct gs_lim_close_facts f = interval_facts(t, r, d, elapsed);
    f.planned_end_ns = t->w.end_ns;
    f.close_ns = close_ns;
    f.drained_ns = drained;
    f.undrained = undrained;
    uint64_t end = less_collective_spin(t, d, gs_lim_window_end(&f, &pending));
    uint64_t start = t->w.start_ns, wend = t->w.end_ns;
    uint32_t nl = t->w.launches;
    uint64_t charge = charge_window(t, r, d, l, slot, end, pending);
    gs_log(GS_LOG_DEBUG, "tokens %lld window %llu us (planned %llu, closed at %llu, %u launches, %s): charged %llu us",
           (long long)__atomic_load_n(&r->dev[d].lim.tokens, __ATOMIC_RELAXED),
           (unsigned long long)((end - start) / 1000), (unsigned long long)((wend - start) / 1000),
           (unsigned long long)((close_ns - start) / 1000), nl, pending ? "measured" : "idle",
           (unsigned long long)(charge / 1000));
    note_interval_end(t);
    pthread_mutex_lock(&t_state->lock);
    t->nstreams = 0;
    t->overflow = 0;
    pthread_mutex_unlock(&t_state->lock);
    t->have_start = t->have_mark = 0;
}

static void touch_ledger(int d, uint64_t now)
{
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    if (l)
        gs_ledger_touch(l, slot, now);
}

/* Whose turn a window waits for, in the debug log: the first
 * TURN_WAITS_LOGGED waits of the process, then one in 64 (a contending
 * container waits thousands of times). */
#define TURN_WAITS_LOGGED 32
static void log_turn_wait(uint64_t holder, uint64_t wait_ns)
{
    static unsigned n;
    unsigned k = __atomic_fetch_add(&n, 1, __ATOMIC_RELAXED);
    if (k < TURN_WAITS_LOGGED || (k & 63) == 0)
        gs_log(GS_LOG_DEBUG, "a window waits up to %llu us for container %016llx (wait %u of the process)",
               (unsigned long long)(wait_ns / 1000), (unsigned long long)holder, k + 1);
}

/* Registers the window just opened in the device ledger and takes the turn
 * (every window of a throttled container does: capped and share-mode ones
 * alike, since time-slicing splits unevenly and loses time). A window taken
 * in its container's slot of the turn frame ends with the slot. Returns 0,
 * or the ns to wait at most while the turn is another container's (seq for
 * gs_ledger_wait). */
static uint64_t ledger_open(struct tdev *t, int d, const struct gs_lim_account *a, uint32_t *seq)
{
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    if (!l)
        return 0;
    /* the turn is ours until the planned end (or one launch's cost, if
     * longer) plus a grace for the drain; past that the holder has stalled
     * or gone idle and must not hold the others back */
    uint64_t len = t->w.end_ns - t->w.start_ns;
    uint64_t busy = t->w.est_ns > len ? t->w.est_ns : len;
    uint64_t grace = len / 4 > TURN_GRACE_NS ? len / 4 : TURN_GRACE_NS;
    struct gs_ledger_turn turn = { .claim_ppm = gs_compute_ledger_claim(a) };
    uint64_t asked = gs_compute_now();
    uint64_t wait = gs_ledger_open_window(l, slot, t->w.start_ns, t->w.start_ns + busy + grace, &turn);
    gs_cost_add(GS_COST_ASK, gs_compute_now() - asked);
    t->turn = (uint8_t)turn.took;
    if (turn.took)
        t->slot_end_ns = turn.slot_end;
    *seq = turn.seq;
    if (wait)
        log_turn_wait(turn.holder, wait);
    if (turn.took && turn.slot_end && turn.slot_end < t->w.end_ns) {
        /* nor may it queue more work than the slot holds: what is queued
         * past the slot's end drains into the next container's */
        t->w.end_ns = turn.slot_end > t->w.start_ns ? turn.slot_end : t->w.start_ns + 1;
        if (t->w.est_ns) {
            uint64_t m = (t->w.end_ns - t->w.start_ns) / t->w.est_ns;
            if (m < t->w.max_launches)
                t->w.max_launches = m ? (uint32_t)m : 1;
        }
    }
    return wait;
}

/* The cost report counts each window's wait for turns once, whole. */
static void count_turn_wait(uint64_t ns)
{
    if (ns)
        gs_cost_add(GS_COST_TURN, ns);
}

/* Whether a launch that reached the gate at now and would be held back goes
 * on: the turn-frame slot of its last window ended within EDGE_FOLLOW_NS of
 * now (or has not yet), and a peer rank of the container has begun a step
 * this thread has not. Held back, the launch would leave the peer's
 * collective spinning for ours through the next container's slot, on a GPU
 * that slot's container then shares with the spin (two TP jobs capped
 * 30 / 70 on 4 x H200: 0.258-0.267 / 0.617-0.634, their collectives 85-130
 * times a run spinning a slot long; 0.280-0.283 / 0.678-0.680 following).
 * So the first rank to reach the slot's end decides for all of them; a
 * follower queues one launch at a time, as a launch at the slot's last
 * moment would. */
static int follows_peer(const struct tdev *t, const struct gs_region *r, uint64_t now)
{
    return t->slot_end_ns && now < t->slot_end_ns + EDGE_FOLLOW_NS && gs_compute_peer_ahead(r);
}

/* Our container was held to its limit on device d at ns: the account says
 * so, and so does the ledger at once, where the others read that we want
 * more (gs_compute_ledger_wanted). */
static void held_back(struct gs_lim_account *a, int d, uint64_t ns)
{
    __atomic_store_n(&a->throttled_ns, ns, __ATOMIC_RELAXED);
    gs_compute_ledger_wanted(d, ns);
}

/* This thread's devices, made at its first limited launch; NULL where no
 * memory is left. */
static struct tdev *thread_devs(void)
{
    struct tstate *ts = t_state;
    if (GS_LIKELY(ts != NULL))
        return ts->dev;
    ts = calloc(1, sizeof *ts); /* gen 0: each set up at its first launch */
    if (!ts) {
        gs_log(GS_LOG_ERROR, "compute limiter: no memory for a thread's state; its launches are refused");
        return NULL;
    }
    pthread_mutex_init(&ts->lock, NULL);
    pthread_cond_init(&ts->ended, NULL);
    pthread_mutex_lock(&states_lock);
    ts->next = states;
    if (states)
        states->prev = ts;
    states = ts;
    pthread_mutex_unlock(&states_lock);
    t_state = ts;
    pthread_once(&exit_once, make_exit_key);
    (void)pthread_setspecific(exit_key, ts);
    return ts->dev;
}

/* The calling thread's state on the current device (its region device in
 * *d, the region in *r), set up at its first use there: NULL where no limit
 * applies or a capture is open, and with *refused set where the limiter has
 * no memory for the thread. */
static struct tdev *current_tdev(struct gs_region **r, int *d, int *refused)
{
    *refused = 0;
    if (__atomic_load_n(&gs_compute_state, __ATOMIC_RELAXED) == GS_COMPUTE_UNKNOWN)
        decide();
    if (__atomic_load_n(&gs_compute_state, __ATOMIC_RELAXED) != GS_COMPUTE_ON)
        return NULL;
    if (GS_UNLIKELY(gs_compute_capturing()))
        return NULL; /* see gs_compute_capture_begun: hands off while any capture is open */
    CUdevice ord = -1;
    *d = gs_rt_dev_current(&ord);
    *refused = *d == GS_DEV_UNTRACKED; /* its limit cannot be applied (gs_rt_dev_of_ordinal logged why) */
    if (*d < 0 || *d >= GS_REGION_MAX_DEVICES || !(*r = gs_rt_region()))
        return NULL;
    struct tdev *td = thread_devs();
    if (GS_UNLIKELY(!td)) {
        *refused = 1;
        return NULL;
    }
    struct tdev *t = &td[*d];
    if (GS_UNLIKELY(t->limited < 0 || !tdev_current(t))) {
        charge_lost_window(t_state, t, *r, *d);
        setup(t, *r, *d, ord);
    }
    return t->limited ? t : NULL;
}

int gs_compute_before(CUstream s, int graph)
{
    /* one launch in 64 times the gate's fast path, for the cost report */
    uint64_t timed = GS_UNLIKELY((++t_gate_tick & 63) == 0) ? gs_compute_now() : 0;
    struct gs_region *r = NULL;
    int d = -1, refused;
    struct tdev *t = current_tdev(&r, &d, &refused);
    if (!t)
        return refused ? GS_COMPUTE_REFUSED : -1;
    struct gs_lim_account *a = &r->dev[d].lim;
    if (gs_lim_unthrottled(a)) {
        /* share mode with the GPU to ourselves, or a cap running free: keep
         * watching (the outer loop's turn is a coarse clock read, a load
         * and a compare; the outer loop ends a free run) */
        if (t->w.open && gs_compute_sync_enter()) {
            close_window(t, r, d, gs_compute_now());
            gs_compute_sync_leave();
        }
        uint64_t coarse = gs_compute_coarse_now();
        if (coarse - t->touched_ns >= GS_LIM_DEFAULT_PERIOD_NS) {
            /* the others see us active, by time, not launches: a member
             * quiet for half an outer interval counts as no busy neighbour
             * (gs_lim_quiet_span), and a free run of long kernels launched
             * rarely must not look quiet while they run (one kernel longer
             * than that does, over its tail: NVML's samples still show it
             * to the others, whose own samples then measure nobody) */
            t->touched_ns = coarse;
            touch_ledger(d, coarse);
        }
        gs_compute_outer(r, d, coarse);
        return -1;
    }
    uint64_t now = gs_compute_now();
    int in_window = gs_lim_in_window(&t->w, now);
    if (GS_UNLIKELY(!in_window) && t->w.open && !t->turn && !gs_compute_held_elsewhere(d, now) &&
        gs_lim_extend(&t->w, a, now)) {
        /* the window goes on: the others still see us active, and the
         * outer loop still runs */
        touch_ledger(d, now);
        gs_compute_collective_harvest(d);
        gs_compute_outer(r, d, now);
        in_window = gs_lim_in_window(&t->w, now);
    }
    if (GS_UNLIKELY(!in_window) && t->w.open && t->turn && follows_peer(t, r, now)) {
        t->w.end_ns = now + 1;
        t->w.max_launches = t->w.launches + 1;
        in_window = 1;
    }
    if (GS_LIKELY(in_window)) {
        /* the ledger flag is read only after a gap worth a look: most
         * launches come closer together than the fine gap. A graph's
         * launch, and the one after it, look from the fine gap too: a
         * graph is many kernels for one launch (the probe costs little
         * beside it), and the CPU between a torch step's graph and its
         * next kernel is no GPU time of ours. So does every launch while c
         * is not learnt (gs_lim_learning) */
        uint64_t gap = now - t->last_launch_ns;
        int probed = 0;
        if (GS_UNLIKELY(gap >= GS_LIM_FINE_GAP_NS)) {
            int coarse = gap >= GS_LIM_GAP_NS;
            int fine =
                !coarse && (((graph || t->graph_last) && !gs_compute_graph_coarse(d)) || gs_compute_fine_probe(d));
            probed = coarse || fine || gs_lim_learning(a);
            if (probed)
                probe_gap(t, r, d, s, now, !coarse && !fine);
        }
        if (!probed && GS_UNLIKELY(timed))
            gs_cost_add(GS_COST_GATE, gs_compute_now() - timed);
        t->last_launch_ns = now;
        return d;
    }
    if (!gs_compute_sync_enter())
        return -1;
    if (gs_compute_stream_capturing(s)) {
        gs_compute_sync_leave();
        return -1;
    }
    if (t->w.open)
        close_window(t, r, d, now);
    gs_compute_sync_leave();
    gs_compute_collective_harvest(d); /* the collectives of the window that closed are charged before it waits */
    gs_compute_outer(r, d, now);
    unsigned bank = 1;
    uint64_t turn_waited = 0;
    int woken_early = 0;
    for (;;) {
        uint64_t t0 = gs_compute_now();
        uint32_t seq = 0;
        int turn = 0;
        uint64_t wait = gs_lim_open(&t->w, a, t0, bank);
        struct gs_turn_slot f;
        if (wait && gs_compute_ledger_frame(d, a, t0, &f)) {
            if (f.mine) {
                /* in its slot of the turn frame a window opens whatever the
                 * account owes (the slot is the limit), so that the ranks of
                 * a job on several GPUs, whose accounts owe a little more or
                 * less, run in the slot together rather than one of them
                 * waiting a frame; held to its limit as if it had waited, it
                 * goes on contending for its slot */
                gs_lim_open_in_slot(&t->w, a, t0, bank);
                wait = 0;
                held_back(a, d, t0);
            } else if (f.mine_ns - t0 < wait) {
                wait = f.mine_ns - t0; /* in debt: no later than its slot */
            }
        }
        t->turn = 0;
        if (!wait && gs_compute_contends(d, a, t0) && turn_waited < GS_LIM_TURN_WAIT_MAX_NS) {
            /* only containers that contend take turns (gs_compute_contends);
             * and no window waits for turns longer than another's window can
             * last (the turn may be forged) */
            if ((wait = ledger_open(t, d, a, &seq)) != 0) {
                t->w.open = 0; /* another container holds the turn */
                turn = 1;
            }
        } else if (!wait) {
            touch_ledger(d, t0);
        }
        if (wait && turn_waited == 0 && follows_peer(t, r, now)) {
            /* judged as of its arrival: closing the window may have taken
             * us past the slot's end. One launch, without the turn: the
             * next container's slot has begun */
            gs_lim_open_in_slot(&t->w, a, t0, bank);
            t->w.end_ns = t0 + 1;
            t->w.max_launches = 1;
            wait = turn = 0;
        }
        if (!wait)
            break;
        if (gs_compute_capturing()) {
            count_turn_wait(turn_waited);
            return -1; /* a capture began while we waited */
        }
        int lslot;
        struct gs_ledger *l = gs_compute_ledger_of(d, &lslot);
        if (turn && l) {
            uint64_t left = GS_LIM_TURN_WAIT_MAX_NS - turn_waited;
            if (wait > left)
                wait = left;
            gs_ledger_wait(l, seq, wait < MAX_SLEEP_NS ? wait : MAX_SLEEP_NS);
            /* woken early twice in a row with the turn still another's: a
             * storm of wakes, not a release; an honest release is taken at
             * once */
            uint64_t woke = gs_compute_now() - t0;
            uint64_t least = wait < GS_LIM_TURN_LOOK_NS ? wait : GS_LIM_TURN_LOOK_NS;
            if (woke < least && woken_early)
                sleep_ns(least - woke);
            woken_early = woke < least;
            gs_cost_add(GS_COST_TURN_LOOK, gs_compute_now() - t0);
            bank = GS_LIM_TURN_BANK;
        } else
            sleep_ns(wait < MAX_SLEEP_NS ? wait : MAX_SLEEP_NS);
        uint64_t slept = gs_compute_now() - t0;
        __atomic_add_fetch(&a->wait_ns, slept, __ATOMIC_RELAXED);
        if (turn) {
            turn_waited += slept;
        } else {
            gs_cost_add(GS_COST_TOKENS, slept);
            held_back(a, d, t0 + slept);
        }
        int slot = gs_rt_slot();
        if (slot >= 0)
            __atomic_add_fetch(&r->proc[slot].lim.wait_ns, slept, __ATOMIC_RELAXED);
        gs_compute_outer(r, d, gs_compute_now());
        if (gs_lim_unthrottled(a)) {
            count_turn_wait(turn_waited);
            return -1; /* share mode: the others went idle while we waited */
        }
    }
    count_turn_wait(turn_waited);
    if (!gs_compute_sync_enter())
        return -1; /* a capture began while we waited: the window runs unmarked */
    interval_begin(t, s, t->w.start_ns, GS_REAL_CU(cuEventRecord));
    gs_compute_sync_leave();
    t->last_launch_ns = t->w.start_ns;
    return d;
}

int gs_compute_collective_hold(void)
{
    struct gs_region *r = NULL;
    int d = -1, refused;
    /* the collectives measured so far were charged at the last launch's
     * bracket (gs_compute_collective_before harvests them) */
    if (!current_tdev(&r, &d, &refused))
        return refused ? GS_COMPUTE_REFUSED : 0;
    struct gs_lim_account *a = &r->dev[d].lim;
    for (;;) {
        uint64_t now = gs_compute_now();
        gs_lim_refill(a, now, 1);
        int64_t over = -__atomic_load_n(&a->tokens, __ATOMIC_RELAXED) - (int64_t)GS_LIM_COLL_DEBT_NS;
        uint32_t rate = __atomic_load_n(&a->rate_ppm, __ATOMIC_RELAXED);
        if (over <= 0 || rate == 0)
            return 0;
        uint64_t wait = (uint64_t)((unsigned __int128)over * GS_LIM_PPM / rate);
        sleep_ns(wait < MAX_SLEEP_NS ? wait : MAX_SLEEP_NS);
        uint64_t slept = gs_compute_now() - now;
        __atomic_add_fetch(&a->wait_ns, slept, __ATOMIC_RELAXED);
        gs_cost_add(GS_COST_TOKENS, slept);
        gs_compute_outer(r, d, gs_compute_now());
    }
}

/* Share mode, borrowing a light neighbour's part (gs_compute_yield): waits
 * for the work up to the marker just recorded, so that at most
 * GPUSLICE_SHARE_YIELD_US of ours is queued and the GPU goes idle for a
 * moment, when the time-slicer hands it to the neighbour's waiting kernel. */
static void yield_queue(struct tdev *t)
{
    gs_pfn_cuEventSynchronize esync = GS_REAL_CU(cuEventSynchronize);
    if (!esync || !gs_compute_sync_enter())
        return;
    uint64_t from = gs_compute_now();
    esync(t->ev_mark);
    gs_compute_sync_leave();
    uint64_t to = gs_compute_now();
    gs_cost_add(GS_COST_YIELD, to - from);
    t->last_launch_ns = to; /* our own wait is no CPU gap: no probe, the interval goes on */
}

/* s is one of the streams the interval's work went to. Searched without the
 * lock: only this thread writes the list. */
static void track_stream(struct tdev *t, CUstream s)
{
    int i = 0;
    while (i < t->nstreams && t->streams[i] != s)
        i++;
    if (i < t->nstreams)
        return;
    pthread_mutex_lock(&t_state->lock);
    if (i < MAX_STREAMS)
        t->streams[t->nstreams++] = s;
    else
        t->overflow = 1;
    pthread_mutex_unlock(&t_state->lock);
}

void gs_compute_after(int d, CUstream s, CUresult rc, int graph)
{
    struct tdev *t = &t_state->dev[d];
    if (rc != CUDA_SUCCESS || !t->w.open)
        return;
    t->w.launches++;
    struct gs_region *r = gs_rt_region();
    if (r)
        gs_compute_step_mark(r, 0);
    track_stream(t, s);
    /* a marker after each of the interval's first GS_LIM_MARK_FIRST launches
     * (a short burst is measured whole, and they measure the GPU time per
     * launch that prices the launches after the last marker), unless the
     * marker at the tenant's wait is trusted to (SYNC_ENDS_TRUSTED); then
     * one per MARK_EVERY_NS of launching or of estimated GPU work, not per
     * launch: each costs the GPU a few us between kernels and the host about
     * a launch */
    t->in_interval++;
    t->sync_mark = 0;
    int marked_at_sync = t->sync_ends >= SYNC_ENDS_TRUSTED;
    /* a graph gets a marker, and so do the GS_LIM_MARK_FIRST launches after
     * it: priced at the GPU time per launch (gs_lim_window_end), a torch
     * step's small kernel after its graph cost as much as the graph's
     * share of the average */
    int after_graph = t->graph_marks > 0;
    t->graph_marks = graph ? GS_LIM_MARK_FIRST : after_graph ? t->graph_marks - 1 : 0;
    if (gs_compute_graph_coarse(d))
        graph = after_graph = 0; /* NVML's samples correct the coarser measure (gs_compute_graph_coarse) */
    t->graph_last = (uint8_t)graph;
    uint64_t work = (uint64_t)++t->since_mark * t->w.est_ns;
    int yield = gs_rt.cfg.share_yield_us && t->w.est_ns && work >= (uint64_t)gs_rt.cfg.share_yield_us * 1000 &&
                gs_compute_yield(d);
    if (yield || (!marked_at_sync && (graph || after_graph || t->in_interval <= GS_LIM_MARK_FIRST)) ||
        t->w.est_ns == 0 || work >= MARK_EVERY_NS || t->last_launch_ns - t->mark_ns >= MARK_EVERY_NS) {
        int marked = record_mark(t, s, GS_COST_MARK);
        t->mark_ns = t->last_launch_ns;
        if (yield && marked)
            yield_queue(t);
    }
}

void gs_compute_tenant_sync(CUstream s, int whole_context)
{
    struct tstate *ts = t_state;
    if (!ts || gs_compute_capturing())
        return;
    CUdevice ord = -1;
    int d = gs_rt_dev_current(&ord);
    if (d < 0 || d >= GS_REGION_MAX_DEVICES)
        return;
    struct tdev *t = &ts->dev[d];
    if (t->limited != 1 || !tdev_current(t) || !t->w.open || !t->have_start || t->sync_mark)
        return;
    /* only a marker that follows all of the interval's work: one stream,
     * the one waited for */
    pthread_mutex_lock(&ts->lock);
    CUstream only = t->streams[0];
    int one = !t->overflow && t->nstreams == 1 && (whole_context || only == s);
    if (one && t->have_mark && t->since_mark == 0) {
        t->sync_mark = 1; /* the last launch's marker follows it all */
    } else if (one && gs_compute_sync_enter()) {
        if (record_mark(t, only, GS_COST_WAIT_MARK)) {
            t->sync_mark = 1;
            t->mark_ns = t->last_launch_ns;
        }
        gs_compute_sync_leave();
    }
    pthread_mutex_unlock(&ts->lock);
}

/* Takes stream s off t's list. Its work may still run: the window counts as
 * busy until the streams left have drained (overflow), without waiting for
 * it. */
static void forget_stream(struct tdev *t, CUstream s)
{
    int k = 0;
    for (int i = 0; i < t->nstreams; i++)
        if (t->streams[i] != s)
            t->streams[k++] = t->streams[i];
    if (k != t->nstreams)
        t->overflow = 1;
    t->nstreams = k;
}

void gs_compute_forget(const CUstream *s, CUcontext ctx)
{
    if (__atomic_load_n(&gs_compute_state, __ATOMIC_RELAXED) != GS_COMPUTE_ON)
        return;
    if (!s && t_state)
        end_windows(t_state, ctx); /* ours, while its events still live */
    if (!s) {
        gs_compute_collective_forget(ctx);
        gs_drain_forget_ctx(ctx);
    }
    pthread_mutex_lock(&states_lock);
    for (struct tstate *ts = states; ts; ts = ts->next) {
        pthread_mutex_lock(&ts->lock);
        while (!s && ts->ending) /* an exiting thread still uses its events */
            pthread_cond_wait(&ts->ended, &ts->lock);
        for (int d = 0; d < GS_REGION_MAX_DEVICES; d++) {
            struct tdev *t = &ts->dev[d];
            if (t->limited != 1)
                continue;
            if (s) {
                forget_stream(t, *s);
            } else if (t->ctx == ctx) {
                /* events made in a context go with it: the state is set up
                 * afresh at its thread's next launch, which charges its
                 * open window (charge_lost_window) */
                t->nstreams = 0;
                if (ts != t_state && tdev_current(t))
                    t->lost_ns = LOST_PENDING;
                __atomic_store_n(&t->gen, 0, __ATOMIC_RELAXED);
            }
        }
        pthread_mutex_unlock(&ts->lock);
    }
    pthread_mutex_unlock(&states_lock);
}

void gs_compute_forgotten(CUcontext ctx)
{
    if (__atomic_load_n(&gs_compute_state, __ATOMIC_RELAXED) != GS_COMPUTE_ON || !ctx)
        return;
    uint64_t now = gs_compute_now();
    pthread_mutex_lock(&states_lock);
    for (struct tstate *ts = states; ts; ts = ts->next) {
        pthread_mutex_lock(&ts->lock);
        for (int d = 0; d < GS_REGION_MAX_DEVICES; d++)
            if (ts->dev[d].ctx == ctx && ts->dev[d].lost_ns == LOST_PENDING)
                ts->dev[d].lost_ns = now;
        pthread_mutex_unlock(&ts->lock);
    }
    pthread_mutex_unlock(&states_lock);
}

void gs_compute_fork_child(void)
{
    /* the other threads are gone, and may have held these */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    states_lock = fresh;
    gs_drain_fork_child();
    gs_compute_collective_fork_child();
    states = t_state;
    if (t_state) {
        pthread_cond_t none = PTHREAD_COND_INITIALIZER;
        t_state->lock = fresh;
        t_state->ended = none;
        t_state->ending = 0;
        t_state->drainer = NULL; /* its thread stayed in the parent */
        t_state->prev = t_state->next = NULL;
        for (int d = 0; d < GS_REGION_MAX_DEVICES; d++)
            t_state->dev[d].lost_ns = 0; /* the parent's window: the parent charges it */
    }
}
