/*
 * The process's member slot in each device's ledger (compute_ledger.h).
 */
#define _GNU_SOURCE
#include "compute_ledger.h"
#include "compute_clock.h"
#include "compute_collective.h"
#include "compute_cost.h"
#include "fork_hooks.h"
#include "log.h"
#include "real_driver.h"
#include "runtime.h"
#include "statedir.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* The device ledger of each region device (ledger.h): the process's member
 * slot, joined at its first limited launch there (again after fork). */
static pthread_mutex_t led_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gs_ledger *led[GS_REGION_MAX_DEVICES];
static int led_slot[GS_REGION_MAX_DEVICES];
static unsigned led_gen[GS_REGION_MAX_DEVICES]; /* gs_rt_fork_generation + 1 when joined */
/* When to try opening or joining again, while a lock of the ledger was
 * held at the last try (0: no try pending). A member that gave up at once
 * stayed out for good: the others never saw it, and a share pair in the
 * agent's layout both ran free (0.35 / 0.35 of a device that loses 30 % to
 * switches), whenever a process held the lock past GS_LEDGER_LOCK_WAIT_NS
 * as they joined: a loaded machine's preemption, or a tenant on purpose. */
static uint64_t led_retry_ns[GS_REGION_MAX_DEVICES];
static uint32_t led_weight[GS_REGION_MAX_DEVICES];
static char led_path[GS_REGION_MAX_DEVICES][sizeof gs_rt.cfg.region_path + GS_REGION_UUID_LEN + 16];
static uint64_t led_container;
static int led_beside; /* the ledger directory is the region's (gs_compute_ledger_beside_regions) */

#define REJOIN_NS 100000000ULL                   /* a try costs up to GS_LEDGER_LOCK_WAIT_NS while the lock is held */
#define MAX_REJOINS 8                            /* ledgers a process leaves and joins again (leave_and_rejoin) */
static struct gs_ledger *abandoned[MAX_REJOINS]; /* led_lock: the handles left (gs_compute_ledger_fork_child) */

uint64_t gs_compute_ledger_container_id(const struct stat *st)
{
    return gs_ledger_container_id((uint64_t)st->st_dev, (uint64_t)st->st_ino);
}

/* Where the ledgers are: the configured shared directory (cfg.ledger_dir;
 * the node agent mounts one into every container), else next to the region. */
static int ledger_dir(char *dir, size_t len, struct stat *region)
{
    if (gs_rt_region_dir(dir, len, region) != 0)
        return -1;
    struct stat own, shared;
    led_beside = 1;
    if (gs_rt.cfg.ledger_dir[0]) {
        led_beside = stat(dir, &own) == 0 && stat(gs_rt.cfg.ledger_dir, &shared) == 0 && own.st_dev == shared.st_dev &&
                     own.st_ino == shared.st_ino;
        snprintf(dir, len, "%s", gs_rt.cfg.ledger_dir);
    }
    return 0;
}

/* Opens led_path[d] if not yet open and takes a member slot there
 * (led_lock held); where it cannot be opened (its lock held, written
 * over, another version's) or its lock was held, a later launch tries
 * again (led_retry_ns): a live member restores what was written over
 * (gs_ledger_heal), and the tries cost an open or a lock attempt. */
static void take_slot(int d, uint64_t now)
{
    char err[sizeof led_path[d] + 200] = "";
    if (!led[d])
        led[d] = gs_ledger_open(led_path[d], err, sizeof err);
    int slot = led[d] ? gs_ledger_join(led[d], (int32_t)getpid(), led_container, led_weight[d]) : -1;
    int full = led[d] && slot < 0 && errno != EAGAIN;
    /* a full ledger is tried again too: a tenant that took every free
     * member slot as we joined kept us out for good */
    int busy = !led[d] || slot < 0;
    gs_cost_add(GS_COST_ASK, gs_compute_now() - now);
    int retried = __atomic_load_n(&led_retry_ns[d], __ATOMIC_RELAXED) != 0;
    if (full) {
        if (!retried)
            gs_log(GS_LOG_INFO,
                   "device ledger %s is full; this process tries to join again at later launches, and until then "
                   "corrects for other containers from NVML only",
                   led_path[d]);
    } else if (busy) {
        if (!retried && led[d])
            gs_log(GS_LOG_INFO,
                   "device ledger %s: its lock is held by another process; this process joins at a later launch, "
                   "and until then the other containers do not see it",
                   led_path[d]);
        else if (!retried)
            gs_log(GS_LOG_INFO,
                   "%s; this process joins at a later launch, and until then the other containers do not see it", err);
    } else if (retried) {
        gs_log(GS_LOG_INFO, "device ledger %s: joined, as member %d", led_path[d], slot);
    } else {
        gs_log(GS_LOG_DEBUG, "device ledger %s: container %016llx, member %d", led_path[d],
               (unsigned long long)led_container, slot);
    }
    __atomic_store_n(&led_retry_ns[d], busy ? now + REJOIN_NS : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&led_slot[d], slot, __ATOMIC_RELEASE);
}

void gs_compute_ledger_join(struct gs_region *r, int d)
{
    unsigned gen = __atomic_load_n(&gs_rt_fork_generation, __ATOMIC_RELAXED) + 1;
    pthread_mutex_lock(&led_lock);
    if (led_gen[d] != gen) {
        if (led[d] && led_gen[d] != 0) {
            gs_ledger_forget(led[d]); /* the parent's handle: its slots stay the parent's */
            led[d] = NULL;
        }
        led_gen[d] = gen;
        led_slot[d] = -1;
        led_retry_ns[d] = 0;
        led_weight[d] = gs_lim_weight(&r->dev[d].lim);
        char dir[sizeof gs_rt.cfg.region_path];
        struct stat st;
        if (ledger_dir(dir, sizeof dir, &st) == 0) {
            led_container = gs_compute_ledger_container_id(&st);
            char uuid[GS_REGION_UUID_LEN + 1];
            snprintf(uuid, sizeof uuid, "%.*s", GS_REGION_UUID_LEN, r->dev[d].uuid);
            if (gs_statedir_ledger_path(led_path[d], sizeof led_path[d], dir, uuid) == 0)
                take_slot(d, gs_compute_now());
            else
                gs_log(GS_LOG_INFO,
                       "the device ledger's path under %s is too long; the compute limiter corrects "
                       "for other containers from NVML only",
                       dir);
        }
    }
    pthread_mutex_unlock(&led_lock);
}

void gs_compute_ledger_fork_child(void)
{
    /* the other threads are gone, and may have held it */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    led_lock = fresh;
    for (int d = 0; d < GS_REGION_MAX_DEVICES; d++) {
        /* the parent's slots are not the child's to use; it joins with a
         * handle of its own at its first limited launch */
        if (led[d])
            gs_ledger_fork_child(led[d]);
        led_slot[d] = -1;
    }
    /* the handles left keep a description and a mapping each, and a thread
     * of the parent may have been inside one, holding its lock */
    for (int i = 0; i < MAX_REJOINS; i++)
        if (abandoned[i])
            gs_ledger_fork_child(abandoned[i]);
}

/* An open or join put off while a lock of the ledger was held, tried again
 * once its time has come; a launch that finds another thread trying goes
 * on. */
static void rejoin(int d)
{
    uint64_t now = gs_compute_now();
    if (now < __atomic_load_n(&led_retry_ns[d], __ATOMIC_RELAXED) || pthread_mutex_trylock(&led_lock) != 0)
        return;
    unsigned gen = __atomic_load_n(&gs_rt_fork_generation, __ATOMIC_RELAXED) + 1;
    if (led_gen[d] == gen && led_slot[d] < 0 && led_retry_ns[d] != 0 && now >= led_retry_ns[d])
        take_slot(d, now); /* a forked child joins afresh instead, with a handle of its own */
    pthread_mutex_unlock(&led_lock);
}

struct gs_ledger *gs_compute_ledger_of(int d, int *slot)
{
    if (GS_UNLIKELY(__atomic_load_n(&led_retry_ns[d], __ATOMIC_RELAXED) != 0))
        rejoin(d);
    *slot = __atomic_load_n(&led_slot[d], __ATOMIC_ACQUIRE);
    return *slot >= 0 ? led[d] : NULL;
}

unsigned gs_compute_ledger_claims(int d, uint64_t since, uint64_t wants_since, struct gs_ledger_claim *out,
                                  unsigned max)
{
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    return l ? gs_ledger_claims(l, led_container, since, wants_since, out, max) : 0;
}

void gs_compute_ledger_trust(int d, const struct gs_turn_claim *trusted, unsigned n)
{
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    if (l)
        gs_ledger_trust(l, trusted, n);
}

int gs_compute_ledger_beside_regions(void)
{
    return led_beside;
}

void gs_compute_ledger_publish(int d, uint32_t use_ppm, uint64_t wants_ns)
{
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    if (l)
        gs_ledger_publish(l, slot, use_ppm, wants_ns);
}

void gs_compute_ledger_wanted(int d, uint64_t ns)
{
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    if (l)
        gs_ledger_wanted(l, slot, ns);
}

int gs_compute_ledger_pid_named(int d, uint32_t pid, int (*counts)(uint64_t c, void *ctx), void *ctx)
{
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    return l && gs_ledger_pid_named(l, led_container, (int32_t)pid, counts, ctx);
}

unsigned gs_compute_ledger_pidns_others(int d, int (*counts)(uint64_t c, void *ctx), void *ctx)
{
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    return l ? gs_ledger_pidns_others(l, led_container, l->pidns, counts, ctx) : 0;
}

/* A ledger cut short under our mapping (gs_ledger_cut_short) that cannot be
 * mapped again in place, or whose descriptors the program closed
 * (gs_ledger_descriptors_ours), is left and joined afresh at a later
 * launch, whose open sizes the file back: cut short, the member went on
 * with a ledger nobody else saw, and a share
 * pair of the agent's layout ran free (0.35 / 0.35 of a simulated device
 * that loses 30 % to switches). Each handle left stays allocated (a
 * launching thread may still be in it): a process leaves at most
 * MAX_REJOINS. */
static void leave_and_rejoin(int d, struct gs_ledger *l, const char *why)
{
    static unsigned left;
    pthread_mutex_lock(&led_lock);
    if (led[d] == l && led_slot[d] >= 0 && left <= MAX_REJOINS) {
        if (left < MAX_REJOINS) {
            abandoned[left++] = l;
            gs_ledger_abandon(l);
            led[d] = NULL;
            __atomic_store_n(&led_slot[d], -1, __ATOMIC_RELEASE);
            __atomic_store_n(&led_retry_ns[d], gs_compute_now(), __ATOMIC_RELAXED);
            gs_log(GS_LOG_INFO, "device ledger %s %s; this process joins it again", led_path[d], why);
        } else {
            left++;
            gs_log(GS_LOG_INFO, "device ledger %s %s again; this process stays with what it has", led_path[d], why);
        }
    }
    pthread_mutex_unlock(&led_lock);
}

void gs_compute_ledger_reap(int d)
{
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    if (!l)
        return;
    int ours = gs_ledger_descriptors_ours(l);
    if (gs_ledger_cut_short(l)) {
        static unsigned cuts;
        const char *why = "was cut short under this process (another process truncated it)";
        /* sized back and mapped again in place: no handle is left behind,
         * however often a tenant cuts it (joining afresh each time, a
         * process stayed out after MAX_REJOINS cuts, its neighbours unseen) */
        if (!ours || gs_ledger_map_again(l) != 0) {
            if (!ours || errno != EAGAIN) /* a lock held: the guard stays tripped, the next run tries again */
                leave_and_rejoin(d, l, why);
            return;
        }
        cuts++;
        gs_log(cuts == 1 ? GS_LOG_INFO : GS_LOG_DEBUG, "device ledger %s %s; sized back and mapped again (%u times)",
               led_path[d], why, cuts);
    }
    if (!ours) {
        leave_and_rejoin(d, l, "lost its descriptors (the program closed them)");
        return;
    }
    gs_ledger_heal(l, slot, led_container, (int32_t)getpid(), led_weight[d]);
    gs_ledger_reap(l);
}

uint32_t gs_compute_ledger_claim(const struct gs_lim_account *a)
{
    return a->mode == GS_LIM_CAP ? gs_lim_cap_rate(a->limit_pct) : 0;
}

int gs_compute_ledger_frame(int d, const struct gs_lim_account *a, uint64_t now, struct gs_turn_slot *f)
{
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    return l && gs_ledger_frame(l, slot, now, gs_compute_ledger_claim(a), f);
}

int gs_compute_held_elsewhere(int d, uint64_t now)
{
    const struct gs_region *r = gs_rt_region();
    if (!r || !gs_compute_is_rank(r))
        return 0;
    for (int i = 0; i < GS_REGION_MAX_DEVICES; i++)
        if (i != d && r->dev[i].lim.configured && gs_lim_throttled(&r->dev[i].lim, now))
            return 1;
    return 0;
}

int gs_compute_contends(int d, const struct gs_lim_account *a, uint64_t now)
{
    return gs_lim_throttled(a, now) || gs_compute_collective_spun(d, now) || gs_compute_held_elsewhere(d, now);
}
