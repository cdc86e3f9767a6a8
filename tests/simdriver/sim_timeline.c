/* The per-device kernel timeline: processor sharing or round-robin time
 * slices between processes, collectives that spin until their peers on other
 * devices arrive, and the NVML utilisation samples it implies (see
 * sim_timeline.h). */
#include "sim_timeline.h"

#include <math.h>
#include <time.h>

uint64_t sim_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int pending(const struct sim_work *w)
{
    return w->submitted > w->done;
}

int sim_tl_active(const struct sim_state *st, int dev)
{
    int k = 0;
    for (int p = 0; p < SIM_MAX_PROCS; p++)
        if (st->procs[p].pid && pending(&st->procs[p].work[dev]))
            k++;
    return k;
}

/* A segment's slope as bp_add compares it: k processes sharing the device
 * (1 for a slice), at the clock model's speed. */
static uint32_t slope(uint32_t k, uint64_t speed_ppm)
{
    return (uint32_t)(speed_ppm << 8 | k); /* speed < 2^24, k < 256: never STALLED */
}

/* Appends (t, done) to the process's breakpoints; a point that continues a
 * segment of the same slope (same key) replaces the previous one. */
static void bp_add(struct sim_work *w, uint64_t t, uint32_t k, uint64_t seg_start)
{
    if (w->bp_head > 0) {
        uint32_t last = (w->bp_head - 1) % SIM_BP_RING;
        if (w->pad == k && k != 0 && w->bp_t[last] == seg_start && w->bp_head > 1) {
            uint32_t prev = (w->bp_head - 2) % SIM_BP_RING;
            if (w->bp_t[prev] < seg_start) { /* the last point ended a segment of slope 1/k */
                w->bp_t[last] = t;
                w->bp_done[last] = w->done;
                return;
            }
        }
    }
    uint32_t i = w->bp_head % SIM_BP_RING;
    w->bp_t[i] = t;
    w->bp_done[i] = w->done;
    w->bp_head++;
    w->pad = k;
}

double sim_clock(const struct sim_state *st, uint32_t util)
{
    double head = (double)(SIM_POWER_LIMIT_MW - SIM_IDLE_POWER_MW), dyn = (double)st->power_dyn_mw * util / 100;
    return dyn > head ? pow(head / dyn, 1 / SIM_CLOCK_K) : 1.0;
}

uint32_t sim_clock_speed_ppm(const struct sim_state *st, uint32_t util)
{
    return (uint32_t)(pow(sim_clock(st, util) / sim_clock(st, 100), SIM_CLOCK_A) * (double)SIM_PPM);
}

/* The power the model draws at util percent busy, mW. */
static double power_at(const struct sim_state *st, uint32_t util)
{
    return SIM_IDLE_POWER_MW + (double)st->power_dyn_mw * util / 100 * pow(sim_clock(st, util), SIM_CLOCK_K);
}

unsigned int sim_power_now(const struct sim_state *st, int dev)
{
    const struct sim_device *d = &st->dev[dev];
    return (unsigned int)(d->tl_util_head ? power_at(st, d->tl_util_hist[(d->tl_util_head - 1) % SIM_POWER_PERIODS])
                                          : (double)SIM_UNUSED_POWER_MW);
}

unsigned int sim_power_over_span(const struct sim_state *st, int dev)
{
    const struct sim_device *d = &st->dev[dev];
    uint64_t span = (SIM_POWER_SPAN_NS + sim_util_period(st) - 1) / sim_util_period(st);
    uint32_t n = (uint32_t)(span < SIM_POWER_PERIODS ? span : SIM_POWER_PERIODS);
    double sum = 0;
    for (uint32_t k = 1; k <= n; k++)
        sum += k <= d->tl_util_head ? power_at(st, d->tl_util_hist[(d->tl_util_head - k) % SIM_POWER_PERIODS])
                                    : (double)SIM_UNUSED_POWER_MW;
    return (unsigned int)(sum / n);
}

/* What one device ns of the current sample period does. */
static uint64_t speed_of(const struct sim_device *d)
{
    return d->tl_speed_ppm ? d->tl_speed_ppm : SIM_PPM;
}

/* The device ns that `work` ns of work take at speed_ppm, rounded up. */
static uint64_t time_for(uint64_t work, uint64_t speed_ppm)
{
    return (work * SIM_PPM + speed_ppm - 1) / speed_ppm;
}

static void emit_samples(struct sim_state *st, int dev, uint64_t period_end)
{
    struct sim_device *d = &st->dev[dev];
    uint64_t period = sim_util_period(st);
    uint64_t dev_pct = (d->tl_period_busy * 100 + period / 2) / period;
    if (st->mps && d->tl_period_busy) { /* the server's sample only: its clients' time is its own */
        struct sim_util_sample *s = &d->samples[d->tl_sample_head % SIM_UTIL_SAMPLES];
        *s = (struct sim_util_sample){ SIM_MPS_SERVER_PID, (uint32_t)(dev_pct > 100 ? 100 : dev_pct),
                                       period_end / 1000 };
        d->tl_sample_head++;
    }
    for (int p = 0; p < SIM_MAX_PROCS; p++) {
        struct sim_work *w = &st->procs[p].work[dev];
        if (!st->procs[p].pid || w->period_busy == 0 || st->mps) {
            w->period_busy = 0;
            continue;
        }
        uint64_t pct = (w->period_busy * 100 + period / 2) / period;
        if (st->nvml_snapshot)
            pct = p == d->tl_last_proc ? dev_pct : 0;
        struct sim_util_sample *s = &d->samples[d->tl_sample_head % SIM_UTIL_SAMPLES];
        s->pid = (uint32_t)st->procs[p].pid;
        s->sm_util = (uint32_t)(pct > 100 ? 100 : pct);
        s->ts_us = period_end / 1000;
        d->tl_sample_head++;
        w->period_busy = 0;
    }
    d->tl_last_util = (uint32_t)dev_pct;
    d->tl_util_hist[d->tl_util_head++ % SIM_POWER_PERIODS] = (uint8_t)(dev_pct > 100 ? 100 : dev_pct);
    d->tl_speed_ppm = sim_clock_speed_ppm(st, d->tl_last_util);
    d->tl_period_busy = 0;
    d->tl_period_start = period_end;
}

#define STALLED 0xffffffffU /* bp_add's slope key of a process waiting for its slice */

/* With time slices (GPUSLICE_SIM_TIMESLICE_US): the process whose slice runs
 * now, or -1 when none has work. A slice lasts until its end or until the
 * process's queue empties; then the next process with work (round robin
 * from the owner) gets one. A process alone keeps its slices running, so a
 * newcomer waits for the current one to end, as on the real device. */
static int slice_owner(struct sim_state *st, int dev, uint64_t t)
{
    struct sim_device *d = &st->dev[dev];
    uint64_t slice = (uint64_t)st->timeslice_us * 1000;
    int o = d->tl_owner;
    if (o >= 0 && st->procs[o].pid && pending(&st->procs[o].work[dev])) {
        if (t < d->tl_slice_end)
            return o;
        if (sim_tl_active(st, dev) == 1) { /* alone: its next slice */
            d->tl_slice_end += slice * ((t - d->tl_slice_end) / slice + 1);
            return o;
        }
    }
    for (int i = 1; i <= SIM_MAX_PROCS; i++) {
        int p = ((o < 0 ? 0 : o) + i) % SIM_MAX_PROCS;
        if (st->procs[p].pid && pending(&st->procs[p].work[dev])) {
            d->tl_owner = p;
            d->tl_slice_end = t + slice;
            return p;
        }
    }
    return -1;
}

/* Whether the process's queue is in an idle gap now (it passes without a
 * kernel); drops the gaps it has passed. */
static int in_gap(struct sim_work *w)
{
    while (w->gap_head != w->gap_tail) {
        const struct sim_gap *g = &w->gap[w->gap_head % SIM_GAP_QUEUE];
        if (w->done < g->at + g->ns)
            return w->done >= g->at;
        w->gap_head++;
    }
    return 0;
}

/* Work the process can do before its queue empties, reaches its next
 * collective or enters or leaves a gap: 0 while it spins at a collective
 * (or has no work). */
static uint64_t room(const struct sim_work *w)
{
    uint64_t end = w->submitted;
    if (w->coll_head != w->coll_tail && w->coll[w->coll_head % SIM_COLL_QUEUE].at < end)
        end = w->coll[w->coll_head % SIM_COLL_QUEUE].at;
    for (uint32_t i = w->gap_head; i != w->gap_tail; i++) {
        const struct sim_gap *g = &w->gap[i % SIM_GAP_QUEUE];
        uint64_t edge = w->done < g->at ? g->at : g->at + g->ns;
        if (edge > w->done) {
            end = edge < end ? edge : end;
            break;
        }
    }
    return end > w->done ? end - w->done : 0;
}

/* With time slices: where the segment from t ends by itself, not past limit:
 * the owner's slice ends, or its queue empties or reaches a collective. A
 * spinning owner keeps its slice: its queue is not empty. */
static uint64_t sliced_end(struct sim_state *st, int dev, uint64_t t, uint64_t limit)
{
    int o = slice_owner(st, dev, t);
    if (o < 0)
        return limit;
    uint64_t end = st->dev[dev].tl_slice_end < limit ? st->dev[dev].tl_slice_end : limit;
    uint64_t r = room(&st->procs[o].work[dev]), speed = speed_of(&st->dev[dev]);
    uint64_t takes = time_for(r, speed);
    return r && takes < end - t ? t + takes : end;
}

/* One segment [t, end] of a time-sliced device: the owner runs (or spins) at
 * full speed, every other process with work waits. */
static void sliced_apply(struct sim_state *st, int dev, uint64_t t, uint64_t end)
{
    struct sim_device *d = &st->dev[dev];
    int o = slice_owner(st, dev, t);
    if (o < 0)
        return;
    uint64_t dt = end - t;
    for (int p = 0; p < SIM_MAX_PROCS; p++) {
        struct sim_work *w = &st->procs[p].work[dev];
        if (p == o || !st->procs[p].pid || !pending(w))
            continue;
        bp_add(w, end, STALLED, t);
    }
    struct sim_work *ow = &st->procs[o].work[dev];
    uint64_t r = room(ow), speed = speed_of(d), gain = dt * speed / SIM_PPM;
    int spins = r == 0, idle = in_gap(ow);
    ow->done += gain < r && dt < time_for(r, speed) ? gain : r;
    bp_add(ow, end, spins ? STALLED : slope(1, speed), t);
    if (idle)
        return; /* a gap inside a graph: no kernel ran */
    ow->busy += dt;
    ow->period_busy += dt;
    d->tl_last_proc = o;
    d->tl_busy_ns += dt;
    d->tl_period_busy += dt;
}

/* Processor sharing from t: k processes with work (spinning ones included)
 * each progress at eff/100/k; the one with the least room runs out of it at
 * `empties`. */
struct ps_plan {
    uint32_t k;
    uint64_t eff;     /* ppm of full speed the k progress at together: switches and the clock */
    uint64_t minrem;  /* least room of a process that progresses; UINT64_MAX: all spin */
    uint64_t empties; /* when that room runs out; UINT64_MAX: never */
};

static struct ps_plan ps_plan(const struct sim_state *st, int dev, uint64_t t)
{
    struct ps_plan s = { 0, 100, UINT64_MAX, UINT64_MAX };
    for (int p = 0; p < SIM_MAX_PROCS; p++) {
        const struct sim_work *w = &st->procs[p].work[dev];
        if (!st->procs[p].pid || !pending(w))
            continue;
        s.k++;
        uint64_t r = room(w);
        if (r && r < s.minrem)
            s.minrem = r;
    }
    s.eff = (s.k > 1 ? 100 - st->switch_loss_pct : 100) * speed_of(&st->dev[dev]) / 100;
    if (s.minrem != UINT64_MAX)
        s.empties = t + (uint64_t)(((unsigned __int128)s.minrem * s.k * SIM_PPM + s.eff - 1) / s.eff);
    return s;
}

/* One segment [t, end] of a processor-shared device. A spinning process takes
 * its share of the device (and of its busy time) but does no work. */
static void ps_apply(struct sim_state *st, int dev, uint64_t t, uint64_t end)
{
    struct sim_device *d = &st->dev[dev];
    struct ps_plan s = ps_plan(st, dev, t);
    int completes = end == s.empties;
    uint64_t dt = end - t, share = dt / s.k, gain = share * s.eff / SIM_PPM;
    int ran = 0;
    for (int p = 0; p < SIM_MAX_PROCS; p++) {
        struct sim_work *w = &st->procs[p].work[dev];
        if (!st->procs[p].pid || !pending(w))
            continue;
        uint64_t r = room(w);
        int idle = in_gap(w);
        w->done += completes && r == s.minrem ? r : (gain < r ? gain : r);
        bp_add(w, end, r ? slope(s.k, speed_of(d)) : STALLED, t);
        if (idle)
            continue; /* a gap inside a graph: no kernel of its ran */
        ran = 1;
        d->tl_last_proc = p;
        w->busy += share;
        w->period_busy += share;
    }
    if (ran) {
        d->tl_busy_ns += dt;
        d->tl_period_busy += dt;
    }
}

/* Where a busy device's segment from t ends by itself, not past limit: a
 * sample period, a slice or a process's room ends. */
static uint64_t busy_end(struct sim_state *st, int dev, uint64_t t, uint64_t limit)
{
    uint64_t pend = st->dev[dev].tl_period_start + sim_util_period(st);
    if (pend < limit)
        limit = pend;
    if (st->timeslice_us)
        return sliced_end(st, dev, t, limit);
    uint64_t e = ps_plan(st, dev, t).empties;
    return e < limit ? e : limit;
}

static void busy_apply(struct sim_state *st, int dev, uint64_t t, uint64_t end)
{
    struct sim_device *d = &st->dev[dev];
    if (st->timeslice_us)
        sliced_apply(st, dev, t, end);
    else
        ps_apply(st, dev, t, end);
    d->tl_last_ns = end;
    if (end == d->tl_period_start + sim_util_period(st))
        emit_samples(st, dev, end);
}

/* A device with no work stays idle up to now (work comes only from a
 * submission, which advances first): its sample periods end empty, and a
 * run of them is skipped at once. */
static void idle_advance(struct sim_state *st, int dev, uint64_t now)
{
    struct sim_device *d = &st->dev[dev];
    uint64_t period = sim_util_period(st);
    while (d->tl_period_start + period <= now) {
        uint64_t t = d->tl_period_start + period;
        emit_samples(st, dev, t);
        if (now - t > period) {
            uint64_t skipped = (now - t) / period;
            d->tl_period_start += skipped * period;
            for (uint64_t k = 0; k < skipped && k < SIM_POWER_PERIODS; k++)
                d->tl_util_hist[d->tl_util_head++ % SIM_POWER_PERIODS] = 0;
            d->tl_last_util = 0;
            d->tl_speed_ppm = sim_clock_speed_ppm(st, 0);
        }
    }
    d->tl_last_ns = now;
}

/* Releases collective (group, seq) once `ranks` processes spin at it. */
static void release_if_complete(struct sim_state *st, uint32_t group, uint32_t seq, uint32_t ranks)
{
    uint32_t n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int p = 0; p < SIM_MAX_PROCS; p++)
            for (uint32_t dev = 0; st->procs[p].pid && dev < st->ndevices; dev++) {
                struct sim_work *w = &st->procs[p].work[dev];
                const struct sim_coll *c = &w->coll[w->coll_head % SIM_COLL_QUEUE];
                if (w->coll_head == w->coll_tail || !c->arrived || c->group != group || c->seq != seq)
                    continue;
                if (pass == 0)
                    n++;
                else if (n >= ranks)
                    w->coll_head++; /* released: its own work runs next */
            }
}

/* Marks every process whose queue has reached its next collective as
 * arrived there, and releases the collectives all of whose ranks have. */
static void settle_collectives(struct sim_state *st)
{
    for (int p = 0; p < SIM_MAX_PROCS; p++)
        for (uint32_t dev = 0; st->procs[p].pid && dev < st->ndevices; dev++) {
            struct sim_work *w = &st->procs[p].work[dev];
            struct sim_coll *c = &w->coll[w->coll_head % SIM_COLL_QUEUE];
            if (w->coll_head == w->coll_tail || c->arrived || w->done < c->at)
                continue;
            c->arrived = 1;
            release_if_complete(st, c->group, c->seq, c->ranks);
        }
}

/* The earliest point a busy device's timeline is computed to (idle devices
 * are brought up to now on the way), or now when none is behind. */
static uint64_t lockstep_start(struct sim_state *st, uint64_t now)
{
    uint64_t t = now;
    for (uint32_t i = 0; i < st->ndevices; i++) {
        uint64_t last = st->dev[i].tl_last_ns;
        if (last == 0 || last >= now)
            continue; /* not started, or already there */
        if (sim_tl_active(st, (int)i) == 0)
            idle_advance(st, (int)i, now);
        else if (last < t)
            t = last;
    }
    return t;
}

/* Where the lockstep segment from t ends: the first point where a busy
 * device's own segment ends, or a device ahead of t is reached. */
static uint64_t lockstep_end(struct sim_state *st, uint64_t t, uint64_t now)
{
    uint64_t end = now;
    for (uint32_t i = 0; i < st->ndevices; i++) {
        uint64_t last = st->dev[i].tl_last_ns;
        if (last == 0 || last >= now || sim_tl_active(st, (int)i) == 0)
            continue;
        uint64_t e = last > t ? last : busy_end(st, (int)i, t, now);
        end = e < end ? e : end;
    }
    return end;
}

void sim_tl_advance(struct sim_state *st, int dev, uint64_t now)
{
    struct sim_device *d = &st->dev[dev];
    if (d->tl_last_ns == 0) {
        d->tl_last_ns = now;
        d->tl_period_start = now;
    }
    /* A collective's release on one device depends on the other devices'
     * timelines: all advance together, segment by segment. */
    for (;;) {
        uint64_t t = lockstep_start(st, now);
        if (t >= now)
            break;
        uint64_t end = lockstep_end(st, t, now);
        for (uint32_t i = 0; i < st->ndevices; i++)
            if (st->dev[i].tl_last_ns == t && sim_tl_active(st, (int)i) > 0)
                busy_apply(st, (int)i, t, end);
        settle_collectives(st); /* releases happen when the last rank arrives */
    }
}

void sim_tl_submit(struct sim_state *st, int proc, int dev, uint64_t ns, uint64_t now)
{
    sim_tl_advance(st, dev, now);
    struct sim_work *w = &st->procs[proc].work[dev];
    if (!pending(w)) {
        /* idle until now: the next segment starts here (never before the
         * timeline, which another process may have computed past our now) */
        uint32_t i = w->bp_head % SIM_BP_RING;
        w->bp_t[i] = st->dev[dev].tl_last_ns;
        w->bp_done[i] = w->done;
        w->bp_head++;
        w->pad = 0;
    }
    w->submitted += ns;
}

int sim_tl_submit_graph(struct sim_state *st, int proc, int dev, uint64_t kernel_ns, uint32_t count, uint64_t gap_ns,
                        uint64_t now)
{
    sim_tl_advance(st, dev, now);
    struct sim_work *w = &st->procs[proc].work[dev];
    uint32_t gaps = gap_ns && count > 1 ? count - 1 : 0;
    if (gaps > SIM_GAP_QUEUE - (w->gap_tail - w->gap_head))
        return -1;
    for (uint32_t i = 0; i < count; i++) {
        sim_tl_submit(st, proc, dev, kernel_ns, now);
        if (i < gaps) {
            w->gap[w->gap_tail++ % SIM_GAP_QUEUE] = (struct sim_gap){ .at = w->submitted, .ns = gap_ns };
            sim_tl_submit(st, proc, dev, gap_ns, now);
        }
    }
    return 0;
}

int sim_tl_collective(struct sim_state *st, int proc, int dev, uint64_t ns, uint32_t group, uint32_t ranks,
                      uint64_t now)
{
    sim_tl_advance(st, dev, now);
    struct sim_work *w = &st->procs[proc].work[dev];
    if (w->coll_tail - w->coll_head >= SIM_COLL_QUEUE)
        return -1;
    w->coll[w->coll_tail % SIM_COLL_QUEUE] = (struct sim_coll){
        .at = w->submitted, .group = group, .ranks = ranks, .seq = st->procs[proc].coll_next[group]++
    };
    w->coll_tail++;
    sim_tl_submit(st, proc, dev, ns > SIM_COLL_MIN_NS ? ns : SIM_COLL_MIN_NS, now);
    settle_collectives(st); /* an idle queue reaches it at once */
    return 0;
}

uint64_t sim_tl_event_mark(struct sim_state *st, int proc, int dev, uint64_t now)
{
    sim_tl_advance(st, dev, now);
    struct sim_work *w = &st->procs[proc].work[dev];
    if (st->timeslice_us && !pending(w) && sim_tl_active(st, dev) > 0)
        sim_tl_submit(st, proc, dev, SIM_EVENT_WORK_NS, now);
    return w->submitted;
}

uint64_t sim_tl_eta(const struct sim_state *st, int dev, uint64_t work)
{
    uint32_t k = (uint32_t)sim_tl_active(st, dev);
    if (k == 0)
        k = 1;
    return time_for(work * k, speed_of(&st->dev[dev]));
}

uint64_t sim_tl_done_time(const struct sim_work *w, uint64_t target)
{
    uint32_t n = w->bp_head < SIM_BP_RING ? w->bp_head : SIM_BP_RING;
    uint32_t first = w->bp_head - n;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t i = (first + j) % SIM_BP_RING;
        if (w->bp_done[i] < target)
            continue;
        if (j == 0)
            return w->bp_t[i]; /* older than the ring: the best we know */
        uint32_t h = (first + j - 1) % SIM_BP_RING;
        uint64_t dd = w->bp_done[i] - w->bp_done[h], dt = w->bp_t[i] - w->bp_t[h];
        if (dd == 0)
            return w->bp_t[h];
        return w->bp_t[h] + (uint64_t)((unsigned __int128)(target - w->bp_done[h]) * dt / dd);
    }
    return n ? w->bp_t[(w->bp_head - 1) % SIM_BP_RING] : 0;
}
