/*
 * The limiter's slow outer loop, run by one process of the container at a
 * time (claimed by CAS on the account's outer_next_ns), at most every
 * GS_LIM_OUTER_NS:
 * - reads NVML per-process utilisation since the last run and splits it into
 *   ours (pids of our region's live processes) and the others';
 * - updates the contention correction c (limiter.c, gs_lim_correction);
 * - in share mode, sets the target share from the weights of the busy others:
 *   a busy pid that belongs to a sibling region (another container's state
 *   file in the same directory, read as a private snapshot) counts with that
 *   container's weight, any other busy pid (an MPS server excepted) with the
 *   default weight 100.
 * NVML reports pids of the namespace it runs in (the host's): where those do
 * not match our region's pids, nothing here learns anything and c stays 1
 * (docs/compute.md, "Limitations").
 */
#define _GNU_SOURCE
#include "compute_outer.h"
#include "compute_clock.h"
#include "compute_cost.h"
#include "compute_ledger.h"
#include "log.h"
#include "real_driver.h"
#include "region_view.h"
#include "runtime.h"
#include "statedir.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_SAMPLES 512
#define MAX_NVML_SAMPLES 16384 /* what we accept to read from NVML at once */
#define MAX_BUSY 64

static pthread_mutex_t nvml_lock = PTHREAD_MUTEX_INITIALIZER;
static int nvml_state; /* 0 untried, 1 ready, -1 unusable */

struct pidset {
    int n;
    uint32_t pid[GS_REGION_MAX_PROCS];
};

static int in_set(uint32_t pid, void *ctx)
{
    const struct pidset *s = ctx;
    for (int i = 0; i < s->n; i++)
        if (s->pid[i] == pid)
            return 1;
    return 0;
}

static void live_pids(const struct gs_region *r, struct pidset *s)
{
    s->n = 0;
    for (int i = 0; i < GS_REGION_MAX_PROCS; i++) {
        int32_t pid = __atomic_load_n(&r->proc[i].pid, __ATOMIC_RELAXED);
        if (pid > 0)
            s->pid[s->n++] = (uint32_t)pid;
    }
}

/* What NVML says of the whole device: busy fraction, power draw and limit;
 * -1 where unknown. */
struct devinfo {
    int64_t busy_ppm, power_mw, limit_mw;
};

/* Samples of device uuid since *seen; returns how many (0 if none/unusable),
 * the newest MAX_SAMPLES of them if there are more, and fills *di. */
static unsigned read_samples(const char *uuid, uint64_t seen, struct gs_lim_sample *out, struct devinfo *di)
{
    static nvmlProcessUtilizationSample_t *buf;
    static unsigned cap;
    static int logged;
    unsigned got = 0;
    *di = (struct devinfo){ -1, -1, -1 };
    pthread_mutex_lock(&nvml_lock);
    if (nvml_state == 0) {
        nvml_state = -1;
        if (gs_real_resolve(GS_LIB_NVML, 1) == 0) {
            gs_pfn_nvmlInit_v2 init = GS_REAL_NVML(nvmlInit_v2);
            if (init && init() == NVML_SUCCESS)
                nvml_state = 1;
        }
        if (nvml_state < 0)
            gs_log(GS_LOG_INFO, "NVML unavailable: the compute limiter runs without its contention correction");
    }
    gs_pfn_nvmlDeviceGetHandleByUUID by_uuid = GS_REAL_NVML(nvmlDeviceGetHandleByUUID);
    gs_pfn_nvmlDeviceGetProcessUtilization util = GS_REAL_NVML(nvmlDeviceGetProcessUtilization);
    gs_pfn_nvmlDeviceGetUtilizationRates rates = GS_REAL_NVML(nvmlDeviceGetUtilizationRates);
    nvmlDevice_t h;
    if (nvml_state == 1 && by_uuid && by_uuid(uuid, &h) == NVML_SUCCESS) {
        nvmlUtilization_t u;
        if (rates && rates(h, &u) == NVML_SUCCESS)
            di->busy_ppm = (int64_t)(u.gpu > 100 ? 100 : u.gpu) * 10000;
        gs_pfn_nvmlDeviceGetPowerUsage power = GS_REAL_NVML(nvmlDeviceGetPowerUsage);
        gs_pfn_nvmlDeviceGetEnforcedPowerLimit plimit = GS_REAL_NVML(nvmlDeviceGetEnforcedPowerLimit);
        unsigned mw = 0;
        if (power && power(h, &mw) == NVML_SUCCESS)
            di->power_mw = mw;
        if (plimit && plimit(h, &mw) == NVML_SUCCESS)
            di->limit_mw = mw;
        /* A buffer too small gets NVML_ERROR_INSUFFICIENT_SIZE, the count
         * needed and no samples: grow it (the history since seen can be
         * long) and ask again. */
        nvmlReturn_t rc = NVML_ERROR_INSUFFICIENT_SIZE;
        unsigned n = cap;
        for (int tries = 0; util && tries < 3 && rc == NVML_ERROR_INSUFFICIENT_SIZE; tries++) {
            if (n > cap) {
                unsigned want = n + 64 > MAX_NVML_SAMPLES ? MAX_NVML_SAMPLES : n + 64;
                nvmlProcessUtilizationSample_t *nb = want > cap ? realloc(buf, want * sizeof *buf) : buf;
                if (!nb)
                    break;
                buf = nb;
                cap = want;
            }
            n = cap;
            rc = buf ? util(h, buf, &n, seen) : NVML_ERROR_INSUFFICIENT_SIZE;
            if (!buf)
                n = n > 0 ? n : 64; /* first call: size it */
        }
        if (rc == NVML_SUCCESS) {
            unsigned from = n > MAX_SAMPLES ? n - MAX_SAMPLES : 0;
            for (unsigned i = from; i < n; i++)
                out[got++] = (struct gs_lim_sample){ buf[i].pid, buf[i].smUtil, buf[i].timeStamp };
        } else if (rc != NVML_ERROR_NOT_FOUND && !logged) { /* NOT_FOUND: no samples since seen */
            logged = 1;
            gs_log(GS_LOG_DEBUG,
                   "nvmlDeviceGetProcessUtilization: %d; the compute limiter corrects for contention from "
                   "device utilisation only",
                   (int)rc);
        }
    }
    pthread_mutex_unlock(&nvml_lock);
    return got;
}

/* Whether NVML names pid as an MPS server. Its per-process samples are its
 * clients' time, ours among them: counted as a tenant of weight 100 it held
 * two share containers 30 : 70 of an MPS daemon to 0.15 / 0.35 on an H100
 * (bench/results/mps-share-2026-11-26-h100.md). A process that takes the
 * name only loses: share containers stop giving way to it. */
static int is_mps_server(uint32_t pid)
{
    gs_pfn_nvmlSystemGetProcessName name_of = GS_REAL_NVML(nvmlSystemGetProcessName);
    char name[256];
    if (!name_of || name_of(pid, name, sizeof name) != NVML_SUCCESS)
        return 0;
    name[sizeof name - 1] = '\0';
    const char *base = strrchr(name, '/');
    return strcmp(base ? base + 1 : name, "nvidia-cuda-mps-server") == 0;
}

/* One sibling region met by the scan: adds its weight when one of the busy
 * pids belongs to it. */
struct sibling_scan {
    const uint32_t *pid;
    const int *busy;
    int nb;
    const char *uuid;
    struct stat self;
    int found[MAX_BUSY];
    uint64_t total;
};

static int weigh_sibling(const char *path, const char *key, void *arg)
{
    (void)key;
    struct sibling_scan *sc = arg;
    struct stat sb;
    if (lstat(path, &sb) != 0 || (sb.st_ino == sc->self.st_ino && sb.st_dev == sc->self.st_dev))
        return 0;
    /* Another tenant's file: a checked private copy, live slots only. */
    char err[256];
    struct gs_region_view *v = gs_region_view_open(path, err, sizeof err);
    if (!v)
        return 0;
    const struct gs_region *o = &v->r;
    int hit = 0;
    for (int b = 0; b < sc->nb; b++) {
        if (sc->found[b])
            continue;
        for (int i = 0; i < GS_REGION_MAX_PROCS; i++)
            if ((uint32_t)o->proc[i].pid == sc->pid[sc->busy[b]] && gs_region_view_alive(v, i)) {
                sc->found[b] = hit = 1;
                break;
            }
    }
    if (hit) {
        uint64_t w = 100;
        for (uint32_t dd = 0; dd < o->ndevices; dd++)
            if (strncmp(o->dev[dd].uuid, sc->uuid, GS_REGION_UUID_LEN) == 0 && o->dev[dd].lim.configured == 1) {
                const struct gs_lim_account *oa = &o->dev[dd].lim;
                w = oa->mode == GS_LIM_SHARE ? oa->weight : oa->limit_pct;
                break;
            }
        sc->total += w;
    }
    gs_region_view_free(v);
    return 0;
}

/* Sum of the weights of the busy others (share mode) on device dev that
 * are not in its ledger. */
static uint64_t busy_weight(const struct gs_lim_sample *s, unsigned n, uint64_t since, const struct pidset *ours,
                            const char *uuid, int dev)
{
    uint32_t pid[MAX_BUSY];
    uint64_t sum[MAX_BUSY] = { 0 };
    int np = 0;
    unsigned stamps = 0;
    for (unsigned i = 0; i < n; i++) {
        if (s[i].ts_us <= since)
            continue;
        int seen = 0;
        for (unsigned j = 0; j < i && !seen; j++)
            seen = s[j].ts_us == s[i].ts_us;
        stamps += !seen;
        if (in_set(s[i].pid, (void *)ours) || gs_compute_ledger_has_pid(dev, s[i].pid))
            continue; /* ours, or counted from the device ledger */
        int k = 0;
        while (k < np && pid[k] != s[i].pid)
            k++;
        if (k == np) {
            if (np == MAX_BUSY)
                continue;
            pid[np++] = s[i].pid;
        }
        sum[k] += s[i].sm_util;
    }
    int busy[MAX_BUSY], nb = 0;
    for (int k = 0; k < np; k++)
        if (stamps && sum[k] * 10000U / stamps >= GS_LIM_BUSY_PPM && !is_mps_server(pid[k]))
            busy[nb++] = k;
    if (nb == 0)
        return 0;
    /* Weights from sibling regions (read-only). */
    struct sibling_scan sc = { .pid = pid, .busy = busy, .nb = nb, .uuid = uuid };
    char dir[sizeof gs_rt.cfg.region_path];
    if (gs_rt_region_dir(dir, sizeof dir, &sc.self) == 0)
        gs_statedir_each_region(dir, weigh_sibling, &sc);
    int *found = sc.found;
    uint64_t total = sc.total;
    for (int b = 0; b < nb; b++)
        if (!found[b])
            total += 100; /* not one of ours: default weight */
    return total;
}

/* What the last outer run decided for the launch path, per device. */
static uint8_t fine_probe[GS_REGION_MAX_DEVICES], yield_queue[GS_REGION_MAX_DEVICES];

static int flag_of(const uint8_t *flags, int dev)
{
    return dev >= 0 && dev < GS_REGION_MAX_DEVICES && __atomic_load_n(&flags[dev], __ATOMIC_RELAXED);
}

int gs_compute_fine_probe(int dev)
{
    return flag_of(fine_probe, dev);
}

int gs_compute_yield(int dev)
{
    return flag_of(yield_queue, dev);
}

/* One run of the outer loop, by the thread that won this period's turn. */
static void outer_run(struct gs_region *r, int d, uint64_t now)
{
    struct gs_lim_account *a = &r->dev[d].lim;
    uint64_t last = __atomic_exchange_n(&a->outer_last_ns, now, __ATOMIC_RELAXED);
    uint64_t occ = __atomic_load_n(&a->occ_ns, __ATOMIC_RELAXED);
    uint64_t occ_d = occ - __atomic_exchange_n(&a->outer_occ_mark, occ, __ATOMIC_RELAXED);
    uint64_t interval = now > last ? now - last : 1;
    uint64_t occ_ppm = (uint64_t)((unsigned __int128)occ_d * GS_LIM_PPM / interval);

    static struct gs_lim_sample samples[MAX_SAMPLES];
    static struct pidset ours;
    static pthread_mutex_t outer_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&outer_lock);
    char uuid[GS_REGION_UUID_LEN];
    memcpy(uuid, r->dev[d].uuid, sizeof uuid);
    uuid[sizeof uuid - 1] = '\0';
    uint64_t seen = __atomic_load_n(&a->nvml_seen_us, __ATOMIC_RELAXED);
    struct devinfo di;
    uint64_t read_from = gs_compute_now();
    unsigned n = read_samples(uuid, seen, samples, &di);
    gs_cost_add(GS_COST_NVML, gs_compute_now() - read_from);
    int64_t dev_ppm = di.busy_ppm;
    live_pids(r, &ours);
    int64_t our = -1, others = -1;
    uint64_t newest = gs_lim_aggregate(samples, n, seen, in_set, &ours, &our, &others);
    __atomic_store_n(&a->nvml_seen_us, newest, __ATOMIC_RELAXED);
    if (seen == 0 && n > 0) {
        /* first look: the samples are history from before we started */
        pthread_mutex_unlock(&outer_lock);
        return;
    }

    uint32_t old_corr = __atomic_load_n(&a->corr_ppm, __ATOMIC_RELAXED);
    uint32_t corr;
    /* Per-process smUtil that adds up to more than the device was busy counts
     * time-sliced-out time as busy (an H200 under time-slicing: 29 % + 75 %
     * against 79 % busy): it is occupancy, not a share, and says nothing
     * about contention. Then, as without per-process samples (or without
     * our pids in them), c comes from device utilisation. */
    int occupancy_like = our >= 0 && others >= 0 && dev_ppm >= 0 && our + others > dev_ppm + GS_LIM_BUSY_PPM;
    gs_compute_ledger_reap(d);
    /* the other containers of the device ledger active in the last two runs */
    struct gs_lim_demand dem[65];
    unsigned nd = gs_compute_ledger_demands(d, now - 2 * GS_LIM_OUTER_NS, now - GS_LIM_THROTTLED_NS, dem, 64);
    /* ... of which those whose GPU time can blur ours: a notebook that runs
     * a small kernel now and then is active but not among them (beside one,
     * an H100 decoder probed after every kernel and lost 30 % of its speed) */
    unsigned nb = gs_lim_count_busy(dem, nd);
    /* a capped container on a device busy well under its cap cannot reach
     * the cap, whoever's kernels kept it busy: no fine probe there, and c
     * from the device's busy time (gs_lim_bound_holds) */
    int bounded =
        nb > 0 && a->mode == GS_LIM_CAP && dev_ppm >= 0 && gs_lim_bound_holds((uint64_t)dev_ppm, a->limit_pct);
    __atomic_store_n(&fine_probe[d], (uint8_t)(nb > 0 && !bounded), __ATOMIC_RELAXED);
    /* Beside active containers of the device ledger NVML's per-process split
     * is no measure: an H100 gave each 250 ms sample the whole device's busy
     * time to one of two tenants and 0 to the other (c rose to 1.4 for the
     * one it favoured, which then got 0.58 instead of its cap of 0.70, and a
     * light tenant published the whole device as its use). There our events
     * alone measure us: throttled containers take turns, and the probe looks
     * at CPU gaps from GS_LIM_FINE_GAP_NS (compute_limiter.c), so that a
     * decoder's gaps between its small kernels are not counted busy (unless
     * bounded, above). */
    int per_process = our >= 0 && !(our == 0 && occ_ppm >= 4 * GS_LIM_BUSY_PPM) && !occupancy_like && nb == 0;
    /* the outer loop slept with us (no launches): NVML's samples and our
     * busy time cover different spans; without NVML nothing to learn either */
    int learn = interval <= 2 * GS_LIM_OUTER_NS && (per_process || dev_ppm >= 0 || nb > 0);
    if (!learn) {
        corr = old_corr ? old_corr : GS_LIM_PPM;
    } else if (per_process) {
        /* NVML's own measure of our kernels' time against what our events
         * counted busy: takes out the short gaps between our kernels and
         * the time another context time-sliced the GPU away from us */
        corr = gs_lim_correction(old_corr, our, occ_ppm);
    } else if (bounded) {
        corr = gs_lim_correction_bound(old_corr, (uint64_t)dev_ppm, occ_ppm);
    } else if (nb > 0 && a->mode == GS_LIM_SHARE && dev_ppm >= 0 &&
               !(gs_lim_throttled(a, now) && gs_lim_any_wants_more(dem, nd))) {
        /* share containers that do not take turns (turns are only between
         * containers that are all held to their share) time-slice: what
         * both counted beyond the device's busy time is split
         * (gs_lim_correction_overlap). With c = 1 a decoder beside training
         * counted the training's slices, went over its share and waited,
         * and the training was held to what the decoder seemed to use */
        corr = gs_lim_correction_overlap(old_corr, occ_ppm, dem, nd, (uint64_t)dev_ppm);
    } else if (nb > 0) {
        /* other containers active in our device ledger (above); device
         * utilisation mixes their time with ours too. Throttled ones take
         * turns, so nothing overlaps their windows (an H100's utilisation
         * read 0.76-0.97 while two of them kept it full: no measure of the
         * overlap there); a capped light one is charged the overlap (it gets
         * less, never more than its cap) */
        corr = GS_LIM_PPM;
    } else {
        /* the device's last sample period is a snapshot: it was busy at least
         * as long as NVML's per-process samples say we were */
        int64_t seen_busy = our > dev_ppm ? our : dev_ppm;
        corr = gs_lim_correction_device(old_corr, (uint64_t)seen_busy, occ_ppm);
        if (others < 0)
            others = dev_ppm > (int64_t)occ_ppm ? dev_ppm - (int64_t)occ_ppm : 0;
    }
    __atomic_store_n(&a->corr_ppm, corr, __ATOMIC_RELAXED);
    /* running free we measure nothing ourselves: the device's busy time is
     * the most we can have used */
    uint64_t use = per_process             ? (uint64_t)our
                   : gs_lim_unthrottled(a) ? (uint64_t)(dev_ppm > 0 ? dev_ppm : 0)
                   : bounded               ? gs_lim_bound_use(occ_ppm * corr / GS_LIM_PPM, (uint64_t)dev_ppm, dem, nd)
                                           : occ_ppm * corr / GS_LIM_PPM;
    if (use > GS_LIM_PPM)
        use = GS_LIM_PPM;
    uint32_t speed = __atomic_load_n(&a->speed_ppm, __ATOMIC_RELAXED);
    if (di.power_mw >= 0 && di.limit_mw > 0 && dev_ppm >= 0)
        speed = gs_lim_speed(speed, (uint64_t)di.power_mw, (uint64_t)di.limit_mw,
                             gs_lim_device_busy((uint64_t)dev_ppm, use, dem, nd), occ_ppm, gs_rt.cfg.power_exp_milli);
    __atomic_store_n(&a->speed_ppm, speed, __ATOMIC_RELAXED);
    __atomic_store_n(&a->dev_ppm, (uint32_t)(dev_ppm < 0 ? 0 : dev_ppm), __ATOMIC_RELAXED);
    gs_log(GS_LOG_DEBUG,
           "outer %s: occupancy %llu ppm, nvml ours %lld others %lld device %lld ppm, %u active in the ledger, "
           "power %lld/%lld mW -> c %u s %u",
           uuid, (unsigned long long)occ_ppm, (long long)our, (long long)others, (long long)dev_ppm, nd,
           (long long)di.power_mw, (long long)di.limit_mw, corr, speed);
    __atomic_store_n(&a->use_ppm, (uint32_t)use, __ATOMIC_RELAXED);
    __atomic_store_n(&a->others_ppm, (uint32_t)(others < 0 ? 0 : others), __ATOMIC_RELAXED);

    uint64_t wanted = __atomic_load_n(&a->throttled_ns, __ATOMIC_RELAXED);
    /* held back by nobody it never waits, yet it can want more: two
     * GPU-bound containers 30 : 70 settled at 0.23 / 0.76 when the 70 side,
     * free, looked content (gs_lim_share_wants_more) */
    if (a->mode == GS_LIM_SHARE && __atomic_load_n(&a->rate_ppm, __ATOMIC_RELAXED) >= GS_LIM_SHARE_MEASURED &&
        gs_lim_share_wants_more(a->weight, use, occ_ppm, dem, nd))
        wanted = now;
    gs_compute_ledger_publish(d, (uint32_t)use, wanted);
    /* share mode: using a light neighbour's part, we keep our queue shallow
     * so that its kernels do not wait behind ours (gs_lim_yields) */
    __atomic_store_n(
        &yield_queue[d],
        (uint8_t)(a->mode == GS_LIM_SHARE && gs_rt.cfg.share_yield_us && gs_lim_yields(a->weight, use, dem, nd)),
        __ATOMIC_RELAXED);
    if (a->mode == GS_LIM_SHARE) {
        /* Work-conserving: the other containers of the device ledger by their
         * demand there (NVML's per-process split of turn-taking contexts is
         * not reliable: on an H200 it credited one tenant with all of it);
         * those that want no more than they use keep it, the rest is split by
         * weight among those that want more. GPU users outside the ledger
         * (NVML) count as wanting more, with their weights. */
        uint64_t outside = n > 0 ? busy_weight(samples, n, seen, &ours, uuid, d) : 0;
        if (outside)
            dem[nd++] = (struct gs_lim_demand){ (uint32_t)(outside > 65535 ? 65535 : outside), 0, 1 };
        uint32_t target = nd ? gs_lim_share_fill(a->weight, dem, nd) : GS_LIM_PPM;
        /* beside others a container keeps its windows even when nobody holds
         * it back: its events are its only measure there, and one running
         * free published the device's whole busy time as its use (a decoder
         * beside training then held the training to its weight's part) */
        if (nd && target > GS_LIM_SHARE_MEASURED)
            target = GS_LIM_SHARE_MEASURED;
        uint32_t old = __atomic_exchange_n(&a->rate_ppm, target, __ATOMIC_RELAXED);
        if (old >= GS_LIM_SHARE_MEASURED && target < GS_LIM_SHARE_MEASURED) {
            __atomic_store_n(&a->tokens, (int64_t)0, __ATOMIC_RELAXED);
            __atomic_store_n(&a->refill_ns, now, __ATOMIC_RELAXED);
        }
        if (old != target)
            gs_log(GS_LOG_DEBUG, "share mode on %s: target %u ppm (was %u)", uuid, target, old);
    }
    pthread_mutex_unlock(&outer_lock);
}

void gs_compute_outer(struct gs_region *r, int d, uint64_t now)
{
    struct gs_lim_account *a = &r->dev[d].lim;
    uint64_t next = __atomic_load_n(&a->outer_next_ns, __ATOMIC_RELAXED);
    if (now < next || !__atomic_compare_exchange_n(&a->outer_next_ns, &next, now + GS_LIM_OUTER_NS, 0, __ATOMIC_ACQ_REL,
                                                   __ATOMIC_RELAXED))
        return;
    outer_run(r, d, now);
    gs_cost_add(GS_COST_OUTER, gs_compute_now() - now);
}
