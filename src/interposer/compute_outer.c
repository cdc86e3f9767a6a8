/*
 * The limiter's slow outer loop, run by one process of the container at a
 * time (claimed by CAS on the account's outer_next_ns), at most every
 * GS_LIM_OUTER_NS, on that process's outer thread (compute_outer_thread.c),
 * in three steps: outer_gather reads the account, NVML and
 * the device ledger; gs_lim_outer_decide (limiter.c, pure) decides c, s,
 * the use to publish and the share target; outer_publish stores them.
 * What it gathers:
 * - NVML per-process utilisation since the last run, split into ours (pids
 *   of our region's live processes) and the others';
 * - the other containers of the device ledger and their demand, weighed
 *   by their regions where those lie beside ours (the flat layout), else by
 *   the node agent's roster of the GPU (roster.h);
 * - in share mode, the weights of the busy GPU users outside the ledger:
 *   a busy pid that belongs to a sibling region (another container's state
 *   file in the same directory, read as a private snapshot) counts with that
 *   container's weight, all other busy pids (an MPS server excepted)
 *   together with the default weight 100.
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
#include "nvml_procs.h"
#include "real_driver.h"
#include "region_view.h"
#include "roster.h"
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
/* An NVML whose init failed (a driver still coming up) is tried again this
 * often: once given up for good, a share container never again counted a
 * busy user outside the ledger (nvml_lock). A library that would not load
 * stays unloaded (gs_real_resolve). */
#define NVML_RETRY_NS 2000000000ULL
static uint64_t nvml_retry_ns;

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

/* What NVML says of the whole device: busy fraction, power draw (the mean
 * over the last second, and the instantaneous reading where NVML has one)
 * and limit; -1 where unknown. lists_ours: whether its list of processes with a
 * context names one of ours (0: it names others only, so its pids are of
 * another pid namespace; -1: unknown). */
struct devinfo {
    int64_t busy_ppm, power_mw, power_now_mw, limit_mw;
    int lists_ours;
};

/* NVML's instantaneous draw of device h in mW, or -1: where the field is
 * missing, or reads past twice the limit (a value no draw reaches). */
static int64_t power_now(nvmlDevice_t h, int64_t limit_mw)
{
    gs_pfn_nvmlDeviceGetFieldValues fields = GS_REAL_NVML(nvmlDeviceGetFieldValues);
    nvmlFieldValue_t f = { .fieldId = NVML_FI_DEV_POWER_INSTANT };
    if (!fields || fields(h, 1, &f) != NVML_SUCCESS || f.nvmlReturn != NVML_SUCCESS)
        return -1;
    int64_t mw = f.valueType == NVML_VALUE_TYPE_UNSIGNED_INT         ? (int64_t)f.value.uiVal
                 : f.valueType == NVML_VALUE_TYPE_UNSIGNED_LONG_LONG ? (int64_t)(f.value.ullVal & INT64_MAX)
                                                                     : -1;
    return mw > 0 && limit_mw > 0 && mw <= 2 * limit_mw ? mw : -1;
}

/* Whether NVML's processes on device h include one of ours (struct
 * devinfo's lists_ours); -1 without ours to look for. nvml_lock held. */
static int lists_ours(nvmlDevice_t h, const struct pidset *ours)
{
    static unsigned int pids[GS_REGION_MAX_PROCS];
    int n = ours ? gs_nvml_compute_procs(h, pids, NULL, GS_REGION_MAX_PROCS) : -1;
    if (n <= 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (in_set(pids[i], (void *)ours))
            return 1;
    return 0;
}

/* NVML's per-process samples of device h since seen, the newest
 * MAX_SAMPLES of them, into out (nvml_lock held); returns how many. A
 * buffer too small gets NVML_ERROR_INSUFFICIENT_SIZE and no samples. The
 * count to allocate is documented only for a call without a buffer (the
 * history since seen can be long): ask it, grow to it, doubling at least
 * (a driver may say less than it needs), and read again. */
static unsigned read_process_samples(gs_pfn_nvmlDeviceGetProcessUtilization util, nvmlDevice_t h, uint64_t seen,
                                     struct gs_lim_sample *out)
{
    static nvmlProcessUtilizationSample_t *buf;
    static unsigned cap;
    static int logged;
    nvmlReturn_t rc = NVML_ERROR_INSUFFICIENT_SIZE;
    unsigned n = 0;
    for (int tries = 0; tries < 3 && rc == NVML_ERROR_INSUFFICIENT_SIZE; tries++) {
        if (tries > 0 || !buf) {
            unsigned need = 0;
            nvmlReturn_t counted = util(h, NULL, &need, seen);
            if (counted != NVML_ERROR_INSUFFICIENT_SIZE && counted != NVML_SUCCESS) {
                rc = counted;
                break;
            }
            unsigned want = need + 64 > 2 * cap ? need + 64 : 2 * cap;
            want = want > MAX_NVML_SAMPLES ? MAX_NVML_SAMPLES : want;
            if (want <= cap)
                break; /* as large as it may grow: this run goes without */
            nvmlProcessUtilizationSample_t *grown = realloc(buf, want * sizeof *buf);
            if (!grown)
                break;
            buf = grown;
            cap = want;
        }
        n = cap;
        rc = util(h, buf, &n, seen);
        n = n > cap ? cap : n; /* never more than the buffer holds, whatever a driver says */
    }
    if (rc != NVML_SUCCESS) {
        if (rc != NVML_ERROR_NOT_FOUND && !logged) { /* NOT_FOUND: no samples since seen */
            logged = 1;
            gs_log(GS_LOG_DEBUG,
                   "nvmlDeviceGetProcessUtilization: %d, with room for %u samples; this outer run corrects for "
                   "contention from device utilisation only (logged once)",
                   (int)rc, cap);
        }
        return 0;
    }
    /* more than out holds: sorted in a buffer of their size, the newest kept */
    static struct gs_lim_sample all[MAX_NVML_SAMPLES];
    struct gs_lim_sample *s = n <= MAX_SAMPLES ? out : all;
    for (unsigned i = 0; i < n; i++)
        s[i] = (struct gs_lim_sample){ buf[i].pid, buf[i].smUtil, buf[i].timeStamp };
    unsigned got = gs_lim_keep_newest(s, n, MAX_SAMPLES);
    if (s != out)
        memcpy(out, s, got * sizeof *out);
    return got;
}

/* Samples of device uuid since *seen (none where out is NULL); returns how
 * many (0 if none/unusable), the newest MAX_SAMPLES of them if there are
 * more, and fills *di (its lists_ours only where ours is given). */
static unsigned read_samples(const char *uuid, uint64_t seen, const struct pidset *ours, struct gs_lim_sample *out,
                             struct devinfo *di)
{
    unsigned got = 0;
    *di = (struct devinfo){ -1, -1, -1, -1, -1 };
    pthread_mutex_lock(&nvml_lock);
    if (nvml_state != 1 && gs_compute_now() >= nvml_retry_ns) {
        int first = nvml_state == 0;
        nvml_state = -1;
        if (gs_real_resolve(GS_LIB_NVML, 1) == 0) {
            gs_pfn_nvmlInit_v2 init = GS_REAL_NVML(nvmlInit_v2);
            if (init && init() == NVML_SUCCESS)
                nvml_state = 1;
        }
        if (nvml_state < 0) {
            nvml_retry_ns = gs_compute_now() + NVML_RETRY_NS;
            if (first)
                gs_log(GS_LOG_INFO, "NVML unavailable: the compute limiter runs without its contention correction "
                                    "(tried again every 2 s)");
        } else if (!first) {
            gs_log(GS_LOG_INFO, "NVML available: the compute limiter corrects for contention again");
        }
    }
    gs_pfn_nvmlDeviceGetHandleByUUID by_uuid = GS_REAL_NVML(nvmlDeviceGetHandleByUUID);
    gs_pfn_nvmlDeviceGetProcessUtilization util = GS_REAL_NVML(nvmlDeviceGetProcessUtilization);
    gs_pfn_nvmlDeviceGetUtilizationRates rates = GS_REAL_NVML(nvmlDeviceGetUtilizationRates);
    nvmlDevice_t h;
    if (nvml_state == 1 && by_uuid && by_uuid(uuid, &h) == NVML_SUCCESS) {
        uint64_t t = gs_compute_now();
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
        di->power_now_mw = power_now(h, di->limit_mw);
        gs_cost_lap(&t, GS_COST_NVML_DEVICE);
        if (ours) {
            di->lists_ours = lists_ours(h, ours);
            gs_cost_lap(&t, GS_COST_NVML_LIST);
        }
        if (util && out)
            got = read_process_samples(util, h, seen, out);
        if (out)
            gs_cost_lap(&t, GS_COST_NVML_SAMPLES);
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

/* The distinct pids, none of them ours, that NVML sampled on the device
 * since a run's last look, with their summed busy time: gathered once a run
 * for both the MPS check and the weights of the busy others. At most
 * MAX_BUSY pids; each asked its name at most once. */
struct others_sampled {
    int n;
    unsigned stamps; /* distinct sample times: the time the sums are of */
    uint32_t pid[MAX_BUSY];
    uint64_t sum[MAX_BUSY];
    int8_t mps[MAX_BUSY]; /* -1 not asked yet, else is_mps_server's answer */
};

static void gather_others(const struct gs_lim_sample *s, unsigned n, uint64_t since, const struct pidset *ours,
                          struct others_sampled *o)
{
    o->n = 0;
    o->stamps = 0;
    for (unsigned i = 0; i < n; i++) {
        if (s[i].ts_us <= since)
            continue;
        o->stamps += (unsigned)gs_lim_new_stamp(s, i);
        if (in_set(s[i].pid, (void *)ours))
            continue;
        int k = 0;
        while (k < o->n && o->pid[k] != s[i].pid)
            k++;
        if (k == o->n) {
            if (o->n == MAX_BUSY)
                continue;
            o->pid[k] = s[i].pid;
            o->sum[k] = 0;
            o->mps[k] = -1;
            o->n++;
        }
        o->sum[k] += s[i].sm_util;
    }
}

static int other_is_mps_server(struct others_sampled *o, int k)
{
    if (o->mps[k] < 0)
        o->mps[k] = (int8_t)is_mps_server(o->pid[k]);
    return o->mps[k];
}

/* Whether an MPS server is among the others NVML sampled busy: an MPS
 * client's time is in the server's samples, which then no more measure us
 * than a pod's host pids do (struct gs_outer_in's pids_hidden). */
static int mps_in_samples(struct others_sampled *o)
{
    for (int k = 0; k < o->n; k++)
        if (o->sum[k] > 0 && other_is_mps_server(o, k))
            return 1;
    return 0;
}

/* Another container's account on device uuid; NULL where it has no limit
 * there. */
static const struct gs_lim_account *region_account(const struct gs_region *o, const char *uuid)
{
    for (uint32_t dd = 0; dd < o->ndevices && dd < GS_REGION_MAX_DEVICES; dd++)
        if (strncmp(o->dev[dd].uuid, uuid, GS_REGION_UUID_LEN) == 0 && o->dev[dd].lim.configured == 1)
            return &o->dev[dd].lim;
    return NULL;
}

/* The weight another container's region gives it on device uuid: its share
 * weight, or its cap if capped; the default where it has no limit there. */
static uint32_t region_weight(const struct gs_region *o, const char *uuid)
{
    const struct gs_lim_account *a = region_account(o, uuid);
    uint32_t w = a ? gs_lim_weight(a) : GS_LIM_DEFAULT_WEIGHT;
    return w > GS_LIM_MAX_WEIGHT ? GS_LIM_MAX_WEIGHT : w;
}

/* Its cap there in ppm; 0 in share mode or without one. */
static uint32_t region_cap(const struct gs_region *o, const char *uuid)
{
    const struct gs_lim_account *a = region_account(o, uuid);
    return a && a->mode == GS_LIM_CAP && a->limit_pct > 0 && a->limit_pct < 100 ? a->limit_pct * 10000U : 0;
}

/* The claims of the device's ledger the last trusted_demands read, and how
 * far each was verified: every member's claim, not the first
 * GS_LIM_MAX_DEMANDS containers' (forged ones in the low slots hid the
 * honest ones behind them). */
static struct gs_ledger_claim ledger_claim[GS_LEDGER_MEMBERS];
static struct gs_lim_claim ledger_checked[GS_LEDGER_MEMBERS];
static unsigned nledger_claims;

/* Whether container c is among the claims trusted_demands read (the run's,
 * just before), with verified: only where that claim was verified. */
static int claimed(uint64_t c, int verified)
{
    for (unsigned i = 0; i < nledger_claims; i++)
        if (ledger_claim[i].container == c)
            return !verified || ledger_checked[i].verified_weight != 0;
    return 0;
}

static int claimed_at_all(uint64_t c, void *ctx)
{
    (void)ctx;
    return claimed(c, 0);
}

/* One sibling region met by the scan: adds its weight when one of the busy
 * pids belongs to it, unless its container's verified claim in the ledger
 * counts it already. */
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
    if (hit && !claimed(gs_compute_ledger_container_id(&sb), 1))
        sc->total += region_weight(o, sc->uuid);
    gs_region_view_free(v);
    return 0;
}

/* The ledger's claims checked against the regions beside ours: a claim
 * whose container id is a region there with a live process counts with the
 * weight that region gives it (gs_lim_trusted_demands). */
struct claim_check {
    const struct gs_ledger_claim *claim;
    struct gs_lim_claim *out;
    unsigned n;
    const char *uuid;
};

static int verify_sibling(const char *path, const char *key, void *arg)
{
    (void)key;
    struct claim_check *cc = arg;
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return 0;
    uint64_t id = gs_compute_ledger_container_id(&sb);
    unsigned i = 0;
    while (i < cc->n && cc->claim[i].container != id)
        i++;
    char err[256];
    struct gs_region_view *v = i < cc->n ? gs_region_view_open(path, err, sizeof err) : NULL;
    if (!v)
        return 0;
    for (int p = 0; p < GS_REGION_MAX_PROCS; p++)
        if (gs_region_view_alive(v, p)) {
            uint32_t w = region_weight(&v->r, cc->uuid);
            cc->out[i].verified_weight = w ? w : 1; /* weight 0 (no cap): still verified */
            cc->out[i].verified_cap_ppm = region_cap(&v->r, cc->uuid);
            break;
        }
    gs_region_view_free(v);
    return 0;
}

/* The roster's word on the claims no region beside ours verified: a
 * container on it counts with the smaller of the weight it claims and the
 * roster's, capped if the roster says so. A roster that is missing,
 * unreadable, on a writable mount or malformed is none (said once per
 * spell): the claims then count as they would without it, never more.
 * outer_lock held (hence the static buffers, off the launching thread's
 * stack). */
static void weigh_by_roster(const char *uuid, const struct gs_ledger_claim *claim, struct gs_lim_claim *out, unsigned n)
{
    static struct gs_roster roster;
    static int failing;
    static char path[sizeof gs_rt.cfg.roster_dir + GS_REGION_UUID_LEN + 16], err[sizeof path + 200];
    if (!gs_rt.cfg.roster_dir[0])
        return;
    int bad = gs_statedir_roster_path(path, sizeof path, gs_rt.cfg.roster_dir, uuid) != 0;
    if (bad)
        snprintf(err, sizeof err, "its path under %s is too long", gs_rt.cfg.roster_dir);
    if (bad || gs_roster_load(path, &roster, err, sizeof err) != 0) {
        if (!failing)
            gs_log(GS_LOG_INFO, "roster of %s: %s; other containers' ledger members count as unverified", uuid, err);
        failing = 1;
        return;
    }
    failing = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct gs_roster_entry *e = out[i].verified_weight ? NULL : gs_roster_find(&roster, claim[i].container);
        uint32_t c = out[i].d.weight ? out[i].d.weight : 1;
        if (!e)
            continue;
        out[i].verified_weight = c < e->weight ? c : e->weight;
        out[i].verified_cap_ppm = e->capped && e->weight < 100 ? e->weight * 10000U : 0;
    }
}

/* The other containers of device d's ledger active since `since`, as much
 * as their claims can be trusted, into dem. */
static unsigned trusted_demands(int d, const char *uuid, uint64_t now, int64_t dev_ppm, struct gs_lim_demand *dem)
{
    unsigned n = nledger_claims = gs_compute_ledger_claims(d, now - 2 * GS_LIM_OUTER_NS, now - GS_LIM_THROTTLED_NS,
                                                           ledger_claim, GS_LEDGER_MEMBERS);
    if (n == 0) {
        gs_compute_ledger_trust(d, NULL, 0);
        return 0;
    }
    for (unsigned i = 0; i < n; i++) {
        ledger_checked[i] = (struct gs_lim_claim){ ledger_claim[i].d, 0, 0 };
        ledger_checked[i].d.quiet_ns = now > ledger_claim[i].active_ns ? now - ledger_claim[i].active_ns : 0;
    }
    struct claim_check cc = { .claim = ledger_claim, .out = ledger_checked, .n = n, .uuid = uuid };
    char dir[sizeof gs_rt.cfg.region_path];
    struct stat self;
    if (gs_rt_region_dir(dir, sizeof dir, &self) == 0)
        gs_statedir_each_region(dir, verify_sibling, &cc);
    weigh_by_roster(uuid, ledger_claim, ledger_checked, n);
    /* the turn frame's slots: a verified capped container's at most its cap */
    struct gs_turn_claim trusted[GS_LEDGER_MEMBERS];
    unsigned nt = 0;
    for (unsigned i = 0; i < n; i++)
        if (ledger_checked[i].verified_weight && ledger_checked[i].verified_cap_ppm)
            trusted[nt++] = (struct gs_turn_claim){ ledger_claim[i].container, ledger_checked[i].verified_cap_ppm };
    gs_compute_ledger_trust(d, trusted, nt);
    return gs_lim_trusted_demands(ledger_checked, n, gs_compute_ledger_beside_regions(), dev_ppm, dem);
}

/* Sum of the weights of the busy others (share mode) on device dev that
 * are not in its ledger. */
static uint64_t busy_weight(struct others_sampled *o, const char *uuid, int dev)
{
    int busy[MAX_BUSY], nb = 0;
    for (int k = 0; k < o->n; k++) {
        /* counted from the device ledger. Beside the regions, a pid is the
         * ledger's where its region is a verified claim's (weigh_sibling),
         * never because a member names it: a member is a claim, and one
         * naming a busy process outside the ledger hid it. Elsewhere the
         * regions cannot be read, and an active claim's member covers the
         * pid it names: an unverified one counts in the rest, which weighs
         * what a process outside would */
        if (!gs_compute_ledger_beside_regions() && gs_compute_ledger_pid_named(dev, o->pid[k], claimed_at_all, NULL))
            continue;
        if (o->stamps && o->sum[k] * 10000U / o->stamps >= GS_LIM_BUSY_PPM && !other_is_mps_server(o, k))
            busy[nb++] = k;
    }
    if (nb == 0)
        return 0;
    /* NVML names another pid namespace's processes by host pids, which no
     * member names where it translates ours (driver 580: share pods 30 : 70
     * each counted the other as outside too, and ran at 0.281 / 0.644 on an
     * H100). As many busy pids as live members number theirs elsewhere may
     * be theirs; only more than that are someone outside the ledger */
    if (!gs_compute_ledger_beside_regions() &&
        (unsigned)nb <= gs_compute_ledger_pidns_others(dev, claimed_at_all, NULL))
        return 0;
    /* Weights from sibling regions (read-only). */
    struct sibling_scan sc = { .pid = o->pid, .busy = busy, .nb = nb, .uuid = uuid };
    char dir[sizeof gs_rt.cfg.region_path];
    if (gs_rt_region_dir(dir, sizeof dir, &sc.self) == 0)
        gs_statedir_each_region(dir, weigh_sibling, &sc);
    /* Pids no region names cannot be told apart by container: together
     * they weigh one, or a party would multiply its weight by forking. */
    for (int b = 0; b < nb; b++)
        if (!sc.found[b])
            return sc.total + GS_LIM_DEFAULT_WEIGHT;
    return sc.total;
}

/* What the last outer run decided for the launch path, per device. */
static uint8_t fine_probe[GS_REGION_MAX_DEVICES], graph_coarse[GS_REGION_MAX_DEVICES],
    yield_queue[GS_REGION_MAX_DEVICES];

static int flag_of(const uint8_t *flags, int dev)
{
    return dev >= 0 && dev < GS_REGION_MAX_DEVICES && __atomic_load_n(&flags[dev], __ATOMIC_RELAXED);
}

int gs_compute_fine_probe(int dev)
{
    return flag_of(fine_probe, dev);
}

int gs_compute_graph_coarse(int dev)
{
    return flag_of(graph_coarse, dev);
}

int gs_compute_yield(int dev)
{
    return flag_of(yield_queue, dev);
}

/* The outer loop's state, private to the thread that runs it (outer_lock):
 * the NVML samples read and the pids of our region's live processes. */
static pthread_mutex_t outer_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gs_lim_sample samples[MAX_SAMPLES];
static struct pidset ours;
static struct others_sampled sampled_others;

/* What one run gathers besides its decision's input: where to publish it. */
struct outer_gathered {
    struct gs_outer_in in;
    struct gs_lim_demand dem[GS_LIM_MAX_DEMANDS];
    char uuid[GS_REGION_UUID_LEN];
    int overlapped; /* another process's run of the container read this run's samples
                     * (gs_lim_take_samples): it decides nothing */
    int look_only;  /* the run only learns where NVML's samples end: they are history from
                    * before we started, or (c not learnt) the one sample began before our last look */
};
static struct outer_gathered gathered; /* outer_lock */
/* Per device, where NVML's samples ended at this process's first look
 * (outer_lock): the sample after it began before the look. Process-local:
 * another process of the container that runs the next outer loop takes that
 * sample as it comes. */
static uint64_t looked_at_us[GS_REGION_MAX_DEVICES];
/* Per device, whether this process's last run read no per-process samples
 * (gs_lim_free_far_under; outer_lock). */
static uint8_t skipped_samples[GS_REGION_MAX_DEVICES];

/* Reads the account, NVML and the device ledger for account a of device d
 * (outer_lock held). */
static void outer_gather(struct gs_region *r, int d, uint64_t now, struct outer_gathered *g)
{
    struct gs_lim_account *a = &r->dev[d].lim;
    struct gs_outer_in *in = &g->in;
    uint64_t last = __atomic_exchange_n(&a->outer_last_ns, now, __ATOMIC_RELAXED);
    uint64_t occ = __atomic_load_n(&a->occ_ns, __ATOMIC_RELAXED);
    uint64_t occ_d = occ - __atomic_exchange_n(&a->outer_occ_mark, occ, __ATOMIC_RELAXED);
    *in = (struct gs_outer_in){ .now = now, .interval_ns = now > last ? now - last : 1 };
    in->occ_ppm = (uint64_t)((unsigned __int128)occ_d * GS_LIM_PPM / in->interval_ns);
    /* low 32 bits: the difference holds for waits under 4.29 s a run */
    uint32_t waited = (uint32_t)__atomic_load_n(&a->wait_ns, __ATOMIC_RELAXED);
    in->waited_ns = (uint32_t)(waited - __atomic_exchange_n(&a->wait_mark, waited, __ATOMIC_RELAXED));
    memcpy(g->uuid, r->dev[d].uuid, sizeof g->uuid);
    g->uuid[sizeof g->uuid - 1] = '\0';
    uint64_t seen = __atomic_load_n(&a->nvml_seen_us, __ATOMIC_RELAXED);
    struct devinfo di;
    uint64_t read_from = gs_compute_now();
    live_pids(r, &ours);
    int skip = gs_lim_free_far_under(a);
    /* a cap running free far under its bound reads neither samples nor the
     * list of processes that tells whether they can name us */
    unsigned n = read_samples(g->uuid, seen, skip ? NULL : &ours, skip ? NULL : samples, &di);
    gs_cost_add(GS_COST_NVML, gs_compute_now() - read_from);
    /* a first measure of c is taken whole: not from the sample that began
     * before the first look (gs_lim_oldest_after), only on the run after
     * it (on every run while c was unlearnt, one sample a run was always
     * left out and c never learnt) */
    int after_look = seen != 0 && seen == looked_at_us[d] && __atomic_load_n(&a->corr_ppm, __ATOMIC_RELAXED) == 0;
    uint64_t from = after_look ? gs_lim_oldest_after(samples, n, seen) : seen;
    if (skipped_samples[d])
        from = gs_lim_recent_from(samples, n, from,
                                  (in->interval_ns < GS_LIM_OUTER_NS ? in->interval_ns : GS_LIM_OUTER_NS) / 1000);
    skipped_samples[d] = (uint8_t)skip;
    /* another process's run that overlapped this one (one that took past
     * an interval: NVML's first init, a stall) may have read them too */
    uint64_t newest;
    g->overlapped = !gs_lim_take_samples(&a->nvml_seen_us, seen, samples, n, from, in_set, &ours, &in->our_ppm,
                                         &in->others_ppm, &newest);
    if (g->overlapped)
        return;
    if (seen == 0 && n > 0)
        looked_at_us[d] = newest;
    else if (newest != seen)
        looked_at_us[d] = 0; /* the sample after the look has come */
    g->look_only = (seen == 0 && n > 0) || (from != seen && newest == from);
    in->dev_ppm = di.busy_ppm;
    gather_others(samples, n, seen, &ours, &sampled_others);
    in->pids_hidden = di.lists_ours == 0 || (in->our_ppm < GS_LIM_BUSY_PPM && in->others_ppm >= GS_LIM_BUSY_PPM &&
                                             mps_in_samples(&sampled_others));
    in->power_mw = di.power_mw;
    in->power_now_mw = di.power_now_mw;
    in->limit_mw = di.limit_mw;
    in->power_exp_milli = gs_rt.cfg.power_exp_milli;
    if (g->look_only)
        return;
    in->yield_on = gs_rt.cfg.share_yield_us != 0;
    gs_compute_ledger_reap(d);
    /* the other containers of the device ledger active in the last two runs */
    in->ndem = trusted_demands(d, g->uuid, now, in->dev_ppm, g->dem);
    in->dem = g->dem;
    /* NVML names host pids; in a pid namespace of its own (a pod without
     * hostPID) none is ours or a ledger member's, and each would count as
     * an outside container (two share pods 30 : 70 got 0.10 / 0.23 on the
     * simulated driver): where NVML lists none of our processes, or showed
     * none of our busy time under its pids, nobody outside the ledger can
     * be told from us. The list is needed too: a tenant held under 5 % has
     * too little busy time to show, and counting the others as outside
     * held one of four share pods 10 : 20 : 30 : 40 at 0.025 */
    int pids_ours = di.lists_ours != 0 && !(in->our_ppm == 0 && in->occ_ppm >= GS_LIM_BUSY_PPM);
    /* nobody outside the ledger after we idled: a process that had stopped
     * meanwhile cut a share container of weight 70 to 70 / 170 until the
     * next run */
    if (a->mode == GS_LIM_SHARE && n > 0 && pids_ours && !gs_lim_outer_idled(in->interval_ns, in->our_ppm))
        in->outside_weight = busy_weight(&sampled_others, g->uuid, d);
}

/* Stores the decision where the launch path and the other containers read
 * it. */
static void outer_publish(struct gs_region *r, int d, const struct outer_gathered *g, const struct gs_outer_out *o)
{
    struct gs_lim_account *a = &r->dev[d].lim;
    const struct gs_outer_in *in = &g->in;
    __atomic_store_n(&fine_probe[d], (uint8_t)o->fine_probe, __ATOMIC_RELAXED);
    __atomic_store_n(&graph_coarse[d], (uint8_t)o->graph_coarse, __ATOMIC_RELAXED);
    uint32_t old = gs_lim_outer_apply(a, o, in->now);
    /* a wait stamped after this run's clock reads as negative: the run read
     * the clock before NVML, while the launching thread went on */
    char wanted[40] = "never";
    if (o->wants_ns && GS_LOG_DEBUG <= gs_log_threshold)
        snprintf(wanted, sizeof wanted, "%lld ms ago", (long long)(in->now - o->wants_ns) / 1000000);
    gs_log(GS_LOG_DEBUG,
           "outer %s: occupancy %llu ppm, waited %llu us of %llu, nvml ours %lld others %lld device %lld ppm, "
           "%u active in the ledger, power %lld (now %lld)/%lld mW -> c %u%s s %u, use %u ppm, wanted %s",
           g->uuid, (unsigned long long)in->occ_ppm, (unsigned long long)in->waited_ns / 1000,
           (unsigned long long)in->interval_ns / 1000, (long long)in->our_ppm, (long long)in->others_ppm,
           (long long)in->dev_ppm, in->ndem, (long long)in->power_mw, (long long)in->power_now_mw,
           (long long)in->limit_mw, gs_lim_corr_of(o->corr), o->corr ? "" : " (not learnt)", gs_lim_speed_of(o->speed),
           o->use_ppm, wanted);
    gs_compute_ledger_publish(d, o->use_ppm, o->wants_ns);
    __atomic_store_n(&yield_queue[d], (uint8_t)o->yield, __ATOMIC_RELAXED);
    if (a->mode == GS_LIM_CAP && (old >= GS_LIM_PPM) != (o->target >= GS_LIM_PPM))
        gs_log(GS_LOG_DEBUG, "cap %u %% on %s: %s at device %lld ppm busy, tokens %lld us", a->limit_pct, g->uuid,
               o->target >= GS_LIM_PPM ? "running free" : "back to windows", (long long)in->dev_ppm,
               (long long)__atomic_load_n(&a->tokens, __ATOMIC_RELAXED) / 1000);
    if (a->mode == GS_LIM_SHARE && old != o->target && GS_LOG_DEBUG <= gs_log_threshold) {
        char others[GS_LIM_MAX_DEMANDS * 40] = "";
        size_t at = 0;
        for (unsigned i = 0; i < in->ndem && at < sizeof others; i++)
            at += (size_t)snprintf(others + at, sizeof others - at, " %u/%u%s%s", in->dem[i].weight, in->dem[i].use_ppm,
                                   in->dem[i].wants_more ? "+" : "", in->dem[i].cap_ppm ? "c" : "");
        gs_log(GS_LOG_DEBUG, "share mode on %s: target %u ppm (was %u); others (weight/use ppm, + wants more):%s%s",
               g->uuid, o->target, old, in->ndem ? others : " none",
               in->outside_weight ? ", and outside the ledger" : "");
    }
}

static int stopping; /* outer_lock: the process is exiting */

void gs_compute_outer_run(struct gs_region *r, int d)
{
    pthread_mutex_lock(&outer_lock);
    if (!stopping) {
        uint64_t now = gs_compute_now();
        outer_gather(r, d, now, &gathered);
        if (gathered.overlapped) {
            gs_log(GS_LOG_DEBUG, "outer %s: another process's run read NVML's samples first; this one decides nothing",
                   gathered.uuid);
        } else if (gathered.look_only) {
            const struct gs_outer_in *in = &gathered.in;
            uint32_t s = gs_lim_outer_look_only(&r->dev[d].lim, in);
            gs_log(GS_LOG_DEBUG,
                   "outer %s: a first look at NVML's samples (no c from it): occupancy %llu ppm, waited %llu us of "
                   "%llu, device %lld ppm, power %lld (now %lld)/%lld mW -> s %u%s",
                   gathered.uuid, (unsigned long long)in->occ_ppm, (unsigned long long)in->waited_ns / 1000,
                   (unsigned long long)in->interval_ns / 1000, (long long)in->dev_ppm, (long long)in->power_mw,
                   (long long)in->power_now_mw, (long long)in->limit_mw, gs_lim_speed_of(s), s ? "" : " (not learnt)");
        } else {
            struct gs_outer_out o;
            gs_lim_outer_decide(&r->dev[d].lim, &gathered.in, &o);
            outer_publish(r, d, &gathered, &o);
        }
        gs_cost_add(GS_COST_OUTER, gs_compute_now() - now);
    }
    pthread_mutex_unlock(&outer_lock);
}

void gs_compute_outer_stop(void)
{
    pthread_mutex_lock(&outer_lock); /* a run in progress ends first */
    stopping = 1;
    pthread_mutex_unlock(&outer_lock);
}

void gs_compute_outer_fork_prepare(void)
{
    pthread_mutex_lock(&outer_lock);
    pthread_mutex_lock(&nvml_lock);
}

void gs_compute_outer_fork_parent(void)
{
    pthread_mutex_unlock(&nvml_lock);
    pthread_mutex_unlock(&outer_lock);
}

void gs_compute_outer_fork_child(void)
{
    pthread_mutex_unlock(&nvml_lock);
    pthread_mutex_unlock(&outer_lock);
}

void gs_compute_outer(struct gs_region *r, int d, uint64_t now)
{
    struct gs_lim_account *a = &r->dev[d].lim;
    uint64_t next = __atomic_load_n(&a->outer_next_ns, __ATOMIC_RELAXED);
    if (now < next || !__atomic_compare_exchange_n(&a->outer_next_ns, &next, now + GS_LIM_OUTER_NS, 0, __ATOMIC_ACQ_REL,
                                                   __ATOMIC_RELAXED))
        return;
    if (!gs_compute_outer_post(d))
        gs_compute_outer_run(r, d); /* no thread of its own: on the launching thread */
}
