/*
 * The compute limiter's maths (docs/compute.md), free of any driver call so
 * that unit tests can drive it in simulated time.
 *
 * A container's allowance on one device is a token account in GPU-nanoseconds
 * shared by all its processes (struct gs_lim_account, in the region). Tokens
 * accrue at rate p (ppm of wall time) up to one period's worth. Each thread
 * that launches work runs duty-cycle windows: a window opens only when the
 * account is not in debt, lasts tokens/c of wall time (at least one cycle's
 * allowance, GS_LIM_CYCLE_NS, or half a period's beside others), and closes at the first launch after its end (or after
 * as many launches as the measured cost per launch says fit; one launch
 * while that cost is unknown). Closing drains
 * the work launched in it, then charges its occupancy x c, so that no work
 * spills into the off time and the next window waits until the debt is paid:
 * busy / (busy + off) = p.
 *
 * c ("correction", ppm) is the fraction of our occupied time the GPU really
 * spent on us. It is 1 when we are alone; when other contexts time-slice the
 * GPU it drops (each of our kernels takes longer), measured by the slow outer
 * loop from NVML per-process utilisation.
 *
 * s ("speed", ppm, >= 1) is how much faster the GPU runs our work than it
 * would run it with the GPU to itself: a duty-cycled GPU stays below its
 * power limit and keeps a higher clock than a continuously busy one, so p % of
 * the time would buy more than p % of exclusive throughput. The outer loop
 * estimates s from NVML power and utilisation (gs_lim_speed). A window is
 * charged occupancy x c x s.
 */
#ifndef GPUSLICE_LIMITER_H
#define GPUSLICE_LIMITER_H

#include <stdint.h>

#define GS_LIM_PPM 1000000U
#define GS_LIM_DEFAULT_PERIOD_NS 50000000ULL /* 50 ms duty cycle */
/* The cycle of a container held to p with no tokens banked, on a GPU that
 * nobody else uses: windows of p x 5 ms of GPU time, then (1 - p) x 5 ms
 * off, so that a job never stands still for long (a tensor-parallel loop of
 * 2 ms steps capped at 40 had steps of 25-30 ms, 12-15 x its median, on
 * 2 x H200 with the half-period windows below). Beside other contexts that
 * time-slice the GPU a window holds half a period's allowance, as the
 * correction c is learnt for: short windows overlap the others' more often
 * and each overlap slows both (two caps 30 / 70 with no shared ledger and
 * only NVML's device utilisation got 0.255 / 0.583 on the model GPU of
 * tests/unit/test_limiter_loop.c with 5 ms cycles, 0.300 / 0.700 with these).
 * Idle time banks a period's allowance for a burst either way. */
#define GS_LIM_CYCLE_NS 5000000ULL
#define GS_LIM_OUTER_NS 250000000ULL  /* outer (NVML) loop every 250 ms */
#define GS_LIM_MIN_CORR 50000U        /* c never below 0.05 */
#define GS_LIM_MAX_CORR 1500000U      /* ... nor above 1.5 (events missed a tail of work) */
#define GS_LIM_DEV_UNREAD UINT32_MAX  /* dev_ppm of a run that read no device busy time */
#define GS_LIM_BUSY_PPM 50000U        /* others above 5 % count as busy (share mode) */
#define GS_LIM_MAX_SPEED 2000000U     /* s never above 2 */
#define GS_LIM_IDLE_POWER_PPM 150000U /* power drawn busy-idle: 15 % of the limit */
#define GS_LIM_DEFAULT_POWER_EXP 480U /* thousandths; see gs_lim_speed */
#define GS_LIM_POWER_RUNS 8           /* outer runs kept for the busy fraction over the power span (2 s of them) */

#define GS_LIM_MAX_WEIGHT 10000U   /* GPUSLICE_SHARE_WEIGHT's ceiling (config_keys.def) */
#define GS_LIM_DEFAULT_WEIGHT 100U /* ... and its default, the node agent's ceiling */

enum gs_lim_mode { GS_LIM_CAP = 0, GS_LIM_SHARE = 1 };

/* Shared by all processes of a container, per device; exactly the words
 * reserved in struct gs_region_device. Updated with atomics only. */
struct gs_lim_account {
    int64_t tokens;          /* GPU ns we may still use; negative = debt */
    uint64_t refill_ns;      /* clock of the last refill */
    uint32_t rate_ppm;       /* allowed share now (cap, or share target); >= GS_LIM_PPM: unthrottled */
    uint32_t corr_ppm;       /* c; 0 until first learnt, charged as 1 (gs_lim_corr_of) */
    uint64_t union_end_ns;   /* end of the container's busy time charged so far */
    uint64_t occ_ns;         /* cumulative busy GPU time measured by events (before c and s) */
    uint64_t charged_ns;     /* cumulative charged GPU time (busy x c x s) */
    uint64_t wait_ns;        /* cumulative time threads waited for tokens */
    uint64_t outer_next_ns;  /* next outer-loop run; claimed by CAS */
    uint64_t outer_last_ns;  /* clock of the last outer-loop run */
    uint64_t outer_occ_mark; /* occ_ns at that run */
    uint64_t nvml_seen_us;   /* NVML lastSeenTimeStamp */
    uint32_t limit_pct;      /* configured percent (cap) or 0 */
    uint16_t weight;         /* share weight */
    uint8_t mode;            /* enum gs_lim_mode */
    uint8_t configured;      /* 1 once set up */
    uint32_t use_ppm;        /* measured use over the last outer interval (NVML or charged) */
    uint32_t others_ppm;     /* others' use of the device (NVML), fading by a quarter an outer run */
    uint64_t throttled_ns;   /* clock when a thread last waited for tokens */
    uint32_t speed_ppm;      /* s; 0 until first learnt, charged as 1 (gs_lim_speed_of) */
    uint32_t dev_ppm;        /* device busy fraction at the last outer run (NVML); GS_LIM_DEV_UNREAD: none read */
    uint32_t power_runs_n;   /* outer runs recorded in power_runs, ever (the ring's next slot: n % its size) */
    uint32_t wait_mark;      /* wait_ns at the last outer run, its low 32 bits (gs_lim_alone_busy) */
    uint64_t woke_ns; /* clock the outer loop last woke from a slept interval, 0 before (gs_lim_power_span_ours) */
    uint64_t power_runs[GS_LIM_POWER_RUNS]; /* the last runs' busy fractions and intervals (gs_lim_power_run) */
    uint64_t unused_draw_mw; /* the draw the first run read on an idle device, or 0 (gs_lim_power_repriced) */
};

/* c as charged: 1 until the outer loop first learns it. The first measure
 * is taken whole, later ones half-way (EMA 1/2): from 1, a decoder-like
 * tenant busy 0.25 alone under cap 30, whose measures were 0.23-0.24 from
 * the first, was charged past its cap for 1.25 s and waited 0.55 s of its
 * first 3 on the simulated driver. */
static inline uint32_t gs_lim_corr_of(uint32_t corr_ppm)
{
    return corr_ppm ? corr_ppm : GS_LIM_PPM;
}

/* s as charged: 1 until the outer loop first learns it, then at least 1. */
static inline uint32_t gs_lim_speed_of(uint32_t speed_ppm)
{
    return speed_ppm > GS_LIM_PPM ? speed_ppm : GS_LIM_PPM;
}

/* One thread's window on one device (process-private). Inside it the
 * GPU time is measured as busy intervals: one starts at a launch that found
 * the thread's work drained (or at the window's start) and ends when that
 * work drained; the CPU gaps between them are not charged. */
struct gs_lim_window {
    int open;
    uint32_t launches;
    uint32_t max_launches;
    uint32_t pad;
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t est_ns;    /* EMA of busy GPU time per launch; 0 = unknown */
    uint64_t busy_from; /* start of the current busy interval */
    uint64_t busy_ns;   /* busy time of the window's closed intervals */
};

/* Whether the outer loop slept: an interval since its last run of more
 * than two periods (the container idled, or ran free and launched rarely).
 * NVML's samples of such an interval and our busy time cover different
 * spans: c learns nothing from it. */
static inline int gs_lim_outer_slept(uint64_t interval_ns)
{
    return interval_ns > 2 * GS_LIM_OUTER_NS;
}

/* Whether we idled through the interval: the loop slept and NVML's samples
 * show our pids busy under a quarter of it (or not at all). A container
 * running free runs the loop only at a launch, so one launching less than
 * once in two periods sleeps the loop while it works. */
#define GS_LIM_IDLED_PPM 250000U
static inline int gs_lim_outer_idled(uint64_t interval_ns, int64_t our_ppm)
{
    return gs_lim_outer_slept(interval_ns) && our_ppm < GS_LIM_IDLED_PPM;
}

/* Whether a stamp another thread wrote (at) lies within span before now,
 * or after it: a reader's clock may be older than the stamp. An outer run
 * reads the clock, then NVML for 2-4 ms; a launching thread that woke from
 * a token wait meanwhile stamped its wait past that clock, and taken as
 * ages ago (unsigned now - at), a GPU-bound load capped at 10 on an H200
 * ran free for a run, 0.96 busy, and owed 0.5 s. */
static inline int gs_lim_recent(uint64_t at, uint64_t now, uint64_t span)
{
    return at > now || now - at < span;
}

/* A container that waited for its tokens within this long is throttled:
 * its windows take the device ledger's turn (docs/compute.md). */
#define GS_LIM_THROTTLED_NS 500000000ULL
static inline int gs_lim_throttled(const struct gs_lim_account *a, uint64_t now)
{
    return gs_lim_recent(__atomic_load_n(&a->throttled_ns, __ATOMIC_RELAXED), now, GS_LIM_THROTTLED_NS);
}

/* The first launches of each busy interval that get a marker each (see
 * gs_lim_window_end): a burst that short is measured whole. */
#define GS_LIM_MARK_FIRST 4

/* A CPU gap at least this long before a launch is worth asking whether the
 * GPU drained meanwhile (shorter ones count as busy; the NVML correction c
 * takes them out). */
#define GS_LIM_GAP_NS 100000ULL

/* The probe's gap while other containers of the device ledger are active
 * (c = 1 there: NVML does not take our CPU gaps out). A transformers decoder
 * spends 20-80 us of CPU between its small kernels; counted busy they made
 * it look 0.7 busy for 0.15 of GPU time. Each probe costs the host an event
 * record and query per stream. */
#define GS_LIM_FINE_GAP_NS 20000ULL

/* Sets up the account once (first process of the container wins): 0 when
 * it is set up, 1 while another process is setting it up. A caller that
 * keeps getting 1 past a timeout calls gs_lim_account_take_over: the
 * claimant died between its claim and its release. */
int gs_lim_account_init(struct gs_lim_account *a, enum gs_lim_mode mode, unsigned limit_pct, unsigned weight,
                        uint64_t now);
void gs_lim_account_take_over(struct gs_lim_account *a, enum gs_lim_mode mode, unsigned limit_pct, unsigned weight,
                              uint64_t now);
#define GS_LIM_CLAIM_TIMEOUT_NS 100000000ULL /* a set-up claim older than this was abandoned */

/* The weight a container counts with beside others in share mode: its
 * share weight, or its cap if capped. */
uint32_t gs_lim_weight(const struct gs_lim_account *a);

/* A share container's rate beside other active containers when nobody
 * holds it back: the whole GPU, but through windows, so that it measures
 * its use (gs_lim_unthrottled is false). */
#define GS_LIM_SHARE_MEASURED (GS_LIM_PPM - 1)

/* The rate a cap of limit_pct allows: GS_LIM_PPM (no limit) from 100 up. */
static inline uint32_t gs_lim_cap_rate(unsigned limit_pct)
{
    return limit_pct >= 100 ? GS_LIM_PPM : limit_pct * 10000U;
}

/* The cap predicate: whether the account lets its threads run with no
 * window at all (share mode with the GPU to itself, a limit of 100, or a
 * cap running free under the device bound: gs_lim_outer_decide). */
static inline int gs_lim_unthrottled(const struct gs_lim_account *a)
{
    return __atomic_load_n(&a->rate_ppm, __ATOMIC_RELAXED) >= GS_LIM_PPM;
}

/* Window-end inference: what a closing thread knows of its window. */
#define GS_LIM_DRAIN_SLACK_NS 100000ULL /* a drain shorter than this: the marker knows better */
struct gs_lim_close_facts {
    uint64_t start_ns, planned_end_ns; /* the window */
    uint64_t close_ns;                 /* when the closing launch came */
    uint64_t drained_ns;               /* when its work drained, if it was pending; else 0 */
    int undrained;                     /* ... or when the drain gave up on it, still pending (its bound) */
    uint64_t last_launch_ns;           /* its last launch */
    int64_t mark_ns;                   /* GPU time from its start event to its last marker; -1: none */
    uint32_t after_mark;               /* launches after that marker (or after the start, if none) */
    uint64_t per_launch_ns;            /* GPU time per launch that markers measured; 0: unknown */
    int sliced;                        /* other contexts may hold the GPU while our work waits for its slice */
};
/* When the GPU stopped being the window's: sets *measured when that is
 * measured (not merely bounded by the planned end). Launches after the last
 * marker whose work drained unseen (a CPU gap, or a close that found nothing
 * pending) ran for after_mark x per_launch_ns past it, at the latest until
 * the close; with no per-launch time known, until the close. A measured end
 * is not before the last launch (its work ran after it was made), unless
 * sliced: then our work may have waited for another context's slice after
 * the launch, and our events, stamped only while our context runs, are the
 * measure (an H200 stamped "event, 10 us kernel, event" 12.9 us apart while
 * the host waited 1.45 ms for them beside a GPU-bound process). A drain
 * that took longer than GS_LIM_DRAIN_SLACK_NS ends the window, unless a
 * completed marker says our work ended before the close and the close came
 * after a CPU gap longer than the window. An undrained window (its work
 * still pending when the drain's bound passed: it may wait for the host)
 * ended no earlier than drained_ns, unmeasured: busy until then, whatever
 * the markers say. */
uint64_t gs_lim_window_end(const struct gs_lim_close_facts *f, int *measured);

/* Adds the tokens accrued since the last refill, capped at `periods`
 * periods' allowance: 1, so that idle time banks no more than one period of
 * burst; GS_LIM_TURN_BANK after a thread of the container waited for another
 * container's turn (not idle: wanting the GPU, held off by the turn). Safe
 * to call from any number of processes at once. */
void gs_lim_refill(struct gs_lim_account *a, uint64_t now, unsigned periods);

/* What a container may owe before its collectives' launches wait too: four
 * periods. A job's other kernels are held back by windows, so its debt stays
 * within a window's overrun; a tenant whose kernels all carried NCCL's names
 * was never held and ran at full speed under any cap. */
#define GS_LIM_COLL_DEBT_NS (4 * GS_LIM_DEFAULT_PERIOD_NS)

/* Periods' allowance a container may bank while it waits for the device
 * ledger's turn: the other's window lasts up to one period's allowance of
 * its own, and a 30 % container capped at one period (15 ms) lost accrual
 * behind a 70 % one's 35 ms windows (0.262-0.276 on an H100, 0.267 on the
 * simulated driver). */
#define GS_LIM_TURN_BANK 2U

/* The longest a window waits for other containers' turns before it opens
 * without one: a window lasts two periods at most, plus its grace, and
 * capped containers' windows of one round add up to two periods' allowance
 * of their caps (under 100 ms while the caps add up to 100 % or less).
 * Share containers' windows can add up to more: then the waiter overlaps
 * the rest of a window, time-slicing as without turns (a capped tenant
 * warming beside two share ones on the simulated driver reached it at least
 * once in 28 waits, 68 ms on average). The turn lives in a file every
 * container can write; a tenant that forged one for a live neighbour (with
 * open windows that never close) held a container capped at 30 to 0.06 on
 * the simulated driver, waiting until it no longer counted as throttled. */
#define GS_LIM_TURN_WAIT_MAX_NS (3 * GS_LIM_DEFAULT_PERIOD_NS)

/* A window waiting for the turn that was woken early and found the turn
 * still another's looks at the ledger again at most this often, however
 * often it is woken: anyone who can write the ledger can bump its futex word
 * and wake every waiter, and would have them spin on the ledger's lock for
 * the whole wait. The first early wake is looked at at once: an honest
 * release is taken without a sleep, whose late wake on a loaded host would
 * idle the GPU. */
#define GS_LIM_TURN_LOOK_NS 100000ULL

/* Fast path: may this thread launch now without closing its window? */
static inline int gs_lim_in_window(const struct gs_lim_window *w, uint64_t now)
{
    return w->open && now < w->end_ns && w->launches < w->max_launches;
}

/* Tries to open a window at now, after a refill capped at bank_periods
 * (gs_lim_refill). Returns 0 if opened, else the ns to wait before trying
 * again (the account is in debt). */
uint64_t gs_lim_open(struct gs_lim_window *w, struct gs_lim_account *a, uint64_t now, unsigned bank_periods);
/* Opens a window in the container's slot of the turn frame (turn_frame.h),
 * whatever the account owes: while containers contend, the slot's length is
 * the limit. The debt is cut to one period's GPU time. */
void gs_lim_open_in_slot(struct gs_lim_window *w, struct gs_lim_account *a, uint64_t now, unsigned bank_periods);

/* A window that ended while its container stays well in credit goes on
 * instead of closing: no drain, no wait. Extends it (by what the credit
 * buys, at most two periods) and returns 1 if the account's tokens, less
 * the most the open busy interval can have used, are at least half a
 * period's allowance; else 0 and the window closes as usual. A tenant under
 * its cap thus never waits for its own queue: a TP-2 decoder capped at 50
 * (busy about 0.4 alone) spent 0.08-0.2 s of each 5 s drained on 2 x H200,
 * its CPU idle while the GPU caught up, and ran at 0.70-0.77 of alone.
 * Share containers measuring their use (GS_LIM_SHARE_MEASURED) close as
 * before. */
int gs_lim_extend(struct gs_lim_window *w, struct gs_lim_account *a, uint64_t now);

/* Busy aggregation: the window's current busy interval ended at end_ns (its
 * work drained during a CPU gap); the next one starts at next_ns. Charges
 * the part of [busy_from, end] that no other thread or process of the
 * container has charged already -- the container's busy time is the union
 * of its threads' -- times c x s, and returns the charge. Where its end was
 * measured, the interval's measured_launches (0: not measured) teach the
 * window's GPU time per launch. */
uint64_t gs_lim_busy_interval(struct gs_lim_window *w, struct gs_lim_account *a, uint64_t end_ns, uint64_t next_ns,
                              uint32_t measured_launches);

/* c is not learnt yet (charged as 1). The launch path then probes from
 * GS_LIM_FINE_GAP_NS, so that a decoder's CPU gaps between its kernels are
 * not charged as busy before NVML can take them out, and hands each gap so
 * found that a probe from GS_LIM_GAP_NS would not have found to
 * gs_lim_uncharged_gap: occupancy, from which c is learnt, counts what the
 * probe from GS_LIM_GAP_NS counts after, so the first c fits it. On the
 * simulated driver a decoder-like tenant alone under cap 30, charged its
 * 40 us gaps at c = 1, waited 0.34 s of its first 3 s for tokens. */
int gs_lim_learning(const struct gs_lim_account *a);

/* [from, to], a CPU gap between busy intervals, counted as occupancy
 * without being charged (gs_lim_learning); the part of it no other thread
 * of the container counted already. */
void gs_lim_uncharged_gap(struct gs_lim_account *a, uint64_t from, uint64_t to);

/* Closes the window: its last busy interval ended at end_ns (the caller
 * works that out: gs_lim_window_end). measured: end_ns was measured, so
 * busy time / launches is a fair cost per launch. Charges that interval as
 * gs_lim_busy_interval does and returns the charge. */
uint64_t gs_lim_close(struct gs_lim_window *w, struct gs_lim_account *a, uint64_t end_ns, int measured);

/* A collective kernel (collective.h) measured at span_ns, charged work_ns
 * (gs_coll_est_add): its spin while a peer is held back is no work of ours. The
 * whole span counts as occupancy (NVML's busy time counts the spin too, and
 * the corrections compare the two); the charge is work x c x s, outside the
 * union of busy intervals (the collective runs on a stream of its own).
 * Returns the charge. */
uint64_t gs_lim_charge_collective(struct gs_lim_account *a, uint64_t span_ns, uint64_t work_ns);

/* Outer loop, pure part. our_ppm/others_ppm: NVML-measured shares of the
 * interval (-1 if unknown); occ_ppm: our busy time as our events measured it
 * (which counts CPU gaps shorter than GS_LIM_GAP_NS, and time another
 * context time-sliced the GPU away from us). Returns the new correction c in
 * ppm: the fraction of that busy time the GPU really spent on our kernels.
 * Each correction steps from old_corr (0: not learnt) as gs_lim_corr_of
 * says: the first measure whole (none from under GS_LIM_BUSY_PPM of our
 * time), later ones half-way. alone: nobody else was
 * in the samples nor hidden from them (gs_lim_alone_reading); a measure
 * that then halves c or more is taken whole too. */
uint32_t gs_lim_correction(uint32_t old_corr, int64_t our_ppm, uint64_t occ_ppm, int alone);

/* Whether NVML's readings measure us alone: ours GS_LIM_BUSY_PPM or more,
 * nobody else's in the samples, and nobody else busy (gs_lim_nobody_else). */
int gs_lim_alone_reading(int64_t our_ppm, int64_t others_ppm, int64_t dev_ppm);

/* Whether NVML's readings show nobody else busy: the device busy no more
 * than GS_LIM_BUSY_PPM beyond ours (nobody the samples miss), and nobody
 * in the samples, or others there beyond the device's busy time (samples
 * from before its reading). */
int gs_lim_nobody_else(int64_t our_ppm, int64_t others_ppm, int64_t dev_ppm);

/* Whether a device reading (dev_ppm) of a run we were busy in (occ_ppm,
 * our events' measure) is from before our work: the device read under
 * GS_LIM_BUSY_PPM while we occupied it four times that. NVML's
 * utilisation sample covers a period that ended before it is read, and at
 * a new container's first launches it still covers the idle before them. */
int gs_lim_device_reading_stale(uint64_t dev_ppm, uint64_t occ_ppm);

/* Outer loop without per-process data (NVML returns no samples, or none
 * with our pids: a container without hostPID): c from the device-level
 * busy fraction dev_ppm (nvmlDeviceGetUtilizationRates) and our occupancy.
 * The device busy beyond our occupancy is the others running alone; their
 * duty q over the time we were idle is taken to hold while we run too, and
 * overlapped time is split evenly (time-slicing), so c = 1 - q/2. While we
 * occupy nearly all the time (nothing to see the others by) c relaxes
 * towards 1, so that a c learnt next to a tenant that has since gone cannot
 * let us exceed the cap. */
uint32_t gs_lim_correction_device(uint32_t old_corr, uint64_t dev_ppm, uint64_t occ_ppm);

/* Outer loop, the power correction s (ppm, >= GS_LIM_PPM). power_mw: the
 * device's power draw, a mean over the last second (nvmlDeviceGetPowerUsage
 * since Ampere), limit_mw its enforced power limit, busy_ppm the busy
 * fraction over the same second (gs_lim_power_busy); in a new container's
 * first two seconds, NVML's instantaneous draw and the run's busy fraction
 * (limiter_outer.c). The draw beyond what
 * the busy-idle GPU draws (GS_LIM_IDLE_POWER_PPM of the limit), per unit of
 * that busy fraction,
 *     e = (power - idle) / busy,
 * is what the running work draws a busy second. Alone it would keep the GPU
 * busy alone_ppm of the time (gs_lim_alone_busy): if e x alone exceeds the
 * headroom limit - idle, the GPU given to that work alone would throttle
 * its clock until it fits: it runs faster now by (e x alone / headroom)^exp (dynamic
 * power grows about as f^2 with the clock, throughput up to f^1; exp in
 * thousandths, calibrated on an H200: docs/compute.md). exp 0 disables it.
 * Moves half-way per run from old; old 0 (not learnt, or a new container
 * whose runs do not yet cover the draw's second: gs_lim_outer_decide)
 * takes the measure whole: stepping half-way from 1, a GPU-bound tenant
 * under cap 30 on the simulated clock model was charged s 1.09-1.17 over
 * its first second against the model's 1.21, and did 0.35 of the device's
 * work. Keeps old while the device is nearly idle. */
uint32_t gs_lim_speed(uint32_t old_speed, uint64_t power_mw, uint64_t limit_mw, uint64_t busy_ppm, uint64_t alone_ppm,
                      unsigned exp_milli);

/* The busy fraction our work would keep the GPU at alone (gs_lim_speed's
 * alone_ppm): our occupancy over the time our threads did not wait for
 * tokens or turns, occ / (1 - waited / interval), at most the whole GPU.
 * Work with CPU gaps of its own keeps those gaps alone: a jitted JAX step
 * busy 0.76 alone drew 675 W of an H200's 700 at its highest clock, yet
 * priced as if it filled the GPU (the draw per busy second times 1) its s
 * came out 1.10-1.14 and cap 50 gave it 0.56-0.61 of its speed alone against
 * 0.66 (bench/results/compute-2026-12-04.md). Where the waits fill the
 * interval (several threads waiting at once) or our queue kept the GPU
 * busy while we waited, the whole GPU. */
uint64_t gs_lim_alone_busy(uint64_t occ_ppm, uint64_t waited_ns, uint64_t interval_ns);

/* The part of an outer interval of interval_ns our work was queued on the
 * device (occupancy occ_ppm) or our threads waited (waited_ns) for tokens
 * or another container's turn, at most the whole: what a container held
 * back wants beyond what it ran. */
uint64_t gs_lim_queued(uint64_t occ_ppm, uint64_t waited_ns, uint64_t interval_ns);

/* The span nvmlDeviceGetPowerUsage averages the draw over (since Ampere). */
#define GS_LIM_POWER_SPAN_NS 1000000000ULL

/* Whether the power reading's span is all ours: the outer loop has run
 * without sleeping for the whole of it since it woke (woke_ns). Before
 * that the draw mixes in the second before: the idle, or a neighbour's
 * load. Such a reading may raise s, never lower it (gs_lim_outer_decide):
 * a GPU-bound matmul under cap 70 taking its 2.5 s turns after one at the
 * power limit read 677 W at 0.6 busy, and s fell 1.17 -> 1.09 over its
 * first second, then took another to climb back, each turn, on an H200;
 * held, it ended the turns within 0.005-0.022 of where it began them
 * (bench/results/compute-2026-12-04b.md). An s too high charges only us,
 * for at most that second. A new container's first second learns s both
 * ways, as before: it has none to keep, and held where a mix first read it
 * high, it cost four GPU-bound tenants under caps 60-90 up to 0.015 of the
 * device on the simulated driver. */
static inline int gs_lim_power_span_ours(uint64_t now, uint64_t woke_ns)
{
    return now >= woke_ns + GS_LIM_POWER_SPAN_NS;
}

/* The busy fraction to divide the draw by (gs_lim_speed): the larger of
 * the device's busy time and our occupancy over each outer interval (a
 * launch-bound load that keeps the GPU busy half of the time it occupies
 * would do the same alone), averaged over the last GS_LIM_POWER_SPAN_NS as
 * the draw is: a plain mean over that second of this run's interval
 * (busy_ppm over interval_ns) and the account's recorded runs before it.
 * Time before the oldest run recorded counts at that run's busy fraction:
 * a container's first run reads the device as it was before its work (on
 * an idle device, idle, as the draw's mean holds it). Each run's alone,
 * the draw still held the last second's: on an H200, a capped JAX step
 * taking its turn after a neighbour's read 575 -> 287 W over its first
 * second while the device's busy time fell to 0.24 at once, and s rose to
 * 1.45 for a load whose clock never moved
 * (bench/results/compute-2026-12-03h.md). An average that only matched the
 * span's mean delay (an EMA, weight 2 interval / span) rose faster than the
 * draw's mean over a new container's first second: on the simulated clock
 * model a GPU-bound tenant under cap 30 learnt s 1.11 -> 1.25 there against
 * the model's 1.21 (1.17 -> 1.20 with this mean) and did 0.346 of the
 * device's work in that second. Never 0. */
uint32_t gs_lim_power_busy(const struct gs_lim_account *a, uint64_t busy_ppm, uint64_t interval_ns);

/* The draw an account's first run reads where NVML reads the device idle
 * (dev_ppm under GS_LIM_BUSY_PPM), the draw of a device nobody uses; 0
 * where it reads a busy device or nothing. After the first run, what the
 * account keeps. */
uint64_t gs_lim_power_unused_draw(const struct gs_lim_account *a, int64_t dev_ppm, int64_t power_mw);

/* The draw power_mw, the part of its second from before the account's
 * record (covered_ns: the runs recorded, this one's interval included)
 * repriced from the unused device's draw unused_draw_mw to the busy-idle one
 * (GS_LIM_IDLE_POWER_PPM of limit_mw) that gs_lim_speed takes the whole
 * second at; where unused_draw_mw is 0 or not below it, power_mw. An H200
 * drew 80 W before a container's first launch against the 105 W priced:
 * read over a busy fraction whose mean holds that time idle, the draw at
 * 0.5 s (196 W over 0.15) priced a GPU-bound tenant under cap 30 at no
 * speed-up where its clock ran 1.2 x as fast; repriced, s 1.05 there and
 * 1.14 at 0.75 s against 1.12 (bench/results/compute-2026-12-05.md §1). */
uint64_t gs_lim_power_repriced(uint64_t unused_draw_mw, uint64_t power_mw, uint64_t limit_mw, uint64_t covered_ns);

/* One outer run as the account's power_runs keep it: its busy fraction
 * (ppm, at most the whole GPU) and interval (us, at most ~71 min). */
uint64_t gs_lim_power_run(uint64_t busy_ppm, uint64_t interval_ns);

/* Whether this run's draw can tell s: the loop did not sleep (over a longer
 * interval our waits and occupancy cover our idle time too, and
 * gs_lim_alone_busy took a tenant back from an idle for one that barely
 * runs: s fell 1.15 -> 1.08 on the simulated driver), we ran (occupancy
 * busy_ppm at least GS_LIM_BUSY_PPM), and the busy fraction busy_ppm did
 * not fall below three quarters of its mean over the span mean_ppm. Where
 * it fell, the mean over the second still holds the heavier load before,
 * weighed by its larger busy time: on the simulated driver a tenant capped
 * at 30 taking its turn after a GPU-bound neighbour at the power limit took
 * that mix for its own, s 1.17-1.23 against 1.33 steady, and did 0.34 of
 * the device's work. A load that grows needs no such wait: the draw and the
 * busy fraction both rise from what the second held before. */
int gs_lim_power_tells(uint64_t occ_ppm, uint64_t busy_ppm, uint32_t mean_ppm, uint64_t interval_ns);

/* Share mode: our target share given the weights of the others that are busy
 * (sum; 0 = none busy). GS_LIM_PPM means unthrottled. */
uint32_t gs_lim_share_target(unsigned weight, uint64_t busy_others_weight);

/* Share mode, work-conserving: the others' weights, what each used of the
 * GPU lately (ppm) and whether it wanted more (it waited for tokens). A
 * tenant that wanted no more than it used keeps what it used, and so does a
 * capped one its cap when it wants more (its own limiter holds it there:
 * beside share containers a cap of p is p % of the GPU, not a weight of p);
 * the rest of the GPU is split by weight among the share ones that want
 * more, ourselves counted as one (water-filling). Caps leave the share
 * containers GS_LIM_CAPS_LEAVE_PPM at least. Returns our target; GS_LIM_PPM
 * when nobody else wants more than what is left. */
struct gs_lim_demand {
    uint32_t weight;
    uint32_t use_ppm;
    int wants_more;
    uint32_t cap_ppm;  /* a capped container's cap, where verified; 0: share mode or not known */
    uint64_t quiet_ns; /* since it last showed demand (a window opened or waited for, a free launch); 0: now */
};
#define GS_LIM_CAPS_LEAVE_PPM 50000U
uint32_t gs_lim_share_fill(unsigned weight, const struct gs_lim_demand *others, unsigned n);

/* A container's part of the device by weight alone beside the n others
 * (weight / the sum of all weights), in ppm. */
uint32_t gs_lim_weight_part(unsigned weight, const struct gs_lim_demand *others, unsigned n);

/* Whether a share container that nobody holds back (it never waits for
 * tokens, so its waits cannot say it) wants more than it gets beside the n
 * others: it uses more than its weight's part, or its work was queued for
 * GS_LIM_QUEUED_PPM of the time or more (queued_ppm: its occupancy and its
 * threads' waits, gs_lim_queued) while it used less --
 * time-sliced below its part, a GPU-bound container of weight 70 beside one
 * of 30 otherwise looked content, and the pair stayed time-sliced (0.46 /
 * 0.47 on the simulated driver). Occupancy counts the time its work was
 * queued: on an H200 matmul training read 0.98-0.99 beside a decoder, the
 * decoder (~0.17 of the GPU) up to 0.90 while its kernels waited for the
 * training's slices. */
#define GS_LIM_QUEUED_PPM 950000U
int gs_lim_share_wants_more(unsigned weight, uint64_t use_ppm, uint64_t queued_ppm, const struct gs_lim_demand *others,
                            unsigned n);

/* How many of the n others use a share of the device that can blur ours
 * (GS_LIM_SEEN_PPM or more) or want more than they get, and showed demand
 * within the last within_ns: one quiet for longer launched nothing in an
 * outer interval of that length (its windows last two periods at most). */
#define GS_LIM_SEEN_PPM 10000U
unsigned gs_lim_count_busy(const struct gs_lim_demand *others, unsigned n, uint64_t within_ns);
/* The span a member must have been quiet for to blur little of an outer
 * interval: half of it (one that went quiet earlier shared at most its
 * first half with us: on an H200 the tenant of the turn before ours, whose
 * last launches came a few ms into our turn, counted busy at half of our
 * turns' first readings and set c to 1), and at least a window's longest
 * (two periods), through which a member that opened it launches without a
 * sign. */
static inline uint64_t gs_lim_quiet_span(uint64_t interval_ns)
{
    return interval_ns / 2 > 2 * GS_LIM_DEFAULT_PERIOD_NS ? interval_ns / 2 : 2 * GS_LIM_DEFAULT_PERIOD_NS;
}

/* Whether any of the n others wants more than it gets (waits for tokens). */
int gs_lim_any_wants_more(const struct gs_lim_demand *others, unsigned n);

/* A share-mode container beside busy containers of the device ledger that
 * it does not take turns with (turns: it is held to its share and another
 * wants more): c from the time both counted. Where our occupancy occ and the
 * uses the n others published add up to more than the device was busy
 * (dev), the excess ran one at a time, time-sliced, yet both counted it: a light tenant's events stay open while its next kernel waits
 * for the other's slice (an H100: a decoder counted 0.69-0.83 of the time
 * beside training). Half of that overlap is taken as the other's, so c is
 * in [1/2, 1]. */
uint32_t gs_lim_correction_overlap(uint32_t old_corr, uint64_t occ_ppm, const struct gs_lim_demand *others, unsigned n,
                                   uint64_t dev_ppm);

/* A capped container beside busy containers of the device ledger: its GPU
 * time is at most the device's busy time dev (NVML's utilisation: time with
 * any kernel running, ours or not). While dev stays under
 * GS_LIM_BOUND_PPM of its cap it cannot reach the cap however its events
 * count (gs_lim_bound_holds), so it needs no fine probe: on an H100 a
 * decoder capped at 70 beside training capped at 30 (device 0.45 busy) spent
 * 1.6 s of 20 in 394 295 probes after its 20 us CPU gaps and ran at 0.85 of
 * alone, against 1.02 without the interposer. There c = min(1, dev / occ)
 * (gs_lim_correction_bound) keeps the charge at or above its true GPU time
 * while the coarse probe counts its short gaps as busy. */
#define GS_LIM_BOUND_PPM 800000U
int gs_lim_bound_holds(uint64_t dev_ppm, unsigned limit_pct);

/* c under that bound: min(1, dev / occ), taken whole while not learnt,
 * then half-way per run, rising as falling. Taken whole, a rise learnt from
 * an interval a service barely ran in (back from idle, its intervals
 * spanning a neighbour's slices) charged the next, in which it ran, past its
 * cap: on an H200 a decoder capped at 70 saw occupancy 0.54 and the device
 * 0.44, took c = 0.81-0.90 where 0.45-0.50 held before, and was charged
 * 0.81 at occupancy 0.90 with the device 0.45 busy. A slower rise costs the
 * cap nothing: while the bound holds the device is busy under the cap,
 * whatever the container is charged, and once it stops holding c is no
 * longer this one. */
uint32_t gs_lim_correction_bound(uint32_t old_corr, uint64_t dev_ppm, uint64_t occ_ppm);

/* The use such a container publishes: what it is charged, at most what the
 * device was busy beyond the uses the n others published (its charge is
 * the device's whole busy time, theirs included). */
uint64_t gs_lim_bound_use(uint64_t charged_ppm, uint64_t dev_ppm, const struct gs_lim_demand *others, unsigned n);

/* Share mode, latency: whether a container that uses use_ppm of the device,
 * more than its weight's part, borrows from a light neighbour, one of the n
 * others that runs (GS_LIM_SEEN_PPM or more) yet wants no more and uses less
 * than its own weight's part. Such a container keeps its queue shallow
 * (GPUSLICE_SHARE_YIELD_US, compute_limiter.c): on a time-sliced GPU a light
 * tenant's kernel waits for what the other context has queued. On an H100 a
 * decoder beside training with ten 4096^2 matmuls queued kept 0.58 of its
 * speed, beside the same training waiting for each matmul 0.96. */
int gs_lim_yields(unsigned weight, uint64_t use_ppm, const struct gs_lim_demand *others, unsigned n);

/* The estimated GPU work (us) a yielding container lets queue up before it
 * waits for it to finish (the GPU goes idle for a moment, and the
 * time-slicer hands it to the light neighbour's waiting kernel):
 * GPUSLICE_SHARE_YIELD_US. Off (0) by default: it trades the borrower's
 * throughput for the neighbour's latency, and on an H100 no value gave both
 * (a decoder beside matmul training kept 0.96-1.15 of its speed with
 * 100-500 us while the training fell to 0.40-0.63; with 1000-2000 us both
 * stayed where they were without it). */
#define GS_LIM_DEFAULT_YIELD_US 0U

/* The busy fraction to weigh the power draw by (gs_lim_speed's dev_ppm):
 * the device's, or our use plus what the other containers of the device
 * ledger published, where that is more. NVML's device utilisation read
 * 0.76-0.97 on an H100 kept full by two turn-taking tenants; the power at
 * its limit then passed for duty-cycled work running fast, and s = 1.04-1.08
 * charged both for time they did not get. Another's use counts for the part
 * of our interval (interval_ns) it was active in, up to its last demand
 * (quiet_ns before now): one that stopped as our turn began still counts
 * as active for a run or two, and taken whole beside our own use it held a
 * GPU-bound matmul's s at 1.08-1.13 for 1.25 s of each 2.5 s turn on an H200,
 * against 1.16-1.20 steady (bench/results/compute-2026-12-04.md). */
uint64_t gs_lim_device_busy(uint64_t dev_ppm, uint64_t our_use_ppm, const struct gs_lim_demand *others, unsigned n,
                            uint64_t interval_ns);

/* What the other containers' members of the device ledger count for in
 * share mode's water-filling and the corrections: the ledger is a file
 * every tenant can write, so its entries are claims (docs/security.md,
 * finding 4). A claim whose container we could verify (its region beside
 * ours, with a live process) counts with the weight from its limits
 * (verified_weight) and is capped as they say (verified_cap_ppm), whatever
 * its member wrote. The unverifiable ones count
 * together as one container of at most the default weight (their uses
 * summed, at most what NVML saw the device busy: dev_ppm, -1 unknown;
 * wanting more if any does), or not at all where every honest member is
 * verifiable (drop_unverified: the ledger lies beside the regions). So no
 * tenant, however many members it forges, weighs more than one default
 * container. n may be any count (a ledger's every member); past
 * GS_LIM_MAX_DEMANDS - 1 verified ones the rest count as unverified.
 * Returns the entries written to out (at most n, at most
 * GS_LIM_MAX_DEMANDS). */
struct gs_lim_claim {
    struct gs_lim_demand d;    /* as its member wrote it (cap_ppm: ignored) */
    uint32_t verified_weight;  /* its weight from its limits; 0: not verified */
    uint32_t verified_cap_ppm; /* its cap from its limits; 0: share mode, or not verified */
};
unsigned gs_lim_trusted_demands(const struct gs_lim_claim *c, unsigned n, int drop_unverified, int64_t dev_ppm,
                                struct gs_lim_demand *out);

/* The outer loop's decision (docs/compute.md, "The outer loop"): what one
 * run learnt, gathered by compute_outer.c from NVML, our events and the
 * device ledger, and what it makes of it. The decision is pure, so that
 * the unit tests drive the same one. */

/* The most other containers of the device ledger one run weighs; the
 * GPU users outside the ledger (NVML) take one entry more. */
#define GS_LIM_MAX_DEMANDS 64

struct gs_outer_in {
    uint64_t now, interval_ns;           /* this run, and the time since the last */
    uint64_t occ_ppm;                    /* our busy time over the interval, by our events */
    uint64_t waited_ns;                  /* what our threads waited for tokens and turns in it */
    int64_t our_ppm, others_ppm;         /* NVML's per-process split; -1: unknown */
    int64_t dev_ppm, power_mw, limit_mw; /* NVML's device readings; -1: unknown */
    int64_t power_now_mw;                /* NVML's instantaneous draw; 0 or less: unknown */
    unsigned power_exp_milli;            /* gs_lim_speed's exponent */
    int yield_on;                        /* GPUSLICE_SHARE_YIELD_US is set */
    const struct gs_lim_demand *dem;     /* the other containers of the ledger active lately */
    unsigned ndem;                       /* at most GS_LIM_MAX_DEMANDS */
    uint64_t outside_weight;             /* share mode: weights of busy GPU users outside the ledger */
    int pids_hidden;                     /* NVML's samples cannot name us: it lists processes, none of
                                          * ours (a pid namespace of our own), or an MPS server is busy
                                          * in them and none of our pids is; its split is no measure */
};

struct gs_outer_out {
    uint32_t corr, speed;                  /* c and s */
    uint64_t power_run;                    /* this run, for the account's power_runs (gs_lim_power_run) */
    uint64_t woke_ns;                      /* the account's woke_ns from now on */
    uint64_t unused_draw_mw;               /* the account's unused_draw_mw from now on */
    uint32_t use_ppm, others_ppm, dev_ppm; /* published in the account (use also in the ledger) */
    uint64_t wants_ns;                     /* published in the ledger: when we last wanted more */
    uint32_t target;                       /* the rate from now on (a cap's, or GS_LIM_PPM running free) */
    int64_t free_tokens_ns; /* a cap that ran free: its reading's allowance less use (gs_lim_outer_apply) */
    int fine_probe;         /* the gap probe looks at short gaps (gs_compute_fine_probe) */
    int graph_coarse;       /* graph launches get no fine probe nor markers (gs_compute_graph_coarse) */
    int yield;              /* keep the queue shallow (gs_lim_yields) */
};

/* Decides c, s, our published use and demand, and the rate (a share
 * target, or a cap's), from the account a as it stands and what the run
 * gathered.
 *
 * A capped container runs free (rate GS_LIM_PPM: no windows, probes nor
 * markers) while it stays under its cap: measuring cost host-bound loads
 * alone under a cap above their use 5-7 % of their speed on an H200, and a
 * decoder capped at 70 beside training capped at 30 on an H100 12 %. It
 * starts after two readings in a row of the whole device under the device
 * bound of its cap (gs_lim_bound_holds), the second under the cap at s,
 * busy neighbours or not, with c learnt and no wait for tokens within
 * GS_LIM_THROTTLED_NS (the cap did not hold it back: under windows a held
 * load reads low). Its token account
 * then runs on the outer loop's readings: each adds the cap's allowance over
 * the run and takes its use (NVML's samples, else the device's busy time)
 * at s (free_tokens_ns). It stops once its tokens fall more than one
 * reading can wrongly take below zero (free_slack), or at the second
 * reading lately of someone else busy (others in the samples, a busy ledger
 * member while NVML sees someone else busy; not in a run back from an
 * idle) where the whole device, at s, read busy past the cap over the two
 * (their mean), owing what its tokens say; without a device reading it
 * never runs free. A single reading of either may still hold a turn's
 * previous tenant (an H200 ended most of a decoder's free runs on them). c
 * stays as it was learnt under windows while free, and is learnt afresh
 * after (gs_lim_learning): the load changed. */
void gs_lim_outer_decide(const struct gs_lim_account *a, const struct gs_outer_in *in, struct gs_outer_out *out);

/* Whether a cap running free read the device under the device bound of its
 * cap with nobody beside it at its last run: its next run needs no NVML
 * per-process samples (1.7 ms a read on an H200, four a second), as the
 * device's busy time is then the most it can have used. A reading at or
 * over the bound, or of someone beside it, brings them back the run after. */
int gs_lim_free_far_under(const struct gs_lim_account *a);

/* A run that only looks where NVML's samples end (a process's first look)
 * learns no c, yet its interval is part of the second the draw's mean
 * covers: it is recorded (gs_lim_power_busy) at the device's busy time
 * where read, as our occupancy then counts the CPU gaps the learning
 * probes found, and s is learnt from it as in gs_lim_outer_decide (the
 * draw needs no per-process samples). Left out of the record, a GPU-bound
 * tenant's first 250 ms under cap 30 on the simulated clock model passed
 * for idle, its draw for twice the work's, and s rose to 1.42 (the model's
 * 1.21); learning nothing there, it ran its first 500 ms at s 1 and did
 * 0.338 of the device's work in its first second (0.322-0.323 learning s
 * 1.16-1.17 there). Returns s (0: not learnt). */
uint32_t gs_lim_outer_look_only(struct gs_lim_account *a, const struct gs_outer_in *in);

/* Stores the decision in the account; a share target that starts holding
 * the container back starts it from an empty account, and a cap that ran
 * free adds free_tokens_ns to its tokens (at most one period's allowance).
 * Returns the rate it replaced. */
uint32_t gs_lim_outer_apply(struct gs_lim_account *a, const struct gs_outer_out *out, uint64_t now);

/* NVML sample aggregation: the mean, over distinct sample timestamps, of the
 * summed smUtil of the samples whose pid is_ours() says belong to us, and of
 * the others; in ppm. Returns the newest timestamp seen (or since_us). */
struct gs_lim_sample {
    uint32_t pid;
    uint32_t sm_util;
    uint64_t ts_us;
};
/* The oldest sample timestamp newer than since_us, or since_us if none.
 * Each sample covers the sampling period before its timestamp, so the first
 * one after a look at NVML began before that look: from a container's
 * start, it holds time when the container did not run yet. On the run after
 * its first look, with c not learnt yet (to be taken whole), the outer loop
 * aggregates from after it. */
uint64_t gs_lim_oldest_after(const struct gs_lim_sample *s, unsigned n, uint64_t since_us);
/* The stamp after which the newest span_us of the samples newer than
 * since_us lie (since_us if they span less): a run after runs that read no
 * samples takes only its own span of the history they left. */
uint64_t gs_lim_recent_from(const struct gs_lim_sample *s, unsigned n, uint64_t since_us, uint64_t span_us);
/* Keeps the newest max of the n samples in s[0..max) (sorted newest first
 * where there are more; NVML does not say in what order it lists them);
 * returns how many are kept. */
unsigned gs_lim_keep_newest(struct gs_lim_sample *s, unsigned n, unsigned max);
/* Whether s[i] is the first of s[0..i] with its timestamp: the samples of
 * one period share a stamp, and averages count periods, not samples. */
int gs_lim_new_stamp(const struct gs_lim_sample *s, unsigned i);
uint64_t gs_lim_aggregate(const struct gs_lim_sample *s, unsigned n, uint64_t since_us,
                          int (*is_ours)(uint32_t pid, void *ctx), void *ctx, int64_t *our_ppm, int64_t *others_ppm);
/* gs_lim_aggregate from from_us into our_ppm, others_ppm and *newest, and
 * the account's mark of the samples read (*mark, which read `seen` when the
 * run began) moved to the newest. Returns 0 where another process's run of
 * the container moved the mark meanwhile (its run overlapped this one and
 * counted them): each sample is counted by one run, and this one should
 * decide nothing (-1 and -1; the mark moves forward only, so one set back
 * to 0 stays). */
int gs_lim_take_samples(uint64_t *mark, uint64_t seen, const struct gs_lim_sample *s, unsigned n, uint64_t from_us,
                        int (*is_ours)(uint32_t pid, void *ctx), void *ctx, int64_t *our_ppm, int64_t *others_ppm,
                        uint64_t *newest);

#endif
