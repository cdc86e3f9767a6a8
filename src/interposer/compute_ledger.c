/*
 * The process's member slot in each device's ledger (compute_ledger.h).
 */
#define _GNU_SOURCE
#include "compute_ledger.h"
#include "log.h"
#include "procinfo.h"
#include "runtime.h"
#include "statedir.h"

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
static uint64_t led_container;

void gs_compute_ledger_join(struct gs_region *r, int d)
{
    uint32_t weight = gs_lim_weight(&r->dev[d].lim);
    unsigned gen = __atomic_load_n(&gs_rt_fork_generation, __ATOMIC_RELAXED) + 1;
    pthread_mutex_lock(&led_lock);
    if (led_gen[d] != gen) {
        led_gen[d] = gen;
        led_slot[d] = -1;
        char dir[sizeof gs_rt.cfg.region_path], path[sizeof dir + GS_REGION_UUID_LEN + 16], err[512];
        struct stat st;
        if (gs_rt_region_dir(dir, sizeof dir, &st) == 0) {
            led_container = (uint64_t)st.st_ino;
            char uuid[GS_REGION_UUID_LEN + 1];
            snprintf(uuid, sizeof uuid, "%.*s", GS_REGION_UUID_LEN, r->dev[d].uuid);
            if (!led[d] && gs_statedir_ledger_path(path, sizeof path, dir, uuid) == 0)
                led[d] = gs_ledger_open(path, err, sizeof err);
            if (!led[d])
                gs_log(GS_LOG_INFO, "%s; the compute limiter corrects for other containers from NVML only", err);
            uint64_t start = 0;
            if (led[d] && gs_proc_start_time(getpid(), &start) == 0)
                led_slot[d] = gs_ledger_join(led[d], (int32_t)getpid(), start, gs_proc_pidns(), led_container,
                                             weight);
            if (led[d] && led_slot[d] < 0)
                gs_log(GS_LOG_INFO, "device ledger %s is full; corrections for other containers from NVML only",
                       path);
        }
    }
    pthread_mutex_unlock(&led_lock);
}

struct gs_ledger *gs_compute_ledger_of(int d, int *slot)
{
    *slot = led_slot[d];
    return *slot >= 0 ? led[d] : NULL;
}

static int alive(int32_t pid, uint64_t start_time, uint64_t pidns)
{
    return gs_proc_alive(pid, start_time, pidns, gs_proc_pidns());
}

uint64_t gs_compute_ledger_busy_weight(int d, uint64_t since)
{
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    return l ? gs_ledger_busy_weight(l, led_container, since) : 0;
}

int gs_compute_ledger_has_pid(int d, uint32_t pid)
{
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    return l && gs_ledger_has_pid(l, led_container, (int32_t)pid);
}

int gs_compute_ledger_others(int d)
{
    int slot;
    struct gs_ledger *l = gs_compute_ledger_of(d, &slot);
    if (!l)
        return 0;
    gs_ledger_reap(l, alive);
    return gs_ledger_others(l, led_container);
}

uint64_t gs_compute_ledger_container(void)
{
    return led_container;
}
