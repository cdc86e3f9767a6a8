/* The contention correction c and the speed s: how much of our counted
 * busy time was GPU time of ours (docs/compute.md, "The contention
 * correction", "The power correction"). */
#include "limiter_internal.h"

#include <math.h>

/* A correction's step from old (0: not learnt) towards the measure c:
 * half-way, or all the way for the first measure where c is measured
 * (NVML's time for our pids, the device's busy time bounding ours). The
 * estimates from the device's busy time alone and from the overlap split
 * step half-way from 1 even then: taken whole, their first estimate (0.50
 * for the side capped at 30 of two GPU-bound containers) left the side
 * capped at 70 at 0.665 over its next 5 s in tests/unit/test_limiter_loop.c's
 * model, 0.686 stepping half-way. */
static uint32_t corr_step(uint32_t old_corr, uint64_t c)
{
    return old_corr ? (uint32_t)((old_corr + c) / 2) : (uint32_t)c;
}

static uint32_t corr_ema(uint32_t old_corr, uint64_t c)
{
    return (uint32_t)((gs_lim_corr_of(old_corr) + c) / 2);
}

int gs_lim_nobody_else(int64_t our_ppm, int64_t others_ppm, int64_t dev_ppm)
{
    /* the device less busy than our samples say is their periods not
     * lining up with its reading, not someone else hidden from them; and
     * others' samples beyond the device's busy time are from before it
     * (a neighbour's last ones, after it left) */
    return our_ppm >= 0 && others_ppm >= 0 && dev_ppm >= 0 && dev_ppm <= our_ppm + GS_LIM_BUSY_PPM &&
           (others_ppm < GS_LIM_BUSY_PPM || others_ppm > dev_ppm + GS_LIM_BUSY_PPM);
}

int gs_lim_alone_reading(int64_t our_ppm, int64_t others_ppm, int64_t dev_ppm)
{
    return our_ppm >= GS_LIM_BUSY_PPM && others_ppm < GS_LIM_BUSY_PPM &&
           gs_lim_nobody_else(our_ppm, others_ppm, dev_ppm);
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
    /* nor is c learnt from less than GS_LIM_BUSY_PPM of our time: NVML's
     * samples lag a container's start, and an H200 gave a decoder its
     * first one at 0 % (c 0.05 taken whole, one outer interval charged a
     * twentieth of its busy time). Taken half-way from 1 instead, a
     * decoder capped at 30 whose neighbour had left (c forgotten) read
     * 0.04 of 0.30 counted and was held for tokens at c 0.57 through the
     * next outer run; not learnt, its CPU gaps are not charged meanwhile */
    if (old_corr == 0 && our_ppm < GS_LIM_BUSY_PPM)
        return 0;
    /* a c learnt beside others, or from a turn's first reading that NVML
     * credited a neighbour's time-slice to us, falls whole once a reading
     * alone says it is half as much or less: stepping half-way, a decoder
     * capped at 30 alone after such a reading (c 1, its true 0.14) was held
     * for tokens through 3-4 outer runs on an H200. A smaller fall still
     * steps half-way, so that the readings' noise cannot bias c low */
    if (alone && c * 2 <= old_corr)
        return (uint32_t)c;
    /* a first measure above 1 (NVML saw more of us than our events) steps
     * half-way from 1: in a steady load's first runs the samples' period and
     * our interval do not line up. Taken whole, a GPU-bound matmul capped at
     * 70 on an H100 took c 1.08 from its first reading (0.66 NVML against
     * 0.61 counted; its twin 0.96) and did 0.643 of the device's work in its
     * first second against 0.710 (p / u 0.712) */
    if (old_corr == 0 && c > GS_LIM_PPM)
        return (uint32_t)((GS_LIM_PPM + c) / 2);
    return corr_step(old_corr, c);
}

int gs_lim_device_reading_stale(uint64_t dev_ppm, uint64_t occ_ppm)
{
    return dev_ppm < GS_LIM_BUSY_PPM && occ_ppm >= 4 * GS_LIM_BUSY_PPM;
}

uint32_t gs_lim_correction_device(uint32_t old_corr, uint64_t dev_ppm, uint64_t occ_ppm)
{
    if (occ_ppm > GS_LIM_PPM)
        occ_ppm = GS_LIM_PPM;
    if (dev_ppm > GS_LIM_PPM)
        dev_ppm = GS_LIM_PPM;
    if (occ_ppm < GS_LIM_BUSY_PPM)
        return old_corr; /* we barely ran: nothing to learn */
    /* taken as a measure, a stale reading set c to 1 as learnt, and the
     * first real measure then came half-way, not whole (gs_lim_correction) */
    if (gs_lim_device_reading_stale(dev_ppm, occ_ppm))
        return old_corr;
    /* nor does a reading under GS_LIM_BUSY_PPM teach a c not yet learnt:
     * it cannot tell our CPU gaps from our kernels (c 1 at best). A capped
     * decoder's first outer run, late on a loaded 2-core CI machine, read
     * the device idle before NVML's first sample with 0.05-0.2 occupancy
     * counted, took c 1 as learnt, and charged its 40 us gaps at 1 until
     * NVML measured it two runs later: 0.29-0.33 s of waits under cap 30 */
    if (old_corr == 0 && dev_ppm < GS_LIM_BUSY_PPM)
        return old_corr;
    uint64_t idle = GS_LIM_PPM - occ_ppm;
    /* cannot see the others: relax towards 1 (as an unlearnt c is), from
     * above too (a c learnt alone past 1 wrapped to hundreds) */
    if (idle < GS_LIM_BUSY_PPM) {
        if (old_corr > GS_LIM_PPM)
            return old_corr - (old_corr - GS_LIM_PPM) / 16;
        return old_corr ? old_corr + (GS_LIM_PPM - old_corr) / 16 : 0;
    }
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

uint64_t gs_lim_power_run(uint64_t busy_ppm, uint64_t interval_ns)
{
    uint64_t us = interval_ns / 1000;
    return (busy_ppm > GS_LIM_PPM ? GS_LIM_PPM : busy_ppm) << 32 | (us > UINT32_MAX ? UINT32_MAX : us);
}

/* Adds busy over up to ns of what the span has left; the time taken. */
static uint64_t span_take(unsigned __int128 *sum, uint64_t busy_ppm, uint64_t ns, uint64_t left)
{
    uint64_t take = ns < left ? ns : left;
    *sum += (unsigned __int128)(busy_ppm > GS_LIM_PPM ? GS_LIM_PPM : busy_ppm) * take;
    return take;
}

/* The k-th newest of the n runs recorded (k < n, k < GS_LIM_POWER_RUNS),
 * and the two halves gs_lim_power_run packed into it. */
static uint64_t run_back(const struct gs_lim_account *a, uint32_t n, uint32_t k)
{
    return LD(&a->power_runs[(n - 1 - k) % GS_LIM_POWER_RUNS]);
}

static uint64_t run_busy_ppm(uint64_t run)
{
    return run >> 32;
}

static uint64_t run_ns(uint64_t run)
{
    return (run & UINT32_MAX) * 1000;
}

void gs_lim_power_record(struct gs_lim_account *a, uint64_t run)
{
    uint32_t n = LD(&a->power_runs_n);
    ST(&a->power_runs[n % GS_LIM_POWER_RUNS], run);
    ST(&a->power_runs_n, n + 1);
}

uint64_t gs_lim_power_recorded_ns(const struct gs_lim_account *a, uint64_t bound_ns)
{
    uint32_t n = LD(&a->power_runs_n);
    uint64_t t = 0;
    for (uint32_t k = 0; k < GS_LIM_POWER_RUNS && k < n && t < bound_ns; k++)
        t += run_ns(run_back(a, n, k));
    return t;
}

int gs_lim_power_record_younger(const struct gs_lim_account *a, uint64_t span_ns)
{
    /* past GS_LIM_POWER_RUNS the oldest runs are gone: older than the record */
    return LD(&a->power_runs_n) < GS_LIM_POWER_RUNS && gs_lim_power_recorded_ns(a, span_ns) < span_ns;
}

uint32_t gs_lim_power_busy(const struct gs_lim_account *a, uint64_t busy_ppm, uint64_t interval_ns)
{
    unsigned __int128 sum = 0;
    uint64_t left = GS_LIM_POWER_SPAN_NS, oldest = busy_ppm;
    left -= span_take(&sum, busy_ppm, interval_ns, left);
    uint32_t n = LD(&a->power_runs_n);
    for (uint32_t k = 0; k < GS_LIM_POWER_RUNS && k < n && left; k++) {
        uint64_t run = run_back(a, n, k);
        oldest = run_busy_ppm(run);
        left -= span_take(&sum, oldest, run_ns(run), left);
    }
    span_take(&sum, oldest, left, left);
    uint64_t mean = (uint64_t)(sum / GS_LIM_POWER_SPAN_NS);
    return mean ? (uint32_t)mean : 1;
}

uint64_t gs_lim_power_unused_draw(const struct gs_lim_account *a, int64_t dev_ppm, int64_t power_mw)
{
    if (LD(&a->power_runs_n) > 0)
        return LD(&a->unused_draw_mw);
    return dev_ppm >= 0 && dev_ppm < GS_LIM_BUSY_PPM && power_mw > 0 ? (uint64_t)power_mw : 0;
}

/* What the GPU draws busy-idle (its clock up, no kernel running), as the
 * power correction prices it: GS_LIM_IDLE_POWER_PPM of the limit. */
static double busy_idle_mw(uint64_t limit_mw)
{
    return (double)limit_mw * GS_LIM_IDLE_POWER_PPM / GS_LIM_PPM;
}

uint64_t gs_lim_power_repriced(uint64_t unused_draw_mw, uint64_t power_mw, uint64_t limit_mw, uint64_t covered_ns)
{
    uint64_t idle = (uint64_t)busy_idle_mw(limit_mw);
    if (unused_draw_mw == 0 || unused_draw_mw >= idle || covered_ns >= GS_LIM_POWER_SPAN_NS)
        return power_mw;
    return power_mw + (idle - unused_draw_mw) * (GS_LIM_POWER_SPAN_NS - covered_ns) / GS_LIM_POWER_SPAN_NS;
}

int gs_lim_power_tells(uint64_t occ_ppm, uint64_t busy_ppm, uint32_t mean_ppm, uint64_t interval_ns)
{
    return !gs_lim_outer_slept(interval_ns) && occ_ppm >= GS_LIM_BUSY_PPM && busy_ppm * 4 >= (uint64_t)mean_ppm * 3;
}

/* The part of an interval our threads waited, in ppm; the whole where the
 * waits fill it (several threads waiting at once) or it has no length. */
static uint64_t waited_part(uint64_t waited_ns, uint64_t interval_ns)
{
    if (interval_ns == 0 || waited_ns >= interval_ns)
        return GS_LIM_PPM;
    return (uint64_t)((unsigned __int128)waited_ns * GS_LIM_PPM / interval_ns);
}

uint64_t gs_lim_queued(uint64_t occ_ppm, uint64_t waited_ns, uint64_t interval_ns)
{
    uint64_t q = occ_ppm + waited_part(waited_ns, interval_ns);
    return q > GS_LIM_PPM ? GS_LIM_PPM : q;
}

uint64_t gs_lim_alone_busy(uint64_t occ_ppm, uint64_t waited_ns, uint64_t interval_ns)
{
    uint64_t waited = waited_part(waited_ns, interval_ns);
    if (waited >= GS_LIM_PPM)
        return GS_LIM_PPM;
    uint64_t alone = occ_ppm * GS_LIM_PPM / (GS_LIM_PPM - waited);
    return alone > GS_LIM_PPM ? GS_LIM_PPM : alone;
}

uint32_t gs_lim_speed(uint32_t old_speed, uint64_t power_mw, uint64_t limit_mw, uint64_t busy_ppm, uint64_t alone_ppm,
                      unsigned exp_milli)
{
    if (exp_milli == 0 || limit_mw == 0)
        return GS_LIM_PPM;
    if (busy_ppm < GS_LIM_BUSY_PPM)
        return old_speed; /* too little work to see what it draws */
    if (busy_ppm > GS_LIM_PPM)
        busy_ppm = GS_LIM_PPM;
    double idle = busy_idle_mw(limit_mw);
    double e = ((double)power_mw - idle) / ((double)busy_ppm / GS_LIM_PPM);
    if (alone_ppm > GS_LIM_PPM)
        alone_ppm = GS_LIM_PPM;
    double over = e * ((double)alone_ppm / GS_LIM_PPM) / ((double)limit_mw - idle);
    double target = over > 1.0 ? pow(over, exp_milli / 1000.0) * GS_LIM_PPM : (double)GS_LIM_PPM;
    if (target > GS_LIM_MAX_SPEED)
        target = GS_LIM_MAX_SPEED;
    return old_speed ? (uint32_t)((gs_lim_speed_of(old_speed) + (uint64_t)target) / 2) : (uint32_t)target;
}

uint32_t gs_lim_correction_overlap(uint32_t old_corr, uint64_t occ_ppm, const struct gs_lim_demand *others, unsigned n,
                                   uint64_t dev_ppm)
{
    uint64_t others_ppm = gs_lim_uses_of(others, n);
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
