/* The outer loop's pure part: NVML's per-process samples aggregated,
 * and the decision (c, s, the use and demand published, the share target)
 * from what a run gathered (docs/compute.md, "The outer loop"). */
#include "limiter_internal.h"

#include <stdlib.h>

uint64_t gs_lim_oldest_after(const struct gs_lim_sample *s, unsigned n, uint64_t since_us)
{
    uint64_t oldest = UINT64_MAX;
    for (unsigned i = 0; i < n; i++)
        if (s[i].ts_us > since_us && s[i].ts_us < oldest)
            oldest = s[i].ts_us;
    return oldest == UINT64_MAX ? since_us : oldest;
}

uint64_t gs_lim_recent_from(const struct gs_lim_sample *s, unsigned n, uint64_t since_us, uint64_t span_us)
{
    uint64_t newest = since_us;
    for (unsigned i = 0; i < n; i++)
        if (s[i].ts_us > newest)
            newest = s[i].ts_us;
    return newest - since_us > span_us ? newest - span_us : since_us;
}

static int newest_first(const void *a, const void *b)
{
    uint64_t x = ((const struct gs_lim_sample *)a)->ts_us, y = ((const struct gs_lim_sample *)b)->ts_us;
    return x < y ? 1 : x > y ? -1 : 0;
}

unsigned gs_lim_keep_newest(struct gs_lim_sample *s, unsigned n, unsigned max)
{
    if (n <= max)
        return n;
    qsort(s, n, sizeof *s, newest_first);
    return max;
}

int gs_lim_new_stamp(const struct gs_lim_sample *s, unsigned i)
{
    for (unsigned j = 0; j < i; j++)
        if (s[j].ts_us == s[i].ts_us)
            return 0;
    return 1;
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
        stamps += (unsigned)gs_lim_new_stamp(s, i);
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

int gs_lim_take_samples(uint64_t *mark, uint64_t seen, const struct gs_lim_sample *s, unsigned n, uint64_t from_us,
                        int (*is_ours)(uint32_t pid, void *ctx), void *ctx, int64_t *our_ppm, int64_t *others_ppm,
                        uint64_t *newest)
{
    *newest = gs_lim_aggregate(s, n, from_us, is_ours, ctx, our_ppm, others_ppm);
    uint64_t expect = seen;
    int alone = 1;
    /* forward only, and never over a mark set back under seen */
    while (*newest > expect && expect >= seen &&
           !__atomic_compare_exchange_n(mark, &expect, *newest, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        alone = 0; /* another run moved it: it counted the samples up to it,
                    * and those after began past this run's interval */
    if (!alone) {
        *our_ppm = -1;
        *others_ppm = -1;
    }
    return alone;
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
     * not blur anyone's time (gs_lim_count_busy), nor does a member that
     * showed no demand in this interval's second half (gs_lim_quiet_span):
     * the tenant of the turn before ours, still active lately, had a
     * launch-bound load capped at 30 on an H200 charged its CPU gaps at
     * c 1 and held under its cap through a turn's first second */
    v.nb = gs_lim_count_busy(in->dem, in->ndem, gs_lim_quiet_span(in->interval_ns));
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
    /* nor where NVML lists none of our processes (a pod's pid namespace):
     * its 0 for us was no measure. A share pod running free (no windows,
     * so no occupancy to rule it out) published a use of 0, which its
     * neighbour read as a container that wanted nothing and ran free
     * beside it for a run; a capped pod under 20 % occupancy published 0
     * and stepped c towards its floor, undercharged once its load grew */
    v.per_process = our >= 0 && !(our == 0 && in->occ_ppm >= 4 * GS_LIM_BUSY_PPM) && !occupancy_like && v.nb == 0 &&
                    !quiet_member_busy && !in->pids_hidden;
    v.learn = !gs_lim_outer_slept(in->interval_ns) && (v.per_process || dev >= 0 || v.nb > 0);
    return v;
}

/* The device's busy fraction at the last outer run, or -1 where it read
 * none: a missing reading stored as 0 counted as a device far under every
 * cap, and one real reading after it started a free run. */
static int64_t last_device_reading(const struct gs_lim_account *a)
{
    uint32_t dev = LD(&a->dev_ppm);
    return dev <= GS_LIM_PPM ? (int64_t)dev : -1;
}

/* Whether the last outer run read the device busy under a's bound. */
static int last_reading_bound_holds(const struct gs_lim_account *a)
{
    int64_t dev = last_device_reading(a);
    return dev >= 0 && gs_lim_bound_holds((uint64_t)dev, a->limit_pct);
}

/* Whether the last outer run saw us busy and the device busier than our
 * use by more than GS_LIM_BUSY_PPM: others were busy beside us. A run that
 * read others while we idled (back from an idle) says nothing of our c: a
 * launch-bound load capped at 30 on an H200 forgot a c learnt alone at
 * each turn start, and ran 0.15-0.17 busy while it learnt it afresh. */
static int was_beside_others(const struct gs_lim_account *a)
{
    uint32_t use = LD(&a->use_ppm);
    return use >= GS_LIM_BUSY_PPM && last_device_reading(a) > (int64_t)use + GS_LIM_BUSY_PPM;
}

/* Our use as a cap running free sees it: the device's busy time less the
 * others' in the samples (the most we can have used), or what the samples
 * give our pids if more. The samples and the device's reading cover spans
 * that do not line up: on an H200 the first samples read after runs that
 * read none gave a load turned GPU-bound 0.13-0.18 of a device it kept 0.98
 * busy, and taken alone they let it run free a run longer. */
static int64_t free_use(const struct gs_outer_in *in)
{
    if (in->dev_ppm < 0)
        return in->our_ppm;
    int64_t rest = in->dev_ppm - (in->others_ppm > 0 ? in->others_ppm : 0);
    return in->our_ppm > rest ? in->our_ppm : rest > 0 ? rest : 0;
}

/* Whether a is a cap that limits (under 100 %). */
static int cap_limits(const struct gs_lim_account *a)
{
    return a->mode == GS_LIM_CAP && a->limit_pct > 0 && a->limit_pct < 100;
}

/* Whether a is a cap that limits and ran free up to this run. */
static int cap_was_free(const struct gs_lim_account *a)
{
    return cap_limits(a) && gs_lim_unthrottled(a);
}

/* What one reading of a cap running free adds to its tokens: the cap's
 * allowance over the run less its use at s, both over at most one run
 * (NVML's figures cover about that); nothing without a reading. */
static int64_t free_tokens(const struct gs_lim_account *a, const struct gs_outer_in *in, uint32_t speed)
{
    int64_t use = free_use(in);
    if (use < 0)
        return 0;
    uint64_t span = in->interval_ns < GS_LIM_OUTER_NS ? in->interval_ns : GS_LIM_OUTER_NS;
    uint64_t s = gs_lim_speed_of(speed);
    uint64_t allowed = (uint64_t)((unsigned __int128)span * gs_lim_cap_rate(a->limit_pct) / GS_LIM_PPM);
    uint64_t used = (uint64_t)((unsigned __int128)span * (uint64_t)use / GS_LIM_PPM * s / GS_LIM_PPM);
    return (int64_t)allowed - (int64_t)used; /* a run's worth at most GS_LIM_MAX_SPEED: no overflow */
}

/* The most one reading can wrongly take from a cap running free: the whole
 * device over a run past the cap, at s. A turn's early reading on an H200
 * credited a decoder under cap 30 (0.10-0.20 busy) with 0.38-0.80 of the
 * device: the previous tenant's last time-slices. */
static int64_t free_slack(const struct gs_lim_account *a, uint32_t speed)
{
    uint64_t s = gs_lim_speed_of(speed);
    return (int64_t)(GS_LIM_OUTER_NS * (s - gs_lim_cap_rate(a->limit_pct)) / GS_LIM_PPM);
}

/* A cap's tokens t after adding delta: at most one period's allowance (and
 * no wrap, whatever the account held). */
static int64_t tokens_plus(const struct gs_lim_account *a, int64_t t, int64_t delta)
{
    int64_t burst = gs_lim_burst_of(gs_lim_cap_rate(a->limit_pct)), sum;
    if (__builtin_add_overflow(t, delta, &sum))
        return delta < 0 ? INT64_MIN : burst;
    return sum < burst ? sum : burst;
}

/* How busy someone else was beside a cap running free, as this run reads
 * it: others in the samples where the device's busy time leaves room for
 * them (samples beyond it are from before it: a neighbour's last ones, as
 * a turn start on an H200 read 0.40 of others on a device 0.12 busy), or a
 * busy ledger member where NVML sees someone else busy, by how much the
 * device was busier than us (the samples may credit us its slices). A
 * member counts only there: members stay active for two runs after their
 * last launch, and a decoder under caps 30 and 50 ended most of its free
 * runs at turn starts for the tenant of the turn before; nor does a forged
 * claim count. */
static int64_t free_beside(const struct gs_outer_in *in, const struct outer_view *v)
{
    int64_t others = in->others_ppm, dev = in->dev_ppm, our = in->our_ppm > 0 ? in->our_ppm : 0;
    int64_t beside = others >= GS_LIM_BUSY_PPM && others <= dev + GS_LIM_BUSY_PPM ? others : 0;
    if (v->nb > 0 && !gs_lim_nobody_else(in->our_ppm, others, dev) && dev - our > beside)
        beside = dev - our;
    return beside;
}

/* Whether a device busy dev_ppm of the time, at s, was under a's cap. */
static int device_under_cap(const struct gs_lim_account *a, uint64_t dev_ppm, uint32_t speed)
{
    return dev_ppm * gs_lim_speed_of(speed) / GS_LIM_PPM < gs_lim_cap_rate(a->limit_pct);
}

/* A capped container running free, or starting to (gs_lim_outer_decide):
 * it starts where the whole device read under the device bound twice in a
 * row, busy neighbours or not (its GPU time is at most the device's, so it
 * cannot reach its cap: under windows beside training capped at 30, an
 * H100's decoder capped at 70 did 0.835 of alone where it did 0.948
 * without the interposer), and
 * stays while its tokens, run on NVML's readings, stay above -free_slack:
 * over a run or two it may pass its cap by what it then owes, and a single
 * reading that credits it someone else's slices ends no free run. The gap
 * between the bound and the cap keeps it from flapping. Nor does a single
 * reading of someone else busy (free_beside) end it, only one that follows
 * another lately (others_ppm fades by a quarter a run): a turn's first
 * reading on an H200 still held the previous tenant's last work, and ended
 * most of a decoder's free runs. Nor does a run back from an idle: its
 * samples and the ledger's members active lately say who used the GPU while
 * we idled (a graph inference load under cap 70 ended its free run at each
 * turn start for them). Nor does anyone beside it while the whole device,
 * at s, read under the cap over this reading and the last: their mean,
 * not either one, so that a load busy past its cap every other run, whose
 * samples NVML credits to someone else (host pids in a pod), cannot stay
 * free on the quiet runs between (not over the bound: a decoder capped at
 * 70, 0.19-0.24 busy alone on an H100, beside training capped at 30 keeps
 * the device about 0.5 busy, near the bound of 0.56, and each end costs it
 * c learnt afresh under fine probes). It starts only where the device at s
 * reads under the cap too: past s 1.25 the bound alone would start free
 * runs that the next reading ends. Beside someone the samples no longer
 * measure us, but its tokens still take what they say, or the device's busy
 * time. */
static int cap_runs_free(const struct gs_lim_account *a, const struct gs_outer_in *in, const struct outer_view *v,
                         int64_t delta, uint32_t speed)
{
    if (!cap_limits(a) || in->dev_ppm < 0)
        return 0;
    if (gs_lim_unthrottled(a)) {
        if (tokens_plus(a, LD(&a->tokens), delta) < -free_slack(a, speed))
            return 0;
        if (gs_lim_outer_slept(in->interval_ns))
            return 1;
        int64_t last = last_device_reading(a);
        return free_beside(in, v) < GS_LIM_BUSY_PPM || LD(&a->others_ppm) < GS_LIM_BUSY_PPM ||
               (last >= 0 && device_under_cap(a, ((uint64_t)in->dev_ppm + (uint64_t)last) / 2, speed));
    }
    return gs_lim_bound_holds((uint64_t)in->dev_ppm, a->limit_pct) && LD(&a->corr_ppm) != 0 &&
           !gs_lim_outer_slept(in->interval_ns) && !gs_lim_throttled(a, in->now) && last_reading_bound_holds(a) &&
           device_under_cap(a, (uint64_t)in->dev_ppm, speed);
}

int gs_lim_free_far_under(const struct gs_lim_account *a)
{
    return cap_was_free(a) && last_reading_bound_holds(a) && LD(&a->others_ppm) < GS_LIM_BUSY_PPM;
}

/* c, and the others' use where only the device's busy time tells it. */
static uint32_t outer_correction(const struct gs_lim_account *a, const struct gs_outer_in *in,
                                 const struct outer_view *v, int64_t *others)
{
    uint32_t old = LD(&a->corr_ppm);
    int64_t dev = in->dev_ppm;
    /* a cap running free measures nothing: c stays as learnt for its windows */
    if (a->mode == GS_LIM_CAP && gs_lim_unthrottled(a))
        return old;
    /* with nobody else busy, a c learnt for the overlap beside others (1
     * where they took turns with us or the samples credited us their
     * slices; anything up to 1 where the last run saw the device busier
     * than our use) is forgotten and learnt afresh (gs_lim_learning),
     * also by a run back from an idle: the first such reading may still
     * hold the others' last slices (an H200 credited a decoder 0.36 where
     * the device read 0.21 busy), and at c 1 that decoder, capped at 30,
     * was held for tokens through three outer runs of its turn after seven
     * tenants had run together. Not learnt, its CPU gaps are not charged
     * meanwhile. A reading alone that measures us is taken instead
     * (gs_lim_correction) */
    int measures_us = v->learn && v->per_process && gs_lim_alone_reading(in->our_ppm, in->others_ppm, dev);
    /* in a pid namespace of its own NVML never shows a share container
     * alone (our pids are not the ones it lists: ours reads 0, the others
     * the whole device), and only the ledger tells us from the others there
     * (outside_weight): nobody else is no member active lately. Else a c
     * learnt beside a neighbour outlived any time alone: a share pair of the
     * agent's layout that ran free while a tenant cut their ledger met again
     * with the 70 side at c 0.62-0.66, charged under its target at any
     * occupancy; it never waited, never took turns, and time-sliced with
     * the 30 side for 1.5-2 s (0.22 / 0.74). Not a cap: held alone, it
     * has occupancy, and c learnt from the device would be forgotten at
     * every next run */
    int nobody_else = gs_lim_nobody_else(in->our_ppm, in->others_ppm, dev) ||
                      (a->mode == GS_LIM_SHARE && in->pids_hidden && in->ndem == 0);
    if (v->nb == 0 && !measures_us && old && old <= GS_LIM_PPM && (old == GS_LIM_PPM || was_beside_others(a)) &&
        nobody_else)
        return 0;
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
        uint32_t c = gs_lim_correction(old, in->our_ppm, in->occ_ppm, measures_us);
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

/* What a container running free publishes as its use: the device's busy
 * time (the most it can have used); beside busy members, less what they
 * published, each for the part of the run it was active in (theirs is in
 * the device's busy time too: the whole of it, claimed by a decoder
 * running free beside training capped at 30, would be read as a busy
 * neighbour's use twice over; a member gone quiet keeps the use it last
 * published, which the device's time no longer holds). A share container
 * runs free only alone, until the run that finds a neighbour: claiming the
 * device's time there, a new decoder of weight 70 beside training of
 * weight 30 wanted more at its first run and waited for the training's
 * turns (an H100). */
static uint64_t free_published(const struct gs_outer_in *in, const struct outer_view *v)
{
    uint64_t dev = (uint64_t)(in->dev_ppm > 0 ? in->dev_ppm : 0);
    if (v->nb == 0)
        return dev;
    uint64_t theirs = gs_lim_active_uses_of(in->dem, in->ndem, in->interval_ns);
    return dev > theirs ? dev - theirs : 0;
}

/* Whether the use we publish is free_published's, the most we can have
 * used rather than a measure: running free, with no figure from NVML. */
static int use_is_an_upper_bound(const struct gs_lim_account *a, const struct outer_view *v)
{
    return !v->per_process && gs_lim_unthrottled(a);
}

/* The use we publish: NVML's figure where it measures us, free_published
 * while we run free, else what we were charged. */
static uint64_t outer_use(const struct gs_lim_account *a, const struct gs_outer_in *in, const struct outer_view *v,
                          uint32_t corr)
{
    uint64_t charged = in->occ_ppm * gs_lim_corr_of(corr) / GS_LIM_PPM;
    uint64_t use = v->per_process                ? (uint64_t)in->our_ppm
                   : use_is_an_upper_bound(a, v) ? free_published(in, v)
                   : v->bounded                  ? gs_lim_bound_use(charged, (uint64_t)in->dev_ppm, in->dem, in->ndem)
                                                 : charged;
    return use > GS_LIM_PPM ? GS_LIM_PPM : use;
}

/* Share mode, work-conserving: the others of the ledger by their demand,
 * the GPU users outside it as one more that wants more; beside anyone the
 * container keeps its windows (GS_LIM_SHARE_MEASURED) to measure its use.
 * One held to its part takes turns with the others held to theirs, and
 * waits for tokens where its charge outruns the part. So one that wants no
 * more (wants: now, or held back lately) and uses under three quarters of
 * its weight's part is not held: a new decoder of weight 70 held to 0.70
 * beside training of weight 30, charged its kernels' waits for the
 * training's slices before the overlap split was learnt, waited for
 * tokens, so wanted more, held the training to 0.30, and waited for its
 * turns (an H100). A GPU-bound one held to its part uses nearly all of it
 * (0.28-0.29 of 0.30, 0.68-0.70 of 0.70 on an H100): a run in which it
 * happens not to want more leaves it held. */
static uint32_t outer_share_target(const struct gs_lim_account *a, const struct gs_outer_in *in, uint64_t use,
                                   int wants)
{
    struct gs_lim_demand all[GS_LIM_MAX_DEMANDS + 1];
    unsigned n = in->ndem < GS_LIM_MAX_DEMANDS ? in->ndem : GS_LIM_MAX_DEMANDS;
    for (unsigned i = 0; i < n; i++)
        all[i] = in->dem[i];
    if (in->outside_weight)
        all[n++] =
            (struct gs_lim_demand){ (uint32_t)(in->outside_weight > 65535 ? 65535 : in->outside_weight), 0, 1, 0, 0 };
    if (n == 0)
        return GS_LIM_PPM;
    if (!wants && use * 4 < (uint64_t)gs_lim_weight_part(a->weight, all, n) * 3)
        return GS_LIM_SHARE_MEASURED;
    uint32_t target = gs_lim_share_fill(a->weight, all, n);
    return target > GS_LIM_SHARE_MEASURED ? GS_LIM_SHARE_MEASURED : target;
}

/* The power correction's part of a run: the busy fraction busy it adds to
 * the power span's record, and s from the draw where it can tell
 * (gs_lim_power_tells), into out's speed, power_run, woke_ns and
 * unused_draw_mw. */
static void outer_speed(const struct gs_lim_account *a, const struct gs_outer_in *in, uint64_t busy,
                        struct gs_outer_out *out)
{
    out->speed = LD(&a->speed_ppm);
    out->power_run = gs_lim_power_run(busy, in->interval_ns);
    out->woke_ns = gs_lim_outer_slept(in->interval_ns) ? in->now : LD(&a->woke_ns);
    out->unused_draw_mw = gs_lim_power_unused_draw(a, in->dev_ppm, in->power_mw);
    uint32_t mean = gs_lim_power_busy(a, busy, in->interval_ns);
    if (in->dev_ppm < 0 || in->power_mw < 0 || in->limit_mw <= 0 ||
        !gs_lim_power_tells(in->occ_ppm, busy, mean, in->interval_ns))
        return;
    /* a new container's draw is read against a record of all its time (the
     * idle before it included): each of its first second's measures is
     * taken whole. Stepping half-way from a first one read short of its
     * last, partial sample period, a GPU-bound tenant under cap 70 on the
     * simulated clock model did 0.80 of the device's work in that second */
    uint64_t recorded = gs_lim_power_recorded_ns(a, GS_LIM_POWER_SPAN_NS);
    uint32_t old = recorded < GS_LIM_POWER_SPAN_NS ? 0 : out->speed;
    uint64_t power;
    if (in->power_now_mw > 0 && gs_lim_power_record_younger(a, 2 * GS_LIM_POWER_SPAN_NS)) {
        /* the instantaneous draw is this run's, not the second's: read
         * against the run's busy fraction. Through the second second too:
         * an H100's one-second mean reached a new load's draw 1.0-1.3 s
         * after it began. At least our own occupancy: NVML's utilisation
         * over one run lags the draw (two identical first looks of a
         * GPU-bound matmul under cap 70 read 0.30 and 0.80 busy; at 0.30
         * beside a 750 W draw, s was 1.54 where it holds 1.2, and the first
         * second did 0.60 of the device's work, p / u 0.71) */
        uint64_t run_busy = busy > in->occ_ppm ? busy : in->occ_ppm;
        power = (uint64_t)in->power_now_mw;
        mean = (uint32_t)(run_busy > GS_LIM_PPM ? GS_LIM_PPM : run_busy);
    } else {
        power = gs_lim_power_repriced(out->unused_draw_mw, (uint64_t)in->power_mw, (uint64_t)in->limit_mw,
                                      recorded + in->interval_ns);
    }
    uint32_t s = gs_lim_speed(old, power, (uint64_t)in->limit_mw, mean,
                              gs_lim_alone_busy(in->occ_ppm, in->waited_ns, in->interval_ns), in->power_exp_milli);
    if (s > out->speed || gs_lim_power_span_ours(in->now, out->woke_ns))
        out->speed = s;
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
     * noise. For a cap running free, what its next reading is judged
     * beside; nobody in a run back from an idle, which reads who used the
     * GPU while we idled, nor anyone beside us before it (no longer lately,
     * however few runs ago): taken as a first reading of a neighbour, a
     * turn's next one, still holding the last tenant's tail, ended a
     * decoder's free run under cap 30 at two of its turn starts on an H200
     * (compute-2026-12-03f.md) */
    int free_back = cap_was_free(a) && gs_lim_outer_slept(in->interval_ns);
    uint64_t faded = free_back ? 0 : LD(&a->others_ppm) * 3 / 4;
    if (cap_was_free(a))
        others = free_back ? 0 : free_beside(in, &v);
    out->others_ppm = (uint32_t)(others > (int64_t)faded ? others : (int64_t)faded);
    out->dev_ppm = dev < 0 ? GS_LIM_DEV_UNREAD : (uint32_t)dev;
    uint64_t busy = dev >= 0 ? gs_lim_device_busy((uint64_t)dev, use, in->dem, in->ndem, in->interval_ns) : 0;
    outer_speed(a, in, busy > in->occ_ppm ? busy : in->occ_ppm, out);
    int share = a->mode == GS_LIM_SHARE;
    /* held back by nobody it never waits, yet it can want more
     * (gs_lim_share_wants_more); nor does one held to a target it never
     * reaches while its work is queued all the time: time-sliced beside
     * a free neighbour, its charge (corrected for the overlap) stayed
     * under its target, and a share pair 30 : 70 on the simulated driver
     * stayed time-sliced at 0.28 / 0.48, the 30 side free every other run.
     * Queued counts the time its threads waited for the neighbour's turns:
     * taking turns, a GPU-bound container of weight 70 used 0.68 of an
     * H100, waited for the 30 side's turns the rest, and went 300-500 ms
     * without a wait for tokens; the 30 side, seeing nobody else want
     * more, ran free for a run (0.95 of it) while the 70 side waited */
    out->wants_ns = LD(&a->throttled_ns);
    int held = LD(&a->rate_ppm) < GS_LIM_SHARE_MEASURED;
    uint64_t queued = gs_lim_queued(in->occ_ppm, in->waited_ns, in->interval_ns);
    /* what a container running free publishes from the device's busy time
     * (free_published) is the most it can have used, not a measure of it:
     * it claims nothing on it, and its next run, in windows, measures it.
     * Back from an idle beside a neighbour that had just woken too and
     * published no use yet, a decoder of weight 70 published the device's
     * 1.0 as its own, wanted more, and held the training of weight 30 to
     * 0.30 for a run (an H100, compute-2026-12-07g-h100.md §4) */
    uint64_t claimed = share && use_is_an_upper_bound(a, &v) ? 0 : use;
    if (share && (!held || queued >= GS_LIM_QUEUED_PPM) &&
        gs_lim_share_wants_more(a->weight, claimed, queued, in->dem, in->ndem))
        out->wants_ns = in->now;
    out->yield = share && in->yield_on && gs_lim_yields(a->weight, use, in->dem, in->ndem);
    out->free_tokens_ns = cap_was_free(a) ? free_tokens(a, in, out->speed) : 0;
    if (share) {
        out->target = outer_share_target(a, in, claimed, out->wants_ns == in->now || gs_lim_throttled(a, in->now));
    } else if (cap_runs_free(a, in, &v, out->free_tokens_ns, out->speed)) {
        out->target = GS_LIM_PPM;
    } else {
        out->target = gs_lim_cap_rate(a->limit_pct);
        /* the load changed: the c its windows learnt before may be far too
         * low for it (a decoder's, for GPU-bound work). It is learnt afresh
         * as a new container's is (gs_lim_outer_apply) */
        if (cap_was_free(a))
            out->corr = 0;
    }
}

uint32_t gs_lim_outer_look_only(struct gs_lim_account *a, const struct gs_outer_in *in)
{
    /* our occupancy counts the CPU gaps the learning probes found
     * (gs_lim_learning): the device's busy time is the run's, where read
     * and not from before our work */
    int measured = in->dev_ppm >= 0 && !gs_lim_device_reading_stale((uint64_t)in->dev_ppm, in->occ_ppm);
    struct gs_outer_out o = { 0 };
    outer_speed(a, in, measured ? (uint64_t)in->dev_ppm : in->occ_ppm, &o);
    ST(&a->speed_ppm, o.speed);
    ST(&a->woke_ns, o.woke_ns);
    ST(&a->unused_draw_mw, o.unused_draw_mw);
    gs_lim_power_record(a, o.power_run);
    return o.speed;
}

uint32_t gs_lim_outer_apply(struct gs_lim_account *a, const struct gs_outer_out *out, uint64_t now)
{
    ST(&a->corr_ppm, out->corr);
    ST(&a->speed_ppm, out->speed);
    ST(&a->unused_draw_mw, out->unused_draw_mw);
    gs_lim_power_record(a, out->power_run);
    ST(&a->woke_ns, out->woke_ns);
    ST(&a->dev_ppm, out->dev_ppm);
    ST(&a->use_ppm, out->use_ppm);
    ST(&a->others_ppm, out->others_ppm);
    if (cap_was_free(a)) {
        /* nobody refills a free cap's tokens but these readings: kept
         * current before the rate can change, a launch that refills the
         * account as it goes back to windows adds nothing (from the clock
         * of the last window, seconds ago, it refilled the debt away: on an
         * H200 a load grown GPU-bound went on at 0.57 of alone under cap 50
         * owing 180 ms) */
        ST(&a->refill_ns, now);
    }
    if (out->free_tokens_ns) {
        /* the launch path may charge a window it closes meanwhile */
        int64_t t = LD(&a->tokens), n;
        do
            n = tokens_plus(a, t, out->free_tokens_ns);
        while (!__atomic_compare_exchange_n(&a->tokens, &t, n, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    }
    uint32_t old = __atomic_exchange_n(&a->rate_ppm, out->target, __ATOMIC_RELAXED);
    if (a->mode == GS_LIM_SHARE && old >= GS_LIM_SHARE_MEASURED && out->target < GS_LIM_SHARE_MEASURED) {
        ST(&a->tokens, (int64_t)0);
        ST(&a->refill_ns, now);
    } else if (a->mode == GS_LIM_CAP && old >= GS_LIM_PPM && out->target < GS_LIM_PPM) {
        /* back to windows. The next outer run only looks where NVML's
         * samples end, and c is learnt from the samples after the one that
         * began before that look: taken from a reading that still held the
         * free run, c came out 0.79 for GPU-bound work on the simulated
         * driver, which then ran at 0.54-0.56 under cap 50 */
        ST(&a->nvml_seen_us, (uint64_t)0);
    }
    return old;
}
