/* The per-device kernel timeline: processor sharing or round-robin time
 * slices between processes, and the NVML utilisation samples it implies
 * (see sim_timeline.h). */
#include "sim_timeline.h"

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

/* Appends (t, done) to the process's breakpoints; a point that continues a
 * segment of the same slope (same k) replaces the previous one. */
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

static void emit_samples(struct sim_state *st, int dev, uint64_t period_end)
{
    struct sim_device *d = &st->dev[dev];
    uint64_t dev_pct = (d->tl_period_busy * 100 + SIM_UTIL_PERIOD_NS / 2) / SIM_UTIL_PERIOD_NS;
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
        uint64_t pct = (w->period_busy * 100 + SIM_UTIL_PERIOD_NS / 2) / SIM_UTIL_PERIOD_NS;
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

/* One segment [t, up to seg_end] of a time-sliced device: the owner runs at
 * full speed, every other process with work waits. Returns its end. */
static uint64_t advance_sliced(struct sim_state *st, int dev, uint64_t t, uint64_t seg_end)
{
    struct sim_device *d = &st->dev[dev];
    int o = slice_owner(st, dev, t);
    if (o < 0)
        return seg_end;
    struct sim_work *ow = &st->procs[o].work[dev];
    uint64_t rem = ow->submitted - ow->done;
    if (d->tl_slice_end < seg_end)
        seg_end = d->tl_slice_end;
    if (rem < seg_end - t)
        seg_end = t + rem; /* its queue empties: the next one's slice */
    uint64_t dt = seg_end - t;
    for (int p = 0; p < SIM_MAX_PROCS; p++) {
        struct sim_work *w = &st->procs[p].work[dev];
        if (p == o || !st->procs[p].pid || !pending(w))
            continue;
        bp_add(w, seg_end, STALLED, t);
    }
    ow->done += dt;
    ow->busy += dt;
    ow->period_busy += dt;
    bp_add(ow, seg_end, 1, t);
    d->tl_last_proc = o;
    d->tl_busy_ns += dt;
    d->tl_period_busy += dt;
    return seg_end;
}

void sim_tl_advance(struct sim_state *st, int dev, uint64_t now)
{
    struct sim_device *d = &st->dev[dev];
    if (d->tl_last_ns == 0) {
        d->tl_last_ns = now;
        d->tl_period_start = now;
        return;
    }
    uint64_t t = d->tl_last_ns;
    while (t < now) {
        uint64_t pend = d->tl_period_start + SIM_UTIL_PERIOD_NS;
        uint64_t seg_end = now < pend ? now : pend;
        if (st->timeslice_us) {
            t = advance_sliced(st, dev, t, seg_end);
            if (t == pend)
                emit_samples(st, dev, pend);
            if (t == pend && sim_tl_active(st, dev) == 0 && now - t > SIM_UTIL_PERIOD_NS) {
                uint64_t skip = (now - t) / SIM_UTIL_PERIOD_NS;
                d->tl_period_start += skip * SIM_UTIL_PERIOD_NS;
                d->tl_last_util = 0;
                t = d->tl_period_start;
            }
            continue;
        }
        uint32_t k = 0;
        uint64_t minrem = UINT64_MAX;
        for (int p = 0; p < SIM_MAX_PROCS; p++) {
            const struct sim_work *w = &st->procs[p].work[dev];
            if (st->procs[p].pid && pending(w)) {
                k++;
                if (w->submitted - w->done < minrem)
                    minrem = w->submitted - w->done;
            }
        }
        /* progress per ns of device time: 1 alone, less the switches' cost when sliced */
        uint64_t eff = k > 1 ? 100 - st->switch_loss_pct : 100;
        int completes = 0;
        if (k && minrem <= (seg_end - t) * eff / 100 / k) {
            seg_end = t + (minrem * k * 100 + eff - 1) / eff; /* the shortest queue empties here */
            if (seg_end > pend)
                seg_end = pend;
            else
                completes = 1;
        }
        uint64_t dt = seg_end - t;
        if (k) {
            uint64_t share = dt / k, gain = share * eff / 100;
            for (int p = 0; p < SIM_MAX_PROCS; p++) {
                struct sim_work *w = &st->procs[p].work[dev];
                if (!st->procs[p].pid || !pending(w))
                    continue;
                uint64_t rem = w->submitted - w->done;
                uint64_t prog = completes && rem == minrem ? rem : (gain < rem ? gain : rem);
                w->done += prog;
                d->tl_last_proc = p;
                w->busy += share;
                w->period_busy += share;
                bp_add(w, seg_end, k, t);
            }
            d->tl_busy_ns += dt;
            d->tl_period_busy += dt;
        }
        t = seg_end;
        if (t == pend) {
            emit_samples(st, dev, pend);
            if (k == 0 && now - t > SIM_UTIL_PERIOD_NS) {
                /* idle: skip the empty periods at once */
                uint64_t skip = (now - t) / SIM_UTIL_PERIOD_NS;
                d->tl_period_start += skip * SIM_UTIL_PERIOD_NS;
                d->tl_last_util = 0;
                t = d->tl_period_start;
            }
        }
    }
    d->tl_last_ns = now;
}

void sim_tl_submit(struct sim_state *st, int proc, int dev, uint64_t ns, uint64_t now)
{
    sim_tl_advance(st, dev, now);
    struct sim_work *w = &st->procs[proc].work[dev];
    if (!pending(w)) {
        /* idle until now: the next segment starts here */
        uint32_t i = w->bp_head % SIM_BP_RING;
        w->bp_t[i] = now;
        w->bp_done[i] = w->done;
        w->bp_head++;
        w->pad = 0;
    }
    w->submitted += ns;
}

uint64_t sim_tl_event_mark(struct sim_state *st, int proc, int dev, uint64_t now)
{
    sim_tl_advance(st, dev, now);
    struct sim_work *w = &st->procs[proc].work[dev];
    if (st->timeslice_us && !pending(w) && sim_tl_active(st, dev) > 0)
        sim_tl_submit(st, proc, dev, SIM_EVENT_WORK_NS, now);
    return w->submitted;
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
