/* The compute limiter's maths; see limiter.h and docs/compute.md. */
#include "limiter.h"

#include <math.h>

#define LD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_RELAXED)

/* One period's allowance at rate: what idle time banks. */
static int64_t burst_of(uint32_t rate)
{
    return (int64_t)((unsigned __int128)GS_LIM_DEFAULT_PERIOD_NS * rate / GS_LIM_PPM);
}

/* Stores the configuration (the claimant, or one taking over from it). */
static void setup_account(struct gs_lim_account *a, enum gs_lim_mode mode, unsigned limit_pct, unsigned weight,
                          uint64_t now)
{
    a->mode = (uint8_t)mode;
    a->limit_pct = limit_pct;
    a->weight = (uint16_t)(weight > 65535 ? 65535 : weight);
    a->corr_ppm = 0; /* not learnt yet: charged as 1 */
    a->speed_ppm = GS_LIM_PPM;
    uint32_t rate = mode == GS_LIM_SHARE ? GS_LIM_PPM : (limit_pct >= 100 ? GS_LIM_PPM : limit_pct * 10000U);
    ST(&a->rate_ppm, rate);
    /* a new container was idle until now: it starts with what idle time
     * banks, so that its first window, charged before c is learnt, does not
     * put it in debt (a decoder-like tenant's first 10 us kernel, queued
     * behind a capped neighbour's slice, cost it 1 ms of debt, then 150 ms
     * of turns while it counted as held back) */
    ST(&a->tokens, burst_of(rate));
    ST(&a->refill_ns, now);
    ST(&a->outer_last_ns, now);
    /* the first launch runs the outer loop: its first look at NVML only
     * learns where the samples from before us end, so the next run, an
     * interval later, is the first to learn c (not two intervals later) */
    ST(&a->outer_next_ns, now);
    __atomic_store_n(&a->configured, 1, __ATOMIC_RELEASE);
}

int gs_lim_account_init(struct gs_lim_account *a, enum gs_lim_mode mode, unsigned limit_pct, unsigned weight,
                        uint64_t now)
{
    uint8_t zero = 0;
    /* configured: 0 -> 2 (initialising) -> 1 */
    if (__atomic_compare_exchange_n(&a->configured, &zero, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        setup_account(a, mode, limit_pct, weight, now);
        return 0;
    }
    if (zero == 2)
        return 1; /* another process is setting it up (or died doing so) */
    uint64_t last = LD(&a->outer_last_ns);
    if (now > last + 4 * GS_LIM_OUTER_NS) {
        /* left over from processes long gone: start afresh (a share-mode
         * target learnt then says nothing about now) */
        if (a->mode == GS_LIM_SHARE)
            ST(&a->rate_ppm, GS_LIM_PPM);
        ST(&a->tokens, burst_of(LD(&a->rate_ppm)));
        ST(&a->refill_ns, now);
        ST(&a->outer_last_ns, now);
        ST(&a->outer_next_ns, now);
        ST(&a->nvml_seen_us, (uint64_t)0);
    }
    return 0;
}

void gs_lim_account_take_over(struct gs_lim_account *a, enum gs_lim_mode mode, unsigned limit_pct, unsigned weight,
                              uint64_t now)
{
    /* Setting up takes nanoseconds: a claim older than the caller's
     * timeout is a process that died between claim and release. Two
     * takers (or a claimant that was merely descheduled) store the same
     * configuration; the last one wins and nothing is lost. */
    if (__atomic_load_n(&a->configured, __ATOMIC_ACQUIRE) == 2)
        setup_account(a, mode, limit_pct, weight, now);
}

uint32_t gs_lim_weight(const struct gs_lim_account *a)
{
    return a->mode == GS_LIM_SHARE ? a->weight : a->limit_pct;
}

/* Where the window's work ended by its markers: the last one, plus the
 * launches after it at the GPU time per launch they measured (their work
 * ended after they were made, and before the close), not before the last
 * launch unless sliced. */
static uint64_t marked_end(const struct gs_lim_close_facts *f)
{
    uint64_t end = f->start_ns + (uint64_t)(f->mark_ns >= 0 ? f->mark_ns : 0);
    if (f->after_mark)
        end = f->per_launch_ns ? end + (uint64_t)f->after_mark * f->per_launch_ns : f->close_ns;
    if (end < f->last_launch_ns && !f->sliced)
        end = f->last_launch_ns;
    return end > f->close_ns ? f->close_ns : end;
}

uint64_t gs_lim_window_end(const struct gs_lim_close_facts *f, int *measured)
{
    *measured = 1;
    int known = f->mark_ns >= 0 || f->per_launch_ns;
    /* a completed marker whose work, and that of the launches after it,
     * ended before the close, which came after a CPU gap longer than the
     * window: what a drain then waited for was queued after our launches
     * (a copy, or the drain's own event behind a neighbour's slice). Taken
     * for our work, an H200 charged a tenant capped at 30 its 81 s idle.
     * After a shorter gap a long kernel of ours may still run. */
    uint64_t marked = known ? marked_end(f) : 0;
    uint64_t window = f->planned_end_ns > f->start_ns ? f->planned_end_ns - f->start_ns : 0;
    int ended_before = f->mark_ns >= 0 &&
                       f->close_ns >= f->last_launch_ns + (window > GS_LIM_GAP_NS ? window : GS_LIM_GAP_NS) &&
                       marked + GS_LIM_DRAIN_SLACK_NS <= f->close_ns;
    if (f->drained_ns && !ended_before && (f->drained_ns - f->close_ns > GS_LIM_DRAIN_SLACK_NS || !known))
        return f->drained_ns; /* work was still running: the GPU was ours until it drained */
    if (known)
        return marked;
    *measured = 0;
    return f->close_ns < f->planned_end_ns ? f->close_ns : f->planned_end_ns; /* at most the window */
}

static uint64_t charge_rate(const struct gs_lim_account *a);

void gs_lim_refill(struct gs_lim_account *a, uint64_t now, unsigned periods)
{
    uint64_t last = LD(&a->refill_ns);
    if (now <= last)
        return;
    if (!__atomic_compare_exchange_n(&a->refill_ns, &last, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return; /* someone else refilled up to (at least) a moment ago */
    uint32_t rate = LD(&a->rate_ppm);
    int64_t add = (int64_t)((unsigned __int128)(now - last) * rate / GS_LIM_PPM);
    int64_t burst = burst_of(rate) * (int64_t)(periods ? periods : 1);
    int64_t t = ADD(&a->tokens, add);
    while (t > burst && !__atomic_compare_exchange_n(&a->tokens, &t, burst, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* GPU ns charged per ns of occupancy, in ppm: c x s. */
static uint64_t charge_rate(const struct gs_lim_account *a)
{
    uint64_t c = gs_lim_corr_of(LD(&a->corr_ppm)), sp = LD(&a->speed_ppm);
    if (c < GS_LIM_MIN_CORR)
        c = GS_LIM_MIN_CORR;
    if (c > GS_LIM_MAX_CORR)
        c = GS_LIM_MAX_CORR;
    if (sp < GS_LIM_PPM)
        sp = GS_LIM_PPM;
    if (sp > GS_LIM_MAX_SPEED)
        sp = GS_LIM_MAX_SPEED;
    return c * sp / GS_LIM_PPM;
}

static uint64_t open_window(struct gs_lim_window *w, struct gs_lim_account *a, uint64_t now, unsigned bank_periods,
                            int in_slot)
{
    gs_lim_refill(a, now, bank_periods);
    uint32_t rate = LD(&a->rate_ppm);
    if (rate == 0)
        rate = 1;
    int64_t t = LD(&a->tokens);
    if (t < 0 && rate >= GS_LIM_SHARE_MEASURED) {
        /* held back by nobody, only measured: a debt is the charge's error
         * (the power correction, time-sliced overlap), never a wait */
        __atomic_store_n(&a->tokens, (int64_t)0, __ATOMIC_RELAXED);
        t = 0;
    }
    if (t < 0 && !in_slot) {
        uint64_t wait = (uint64_t)((unsigned __int128)(uint64_t)(-t) * GS_LIM_PPM / rate);
        return wait ? wait : 1;
    }
    uint64_t period = GS_LIM_DEFAULT_PERIOD_NS;
    int beside_others = LD(&a->others_ppm) >= GS_LIM_BUSY_PPM;
    uint64_t quantum = beside_others ? (uint64_t)burst_of(rate) / 2
                                     : (uint64_t)((unsigned __int128)GS_LIM_CYCLE_NS * rate / GS_LIM_PPM);
    uint64_t gpu = t > 0 && (uint64_t)t > quantum ? (uint64_t)t : quantum;
    if (in_slot) {
        /* the slot is the limit: what the account owes beyond one period
         * is forgiven (charges that overlapped another container's tail
         * must not cost later slots), and the window may last the slot */
        int64_t floor = -burst_of(rate);
        while (t < floor && !__atomic_compare_exchange_n(&a->tokens, &t, floor, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
        gpu = (uint64_t)((unsigned __int128)2 * period * charge_rate(a) / GS_LIM_PPM);
    }
    uint64_t len = (uint64_t)((unsigned __int128)gpu * GS_LIM_PPM / charge_rate(a));
    if (len > 2 * period)
        len = 2 * period;
    if (len == 0)
        len = 1;
    w->open = 1;
    w->launches = 0;
    w->start_ns = w->busy_from = now;
    w->busy_ns = 0;
    w->end_ns = now + len;
    /* Until a window has measured what a launch costs, one launch: a new
     * thread must not queue seconds of work into its first window. */
    w->max_launches = 1;
    if (w->est_ns) {
        uint64_t m = (len + w->est_ns - 1) / w->est_ns;
        w->max_launches = m == 0 ? 1 : m > UINT32_MAX ? UINT32_MAX : (uint32_t)m;
    }
    return 0;
}

uint64_t gs_lim_open(struct gs_lim_window *w, struct gs_lim_account *a, uint64_t now, unsigned bank_periods)
{
    return open_window(w, a, now, bank_periods, 0);
}

void gs_lim_open_in_slot(struct gs_lim_window *w, struct gs_lim_account *a, uint64_t now, unsigned bank_periods)
{
    (void)open_window(w, a, now, bank_periods, 1);
}

int gs_lim_extend(struct gs_lim_window *w, struct gs_lim_account *a, uint64_t now)
{
    if (!w->open || now < w->busy_from)
        return 0;
    gs_lim_refill(a, now, 1);
    uint32_t rate = LD(&a->rate_ppm);
    if (rate == 0 || rate >= GS_LIM_SHARE_MEASURED)
        return 0;
    uint64_t cr = charge_rate(a);
    int64_t open = (int64_t)((unsigned __int128)(now - w->busy_from) * cr / GS_LIM_PPM);
    int64_t credit = LD(&a->tokens) - open;
    if (credit < burst_of(rate) / 2)
        return 0;
    uint64_t len = (uint64_t)((unsigned __int128)(uint64_t)credit * GS_LIM_PPM / cr);
    if (len > 2 * GS_LIM_DEFAULT_PERIOD_NS)
        len = 2 * GS_LIM_DEFAULT_PERIOD_NS;
    w->end_ns = now + len;
    uint64_t m = w->est_ns ? (len + w->est_ns - 1) / w->est_ns : 1;
    m += w->launches;
    w->max_launches = m > UINT32_MAX ? UINT32_MAX : (uint32_t)m;
    return 1;
}

/* The part of [from, end_ns] no thread or process of the container has
 * counted yet (the container's busy time is the union of its threads'),
 * counted as occupancy and charged at rate (ppm; 0: not charged). */
static uint64_t count_span(struct gs_lim_account *a, uint64_t from, uint64_t end_ns, uint64_t rate)
{
    uint64_t done = LD(&a->union_end_ns);
    while (done < end_ns &&
           !__atomic_compare_exchange_n(&a->union_end_ns, &done, end_ns, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    if (done > from)
        from = done;
    uint64_t busy = end_ns > from ? end_ns - from : 0;
    uint64_t charge = (uint64_t)((unsigned __int128)busy * rate / GS_LIM_PPM);
    ADD(&a->tokens, -(int64_t)charge);
    ADD(&a->occ_ns, busy);
    ADD(&a->charged_ns, charge);
    return charge;
}

uint64_t gs_lim_charge_collective(struct gs_lim_account *a, uint64_t span_ns, uint64_t work_ns)
{
    uint64_t charge = (uint64_t)((unsigned __int128)work_ns * charge_rate(a) / GS_LIM_PPM);
    ADD(&a->tokens, -(int64_t)charge);
    ADD(&a->occ_ns, span_ns);
    ADD(&a->charged_ns, charge);
    return charge;
}

static void learn_per_launch(struct gs_lim_window *w, uint64_t busy_ns, uint32_t launches)
{
    uint64_t per = busy_ns / launches;
    w->est_ns = w->est_ns ? (w->est_ns * 3 + per) / 4 : per;
}

uint64_t gs_lim_busy_interval(struct gs_lim_window *w, struct gs_lim_account *a, uint64_t end_ns, uint64_t next_ns,
                              uint32_t measured_launches)
{
    uint64_t charge = count_span(a, w->busy_from, end_ns, charge_rate(a));
    uint64_t busy = end_ns > w->busy_from ? end_ns - w->busy_from : 0;
    w->busy_ns += busy;
    w->busy_from = next_ns;
    /* a window well in credit goes on (gs_lim_extend) and may never close,
     * so its intervals teach the GPU time per launch too: unknown, it made
     * every launch a window's last (one extension each) and each a marker
     * (a driver-API loop capped at 99 on an H200: 0.68 of native) */
    if (measured_launches)
        learn_per_launch(w, busy, measured_launches);
    return charge;
}

void gs_lim_uncharged_gap(struct gs_lim_account *a, uint64_t from, uint64_t to)
{
    (void)count_span(a, from, to, 0);
}

int gs_lim_learning(const struct gs_lim_account *a)
{
    return LD(&a->corr_ppm) == 0;
}

uint64_t gs_lim_close(struct gs_lim_window *w, struct gs_lim_account *a, uint64_t end_ns, int measured)
{
    if (!w->open)
        return 0;
    w->open = 0;
    uint64_t charge = gs_lim_busy_interval(w, a, end_ns, end_ns, 0);
    if (w->launches > 0 && measured)
        learn_per_launch(w, w->busy_ns, w->launches);
    return charge;
}

/* A correction's step from old (0: not learnt) towards the measure c:
 * half-way, or all the way for the first measure where c is measured
 * (NVML's time for our pids, the device's busy time bounding ours). The
 * estimates from the device's busy time alone and from the overlap split
 * step half-way from 1 even then: taken whole, their first estimate (0.50
 * for the side capped at 30 of two GPU-bound containers) left the side
 * capped at 70 at 0.665 over its next 5 s in tests/unit/test_limiter.c's
 * model, 0.686 stepping half-way. */
static uint32_t corr_step(uint32_t old_corr, uint64_t c)
{
    return old_corr ? (uint32_t)((old_corr + c) / 2) : (uint32_t)c;
}

static uint32_t corr_ema(uint32_t old_corr, uint64_t c)
{
    return (uint32_t)((gs_lim_corr_of(old_corr) + c) / 2);
}

int gs_lim_alone_reading(int64_t our_ppm, int64_t others_ppm, int64_t dev_ppm)
{
    /* the device less busy than our samples say is their periods not
     * lining up with its reading, not someone else hidden from them */
    return our_ppm >= GS_LIM_BUSY_PPM && others_ppm >= 0 && others_ppm < GS_LIM_BUSY_PPM && dev_ppm >= 0 &&
           dev_ppm <= our_ppm + GS_LIM_BUSY_PPM;
}

uint32_t gs_lim_correction(uint32_t old_corr, int64_t our_ppm, uint64_t occ_ppm, int alone)
{
    if (our_ppm < 0 || occ_ppm < GS_LIM_BUSY_PPM)
        return old_corr; /* nothing to learn from */
    if (our_ppm == 0 && occ_ppm >= 4 * GS_LIM_BUSY_PPM)
        return old_corr; /* we were busy and NVML saw none of it: it does not see our pids */
    uint64_t c = (uint64_t)our_ppm * GS_LIM_PPM / occ_ppm;
    if (c > GS_LIM_MAX_CORR)
        c = GS_LIM_MAX_CORR;
    if (c < GS_LIM_MIN_CORR)
        c = GS_LIM_MIN_CORR;
    /* a first measure from less than GS_LIM_BUSY_PPM of our time is taken
     * half-way: NVML's samples lag a container's start, and an H200 gave a
     * decoder its first one at 0 % (c 0.05 taken whole, one outer interval
     * charged a twentieth of its busy time) */
    if (old_corr == 0 && our_ppm < GS_LIM_BUSY_PPM)
        return corr_ema(old_corr, c);
    /* a c learnt beside others, or from a turn's first reading that NVML
     * credited a neighbour's time-slice to us, falls whole once a reading
     * alone says it is half as much or less: stepping half-way, a decoder
     * capped at 30 alone after such a reading (c 1, its true 0.14) was held
     * for tokens through 3-4 outer runs on an H200. A smaller fall still
     * steps half-way, so that the readings' noise cannot bias c low */
    if (alone && c * 2 <= old_corr)
        return (uint32_t)c;
    return corr_step(old_corr, c);
}

uint32_t gs_lim_correction_device(uint32_t old_corr, uint64_t dev_ppm, uint64_t occ_ppm)
{
    if (occ_ppm > GS_LIM_PPM)
        occ_ppm = GS_LIM_PPM;
    if (dev_ppm > GS_LIM_PPM)
        dev_ppm = GS_LIM_PPM;
    if (occ_ppm < GS_LIM_BUSY_PPM)
        return old_corr; /* we barely ran: nothing to learn */
    /* busy, on a device NVML saw idle: its reading covers a period before
     * we ran (at the first launch, the outer run's first look), not a
     * measure. Taken as one it set c to 1 as learnt, and the first real
     * measure then came half-way, not whole (gs_lim_correction) */
    if (dev_ppm < GS_LIM_BUSY_PPM && occ_ppm >= 4 * GS_LIM_BUSY_PPM)
        return old_corr;
    uint64_t idle = GS_LIM_PPM - occ_ppm;
    if (idle < GS_LIM_BUSY_PPM) /* cannot see the others: relax towards 1 (as an unlearnt c is) */
        return old_corr ? (uint32_t)(old_corr + (GS_LIM_PPM - old_corr) / 16) : 0;
    uint64_t alone = dev_ppm > occ_ppm ? dev_ppm - occ_ppm : 0;
    uint64_t q = alone * GS_LIM_PPM / idle;
    if (q > GS_LIM_PPM)
        q = GS_LIM_PPM;
    uint64_t c = GS_LIM_PPM - q / 2;
    /* the device was busy no more than dev: what our events counted beyond
     * it were gaps between our kernels (beyond a tenth: our windows are
     * charged when they close, so one interval's busy time and the device's
     * differ by that much without any gap) */
    uint64_t gaps = dev_ppm * GS_LIM_PPM / occ_ppm;
    if (dev_ppm >= GS_LIM_BUSY_PPM && gaps < c && gaps < GS_LIM_PPM * 9 / 10)
        c = gaps < GS_LIM_MIN_CORR ? GS_LIM_MIN_CORR : gaps;
    return corr_ema(old_corr, c);
}

uint32_t gs_lim_speed(uint32_t old_speed, uint64_t power_mw, uint64_t limit_mw, uint64_t dev_ppm, uint64_t occ_ppm,
                      unsigned exp_milli)
{
    if (old_speed < GS_LIM_PPM)
        old_speed = GS_LIM_PPM;
    if (exp_milli == 0 || limit_mw == 0)
        return GS_LIM_PPM;
    /* what the work would keep busy on its own: the device's busy time,
     * or our occupancy where that is more (a launch-bound load leaves the
     * GPU idle between its kernels, and alone would do so too) */
    uint64_t busy_ppm = dev_ppm > occ_ppm ? dev_ppm : occ_ppm;
    if (busy_ppm < GS_LIM_BUSY_PPM)
        return old_speed; /* too little work to see what it draws */
    if (busy_ppm > GS_LIM_PPM)
        busy_ppm = GS_LIM_PPM;
    double idle = (double)limit_mw * GS_LIM_IDLE_POWER_PPM / GS_LIM_PPM;
    double e = ((double)power_mw - idle) / ((double)busy_ppm / GS_LIM_PPM);
    double over = e / ((double)limit_mw - idle);
    double target = over > 1.0 ? pow(over, exp_milli / 1000.0) * GS_LIM_PPM : (double)GS_LIM_PPM;
    if (target > GS_LIM_MAX_SPEED)
        target = GS_LIM_MAX_SPEED;
    return (uint32_t)((old_speed + (uint64_t)target) / 2);
}

/* Our weight (at least 1) plus the n others', summed. */
static uint64_t weights_of(unsigned weight, const struct gs_lim_demand *others, unsigned n)
{
    uint64_t sum = weight ? weight : 1;
    for (unsigned i = 0; i < n; i++)
        sum += others[i].weight;
    return sum;
}

uint32_t gs_lim_weight_part(unsigned weight, const struct gs_lim_demand *others, unsigned n)
{
    return (uint32_t)((uint64_t)(weight ? weight : 1) * GS_LIM_PPM / weights_of(weight, others, n));
}

int gs_lim_share_wants_more(unsigned weight, uint64_t use_ppm, uint64_t occ_ppm, const struct gs_lim_demand *others,
                            unsigned n)
{
    return n > 0 && (use_ppm > gs_lim_weight_part(weight, others, n) || occ_ppm >= GS_LIM_QUEUED_PPM);
}

unsigned gs_lim_count_busy(const struct gs_lim_demand *others, unsigned n)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++)
        k += others[i].wants_more || others[i].use_ppm >= GS_LIM_SEEN_PPM;
    return k;
}

int gs_lim_any_wants_more(const struct gs_lim_demand *others, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (others[i].wants_more)
            return 1;
    return 0;
}

/* The uses the n others published, summed. */
static uint64_t uses_of(const struct gs_lim_demand *others, unsigned n)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < n; i++)
        sum += others[i].use_ppm;
    return sum;
}

uint32_t gs_lim_correction_overlap(uint32_t old_corr, uint64_t occ_ppm, const struct gs_lim_demand *others, unsigned n,
                                   uint64_t dev_ppm)
{
    uint64_t others_ppm = uses_of(others, n);
    if (occ_ppm < GS_LIM_BUSY_PPM)
        return old_corr; /* we barely ran: nothing to learn */
    uint64_t over = occ_ppm + others_ppm > dev_ppm ? occ_ppm + others_ppm - dev_ppm : 0;
    if (over > occ_ppm)
        over = occ_ppm;
    if (over > others_ppm)
        over = others_ppm;
    uint64_t c = (occ_ppm - over / 2) * GS_LIM_PPM / occ_ppm;
    return corr_ema(old_corr, c);
}

int gs_lim_yields(unsigned weight, uint64_t use_ppm, const struct gs_lim_demand *others, unsigned n)
{
    if (n == 0 || use_ppm <= gs_lim_weight_part(weight, others, n))
        return 0;
    uint64_t sum = weights_of(weight, others, n);
    for (unsigned i = 0; i < n; i++) {
        uint64_t part = (uint64_t)others[i].weight * GS_LIM_PPM / sum;
        if (!others[i].wants_more && others[i].use_ppm >= GS_LIM_SEEN_PPM && others[i].use_ppm < part)
            return 1;
    }
    return 0;
}

int gs_lim_bound_holds(uint64_t dev_ppm, unsigned limit_pct)
{
    if (limit_pct == 0 || limit_pct >= 100)
        return 0;
    return dev_ppm * 100 < (uint64_t)limit_pct * GS_LIM_BOUND_PPM;
}

uint32_t gs_lim_correction_bound(uint32_t old_corr, uint64_t dev_ppm, uint64_t occ_ppm)
{
    uint64_t c = GS_LIM_PPM;
    if (occ_ppm > dev_ppm)
        c = dev_ppm * GS_LIM_PPM / occ_ppm;
    if (c < GS_LIM_MIN_CORR)
        c = GS_LIM_MIN_CORR;
    return corr_step(old_corr, c);
}

uint64_t gs_lim_bound_use(uint64_t charged_ppm, uint64_t dev_ppm, const struct gs_lim_demand *others, unsigned n)
{
    uint64_t theirs = uses_of(others, n);
    uint64_t left = dev_ppm > theirs ? dev_ppm - theirs : 0;
    return charged_ppm < left ? charged_ppm : left;
}

uint64_t gs_lim_device_busy(uint64_t dev_ppm, uint64_t our_use_ppm, const struct gs_lim_demand *others, unsigned n)
{
    uint64_t sum = our_use_ppm + uses_of(others, n);
    if (sum > GS_LIM_PPM)
        sum = GS_LIM_PPM;
    return sum > dev_ppm ? sum : dev_ppm;
}

uint32_t gs_lim_share_target(unsigned weight, uint64_t busy_others_weight)
{
    if (busy_others_weight == 0 || weight == 0)
        return GS_LIM_PPM;
    return (uint32_t)((uint64_t)weight * GS_LIM_PPM / (weight + busy_others_weight));
}

/* Whether other i settles at the water level left / wsum: a capped one
 * always does (at its cap, or at its use if it wants no more); another if
 * it wants no more than it uses, and uses no more than its weight's part
 * of what is left. */
static int settles(const struct gs_lim_demand *o, uint64_t left, uint64_t wsum)
{
    return o->cap_ppm ||
           (!o->wants_more && (unsigned __int128)o->use_ppm * wsum <= (unsigned __int128)left * o->weight);
}

/* What a settled other keeps. */
static uint64_t settled_use(const struct gs_lim_demand *o)
{
    return o->cap_ppm && (o->wants_more || o->use_ppm > o->cap_ppm) ? o->cap_ppm : o->use_ppm;
}

uint32_t gs_lim_share_fill(unsigned weight, const struct gs_lim_demand *others, unsigned n)
{
    /* water-filling: the level only rises as tenants under it settle, so
     * the settled set is recomputed at each level until it stays the same
     * (no per-entry state: any n) */
    uint64_t all = weights_of(weight, others, n), left = GS_LIM_PPM, wsum = all;
    unsigned settled = 0;
    for (;;) {
        uint64_t used = 0, capped = 0, wset = 0;
        unsigned k = 0;
        for (unsigned i = 0; i < n; i++)
            if (settles(&others[i], left, wsum)) {
                *(others[i].cap_ppm ? &capped : &used) += settled_use(&others[i]);
                wset += others[i].weight;
                k++;
            }
        if (k == settled)
            break;
        settled = k;
        used += capped < GS_LIM_PPM - GS_LIM_CAPS_LEAVE_PPM ? capped : GS_LIM_PPM - GS_LIM_CAPS_LEAVE_PPM;
        left = used < GS_LIM_PPM ? GS_LIM_PPM - used : 0;
        wsum = all - wset;
    }
    int caps_want = 0;
    for (unsigned i = 0; i < n; i++)
        caps_want |= others[i].cap_ppm && others[i].wants_more;
    if (settled == n && !caps_want)
        return GS_LIM_PPM; /* nobody else wants more than they use */
    uint64_t mine = left * (weight ? weight : 1) / (wsum ? wsum : 1);
    return (uint32_t)(mine > GS_LIM_PPM ? GS_LIM_PPM : mine);
}

uint64_t gs_lim_oldest_after(const struct gs_lim_sample *s, unsigned n, uint64_t since_us)
{
    uint64_t oldest = UINT64_MAX;
    for (unsigned i = 0; i < n; i++)
        if (s[i].ts_us > since_us && s[i].ts_us < oldest)
            oldest = s[i].ts_us;
    return oldest == UINT64_MAX ? since_us : oldest;
}

uint64_t gs_lim_aggregate(const struct gs_lim_sample *s, unsigned n, uint64_t since_us,
                          int (*is_ours)(uint32_t pid, void *ctx), void *ctx, int64_t *our_ppm, int64_t *others_ppm)
{
    uint64_t newest = since_us;
    uint64_t our_sum = 0, other_sum = 0;
    unsigned stamps = 0;
    for (unsigned i = 0; i < n; i++) {
        if (s[i].ts_us <= since_us)
            continue;
        int seen = 0;
        for (unsigned j = 0; j < i && !seen; j++)
            seen = s[j].ts_us == s[i].ts_us;
        if (!seen)
            stamps++;
        if (s[i].ts_us > newest)
            newest = s[i].ts_us;
        uint32_t u = s[i].sm_util > 100 ? 100 : s[i].sm_util;
        if (is_ours(s[i].pid, ctx))
            our_sum += u;
        else
            other_sum += u;
    }
    if (stamps == 0) {
        *our_ppm = -1;
        *others_ppm = -1;
        return newest;
    }
    uint64_t o = our_sum * 10000U / stamps, x = other_sum * 10000U / stamps;
    *our_ppm = (int64_t)(o > GS_LIM_PPM ? GS_LIM_PPM : o);
    *others_ppm = (int64_t)(x > GS_LIM_PPM ? GS_LIM_PPM : x);
    return newest;
}

/* How the outer run may learn: what it sees of the device and the others. */
struct outer_view {
    unsigned nb;     /* others of the ledger whose GPU time can blur ours */
    int bounded;     /* capped, on a device busy well under the cap */
    int per_process; /* NVML's per-process split measures us */
    int learn;       /* anything to learn at all */
};

static struct outer_view outer_view_of(const struct gs_lim_account *a, const struct gs_outer_in *in)
{
    struct outer_view v;
    int64_t our = in->our_ppm, dev = in->dev_ppm;
    /* a notebook that runs a small kernel now and then is active but does
     * not blur anyone's time (gs_lim_count_busy) */
    v.nb = gs_lim_count_busy(in->dem, in->ndem);
    v.bounded = v.nb > 0 && a->mode == GS_LIM_CAP && dev >= 0 && gs_lim_bound_holds((uint64_t)dev, a->limit_pct);
    /* per-process smUtil adding up to more than the device was busy is
     * occupancy, not a share; beside busy ledger members the split is no
     * measure either (docs/compute.md, "The contention correction") */
    int occupancy_like = our >= 0 && in->others_ppm >= 0 && dev >= 0 && our + in->others_ppm > dev + GS_LIM_BUSY_PPM;
    /* nor beside a ledger member that published too little use to count
     * as busy while NVML saw others busy: it may still time-slice with us
     * (a capped one under the device bound publishes at most U less the
     * others' uses, 0 beside a busier neighbour), and a container capped
     * at 30 beside such a decoder took c 0.53 from the samples and ran at
     * 0.36 on the simulated driver */
    int quiet_member_busy = in->ndem > 0 && in->others_ppm >= GS_LIM_BUSY_PPM;
    v.per_process = our >= 0 && !(our == 0 && in->occ_ppm >= 4 * GS_LIM_BUSY_PPM) && !occupancy_like && v.nb == 0 &&
                    !quiet_member_busy;
    v.learn = !gs_lim_outer_slept(in->interval_ns) && (v.per_process || dev >= 0 || v.nb > 0);
    return v;
}

/* c, and the others' use where only the device's busy time tells it. */
static uint32_t outer_correction(const struct gs_lim_account *a, const struct gs_outer_in *in,
                                 const struct outer_view *v, int64_t *others)
{
    uint32_t old = LD(&a->corr_ppm);
    int64_t dev = in->dev_ppm;
    /* c above 1 is learnt alone (NVML saw more of us than our events);
     * beside busy neighbours every measure below gives at most 1. A run
     * that cannot learn (back from an idle) keeps no more where it sees
     * them, nor in share mode, where a neighbour that has just woken too
     * shows no use yet: on an H200 a decoder of share weight 70 took
     * c = 1.5 from its warm-up alone into a turn beside training 82 s
     * later and waited for tokens 14 times in its first quarter second.
     * A capped container alone keeps it: its cap must not be undercharged */
    if (!v->learn)
        return (v->nb > 0 || a->mode == GS_LIM_SHARE) && old > GS_LIM_PPM ? GS_LIM_PPM : old;
    if (v->per_process) {
        uint32_t c = gs_lim_correction(old, in->our_ppm, in->occ_ppm,
                                       gs_lim_alone_reading(in->our_ppm, in->others_ppm, in->dev_ppm));
        /* others busy in the samples (outside the ledger, or just gone from
         * it) time-slice with us, and the samples credit their slices to
         * us: a decoder-like tenant 0.25 busy read 0.52 beside a neighbour
         * that had just left on the simulated driver. Nor do they lift c
         * past 1 */
        uint32_t most = old > GS_LIM_PPM ? old : GS_LIM_PPM;
        return in->others_ppm >= GS_LIM_BUSY_PPM && c > most ? most : c;
    }
    if (v->bounded)
        return gs_lim_correction_bound(old, (uint64_t)dev, in->occ_ppm);
    /* share containers that do not take turns time-slice: what both counted
     * beyond the device's busy time is split */
    if (v->nb > 0 && a->mode == GS_LIM_SHARE && dev >= 0 &&
        !(gs_lim_throttled(a, in->now) && gs_lim_any_wants_more(in->dem, in->ndem)))
        return gs_lim_correction_overlap(old, in->occ_ppm, in->dem, in->ndem, (uint64_t)dev);
    /* throttled ledger members take turns: nothing overlaps their windows */
    if (v->nb > 0)
        return GS_LIM_PPM;
    /* the device was busy at least as long as NVML says we were */
    int64_t seen_busy = in->our_ppm > dev ? in->our_ppm : dev;
    if (*others < 0)
        *others = dev > (int64_t)in->occ_ppm ? dev - (int64_t)in->occ_ppm : 0;
    return gs_lim_correction_device(old, (uint64_t)seen_busy, in->occ_ppm);
}

/* The use we publish: NVML's figure where it measures us, the device's
 * busy time while we run free (the most we can have used), else what we
 * were charged. */
static uint64_t outer_use(const struct gs_lim_account *a, const struct gs_outer_in *in, const struct outer_view *v,
                          uint32_t corr)
{
    uint64_t charged = in->occ_ppm * gs_lim_corr_of(corr) / GS_LIM_PPM;
    uint64_t use = v->per_process          ? (uint64_t)in->our_ppm
                   : gs_lim_unthrottled(a) ? (uint64_t)(in->dev_ppm > 0 ? in->dev_ppm : 0)
                   : v->bounded            ? gs_lim_bound_use(charged, (uint64_t)in->dev_ppm, in->dem, in->ndem)
                                           : charged;
    return use > GS_LIM_PPM ? GS_LIM_PPM : use;
}

/* Share mode, work-conserving: the others of the ledger by their demand,
 * the GPU users outside it as one more that wants more; beside anyone the
 * container keeps its windows (GS_LIM_SHARE_MEASURED) to measure its use. */
static uint32_t outer_share_target(const struct gs_lim_account *a, const struct gs_outer_in *in)
{
    struct gs_lim_demand all[GS_LIM_MAX_DEMANDS + 1];
    unsigned n = in->ndem < GS_LIM_MAX_DEMANDS ? in->ndem : GS_LIM_MAX_DEMANDS;
    for (unsigned i = 0; i < n; i++)
        all[i] = in->dem[i];
    if (in->outside_weight)
        all[n++] =
            (struct gs_lim_demand){ (uint32_t)(in->outside_weight > 65535 ? 65535 : in->outside_weight), 0, 1, 0 };
    if (n == 0)
        return GS_LIM_PPM;
    uint32_t target = gs_lim_share_fill(a->weight, all, n);
    return target > GS_LIM_SHARE_MEASURED ? GS_LIM_SHARE_MEASURED : target;
}

void gs_lim_outer_decide(const struct gs_lim_account *a, const struct gs_outer_in *in, struct gs_outer_out *out)
{
    struct outer_view v = outer_view_of(a, in);
    int64_t others = in->others_ppm, dev = in->dev_ppm;
    out->fine_probe = v.nb > 0 && !v.bounded;
    /* NVML's per-process time corrects what a coarse measure counts of the
     * CPU gaps around a graph (c, source 1): the fine probes and markers a
     * graph gets cost a CUDA-graph inference load, host-bound, 6 % of its
     * speed on an H200 */
    out->graph_coarse = v.per_process;
    out->corr = outer_correction(a, in, &v, &others);
    uint64_t use = outer_use(a, in, &v, out->corr);
    out->use_ppm = (uint32_t)use;
    /* what others used, held while it fades by a quarter a run: the window
     * length it picks (GS_LIM_CYCLE_NS) must not flap with one interval's
     * noise */
    uint64_t faded = LD(&a->others_ppm) * 3 / 4;
    out->others_ppm = (uint32_t)(others > (int64_t)faded ? others : (int64_t)faded);
    out->dev_ppm = (uint32_t)(dev < 0 ? 0 : dev);
    out->speed = LD(&a->speed_ppm);
    if (in->power_mw >= 0 && in->limit_mw > 0 && dev >= 0)
        out->speed =
            gs_lim_speed(out->speed, (uint64_t)in->power_mw, (uint64_t)in->limit_mw,
                         gs_lim_device_busy((uint64_t)dev, use, in->dem, in->ndem), in->occ_ppm, in->power_exp_milli);
    int share = a->mode == GS_LIM_SHARE;
    /* held back by nobody it never waits, yet it can want more
     * (gs_lim_share_wants_more); nor does one held to a target it never
     * reaches while its work is queued all the time: time-sliced beside
     * a free neighbour, its charge (corrected for the overlap) stayed
     * under its target, and a share pair 30 : 70 on the simulated driver
     * stayed time-sliced at 0.28 / 0.48, the 30 side free every other run */
    out->wants_ns = LD(&a->throttled_ns);
    int held = LD(&a->rate_ppm) < GS_LIM_SHARE_MEASURED;
    if (share && (!held || in->occ_ppm >= GS_LIM_QUEUED_PPM) &&
        gs_lim_share_wants_more(a->weight, use, in->occ_ppm, in->dem, in->ndem))
        out->wants_ns = in->now;
    out->yield = share && in->yield_on && gs_lim_yields(a->weight, use, in->dem, in->ndem);
    out->target = share ? outer_share_target(a, in) : LD(&a->rate_ppm);
}

uint32_t gs_lim_outer_apply(struct gs_lim_account *a, const struct gs_outer_out *out, uint64_t now)
{
    ST(&a->corr_ppm, out->corr);
    ST(&a->speed_ppm, out->speed);
    ST(&a->dev_ppm, out->dev_ppm);
    ST(&a->use_ppm, out->use_ppm);
    ST(&a->others_ppm, out->others_ppm);
    if (a->mode != GS_LIM_SHARE)
        return LD(&a->rate_ppm);
    uint32_t old = __atomic_exchange_n(&a->rate_ppm, out->target, __ATOMIC_RELAXED);
    if (old >= GS_LIM_SHARE_MEASURED && out->target < GS_LIM_SHARE_MEASURED) {
        ST(&a->tokens, (int64_t)0);
        ST(&a->refill_ns, now);
    }
    return old;
}

unsigned gs_lim_trusted_demands(const struct gs_lim_claim *c, unsigned n, int drop_unverified, int64_t dev_ppm,
                                struct gs_lim_demand *out)
{
    struct gs_lim_demand rest = { 0, 0, 0, 0 };
    uint64_t rest_use = 0;
    unsigned k = 0, unverified = 0;
    for (unsigned i = 0; i < n; i++) {
        if (c[i].verified_weight) {
            out[k] = c[i].d;
            out[k].cap_ppm = c[i].verified_cap_ppm;
            out[k++].weight = c[i].verified_weight;
            continue;
        }
        unverified++;
        rest.weight = c[i].d.weight > rest.weight ? c[i].d.weight : rest.weight;
        rest_use += c[i].d.use_ppm;
        rest.wants_more |= c[i].d.wants_more;
    }
    if (unverified == 0 || drop_unverified)
        return k;
    uint64_t seen = dev_ppm >= 0 && (uint64_t)dev_ppm < GS_LIM_PPM ? (uint64_t)dev_ppm : GS_LIM_PPM;
    rest.weight = rest.weight < GS_LIM_DEFAULT_WEIGHT ? rest.weight : GS_LIM_DEFAULT_WEIGHT;
    rest.use_ppm = (uint32_t)(rest_use < seen ? rest_use : seen);
    out[k++] = rest;
    return k;
}
