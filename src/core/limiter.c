/* The compute limiter's token account and its windows: tokens, windows,
 * busy intervals and their charge; see limiter.h and docs/compute.md. */
#include "limiter_internal.h"

/* The rate a container starts from: the whole GPU in share mode (its
 * target comes with the outer loop), its cap under windows. */
static uint32_t start_rate(enum gs_lim_mode mode, unsigned limit_pct)
{
    return mode == GS_LIM_SHARE ? GS_LIM_PPM : gs_lim_cap_rate(limit_pct);
}

/* Stores the configuration (the claimant, or one taking over from it). */
static void setup_account(struct gs_lim_account *a, enum gs_lim_mode mode, unsigned limit_pct, unsigned weight,
                          uint64_t now)
{
    a->mode = (uint8_t)mode;
    a->limit_pct = limit_pct;
    a->weight = (uint16_t)(weight > 65535 ? 65535 : weight);
    a->corr_ppm = 0;  /* not learnt yet: charged as 1 */
    a->speed_ppm = 0; /* not learnt yet: charged as 1 */
    ST(&a->dev_ppm, GS_LIM_DEV_UNREAD);
    uint32_t rate = start_rate(mode, limit_pct);
    ST(&a->rate_ppm, rate);
    /* a new container was idle until now: it starts with what idle time
     * banks, so that its first window, charged before c is learnt, does not
     * put it in debt (a decoder-like tenant's first 10 us kernel, queued
     * behind a capped neighbour's slice, cost it 1 ms of debt, then 150 ms
     * of turns while it counted as held back) */
    ST(&a->tokens, gs_lim_burst_of(rate));
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
    /* clocks ahead of ours by more than a run's lag are from an earlier
     * boot (a state directory on disk): each stamp would wait for a clock
     * this boot has not reached, with no outer run, no charge of a busy
     * span and no refill meanwhile. As long gone as can be */
    int earlier_boot = last > now + 4 * GS_LIM_OUTER_NS;
    if (earlier_boot) {
        ST(&a->refill_ns, (uint64_t)0);
        ST(&a->union_end_ns, (uint64_t)0);
        ST(&a->throttled_ns, (uint64_t)0);
        ST(&a->woke_ns, (uint64_t)0);
    }
    if (earlier_boot || now > last + 4 * GS_LIM_OUTER_NS) {
        /* left over from processes long gone: start afresh (a share-mode
         * target learnt then says nothing about now, nor a cap's running
         * free), but what the container owes stays owed, refilled at the
         * start rate for the time since: reset to a full burst, a process
         * that ran up 2 s of debt under cap 10 and died let the next one,
         * 1.5 s later, launch at once (found in a review) */
        ST(&a->rate_ppm, start_rate((enum gs_lim_mode)a->mode, a->limit_pct));
        gs_lim_refill(a, now, 1);
        ST(&a->outer_last_ns, now);
        ST(&a->outer_next_ns, now);
        ST(&a->nvml_seen_us, (uint64_t)0);
        ST(&a->dev_ppm, GS_LIM_DEV_UNREAD);
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
    if (f->undrained) {
        /* its end is unknown (the work may wait for a flag the host writes
         * after this launch): fail closed, busy until the drain gave up,
         * and no GPU time per launch learnt from it */
        *measured = 0;
        return f->drained_ns > f->close_ns ? f->drained_ns : f->close_ns;
    }
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
    int64_t burst = gs_lim_burst_of(rate) * (int64_t)(periods ? periods : 1);
    int64_t t = ADD(&a->tokens, add);
    while (t > burst && !__atomic_compare_exchange_n(&a->tokens, &t, burst, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* GPU ns charged per ns of occupancy, in ppm: c x s. */
static uint64_t charge_rate(const struct gs_lim_account *a)
{
    uint64_t c = gs_lim_corr_of(LD(&a->corr_ppm)), sp = gs_lim_speed_of(LD(&a->speed_ppm));
    if (c < GS_LIM_MIN_CORR)
        c = GS_LIM_MIN_CORR;
    if (c > GS_LIM_MAX_CORR)
        c = GS_LIM_MAX_CORR;
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
         * (the power correction, time-sliced overlap), never a wait. A cap
         * that starts to run free as this window opens keeps what it owes:
         * its free run's tokens start from it */
        if (a->mode == GS_LIM_SHARE)
            __atomic_store_n(&a->tokens, (int64_t)0, __ATOMIC_RELAXED);
        t = 0;
    }
    if (t < 0 && !in_slot) {
        uint64_t wait = (uint64_t)((unsigned __int128)(uint64_t)(-t) * GS_LIM_PPM / rate);
        return wait ? wait : 1;
    }
    uint64_t period = GS_LIM_DEFAULT_PERIOD_NS;
    int beside_others = LD(&a->others_ppm) >= GS_LIM_BUSY_PPM;
    uint64_t quantum = beside_others ? (uint64_t)gs_lim_burst_of(rate) / 2
                                     : (uint64_t)((unsigned __int128)GS_LIM_CYCLE_NS * rate / GS_LIM_PPM);
    uint64_t gpu = t > 0 && (uint64_t)t > quantum ? (uint64_t)t : quantum;
    if (in_slot) {
        /* the slot is the limit: what the account owes beyond one period
         * is forgiven (charges that overlapped another container's tail
         * must not cost later slots), and the window may last the slot */
        int64_t floor = -gs_lim_burst_of(rate);
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
    if (credit < gs_lim_burst_of(rate) / 2)
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
