#define _GNU_SOURCE
#include "runtime.h"
#include "../core/alloc_table.h"
#include "fork_hooks.h"
#include "log.h"
#include "real_driver.h"
#include "../core/statedir.h"
#include "../core/uuid_format.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

struct gs_runtime gs_rt;

static struct gs_region *region;
/* This process's own descriptor of the region file (never an inherited
 * one): it holds the lock that keeps our slot alive (region.h). */
static int region_fd = -1;
static struct stat region_id; /* the file region maps, to reopen only that one */
static int slot = -1;
static int finished; /* setup_lock: the slot was handed back at exit */
static int dev_map[GS_MAX_DEVICES];
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static int broken_reported;
static int region_private;    /* the default region, in a directory anyone may write */
static int region_agent_made; /* a node agent's container: its region exists, made by the agent */

static void set_broken(const char *why)
{
    static const char prefix[] = "gpuslice: "; /* gs_log's own prefix names gpuslice already */
    if (strncmp(why, prefix, sizeof prefix - 1) == 0)
        why += sizeof prefix - 1;
    snprintf(gs_rt.error, sizeof gs_rt.error, "%s", why);
    __atomic_store_n(&gs_rt.mode, GS_MODE_BROKEN, __ATOMIC_RELEASE);
}

/* The region cannot be used: say what, why, and what to do. */
static void set_region_broken(const char *why)
{
    char msg[sizeof gs_rt.error];
    snprintf(msg, sizeof msg,
             "%.600s; the container's limits cannot be kept (a node agent or `gpuslice run` prepares the state "
             "directory: check that it is mounted and writable for this user, remove a damaged region file, "
             "then restart)",
             why);
    set_broken(msg);
}

void gs_rt_report_broken(void)
{
    if (!__atomic_exchange_n(&broken_reported, 1, __ATOMIC_RELAXED))
        gs_log(GS_LOG_ERROR, "%s; refusing GPU access rather than running without the configured limits", gs_rt.error);
}

unsigned gs_rt_fork_generation;

/* Whether fd is a descriptor of the region file we opened (region_id). */
static int is_region_fd(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && st.st_dev == region_id.st_dev && st.st_ino == region_id.st_ino;
}

static int own_fd_and_mapping(struct gs_region *r);

/* fork(): the child is a new process with no allocations and no slot. */
void gs_rt_fork_prepare(void)
{
    pthread_mutex_lock(&setup_lock);
    gs_alloc_lock_all();
}

void gs_rt_fork_parent(void)
{
    gs_alloc_unlock_all();
    pthread_mutex_unlock(&setup_lock);
}

void gs_rt_fork_child(void)
{
    gs_alloc_unlock_all();
    gs_alloc_clear();
    /* The inherited descriptor shares the parent's open file description,
     * and with it the parent's slot lock: the child takes its own of both
     * (gs_rt_slot). close() is safe in a fork handler; the number is closed
     * only while it is still the region's (the program may have closed it
     * and given the number to a file of its own). */
    if (region_fd >= 0 && is_region_fd(region_fd))
        close(region_fd);
    /* the inherited mapping pins the parent's description, and with it the
     * parent's slot lock: a killed parent's charges stayed while a worker
     * that never allocated lived. Mapped again at once through a
     * descriptor of the child's own (-1 where it cannot be: then at its
     * first allocation, gs_rt_slot) */
    region_fd = region ? own_fd_and_mapping(region) : -1;
    slot = -1;
    finished = 0;
    __atomic_add_fetch(&gs_rt_fork_generation, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&setup_lock);
}

/* Marks this library as the interposer: `gpuslice run` looks it up before it
 * preloads a library (src/cli/run_lib.c). */
GS_EXPORT extern const char gpuslice_interposer_marker[];
GS_EXPORT const char gpuslice_interposer_marker[] = "gpuslice interposer";

__attribute__((constructor)) static void runtime_init(void)
{
    for (int i = 0; i < GS_MAX_DEVICES; i++)
        dev_map[i] = -1;
    char err[512];
    /* Where the node agent mounted a limits file, it is the configuration's
     * ceiling whatever GPUSLICE_CONFIG says (docs/configuration.md). */
    struct stat node_file;
    int pinned = lstat(GS_STATEDIR_CONTAINER_CONFIG, &node_file) == 0;
    if (pinned) {
        const char *asked = getenv("GPUSLICE_CONFIG");
        if (asked && strcmp(asked, GS_STATEDIR_CONTAINER_CONFIG) != 0)
            gs_log(GS_LOG_WARN, "GPUSLICE_CONFIG='%s' ignored: this container's limits are in %s", asked,
                   GS_STATEDIR_CONTAINER_CONFIG);
    }
    region_agent_made = pinned;
    if (gs_config_load(&gs_rt.cfg, pinned ? gs_getenv_pinned_config : gs_getenv_process,
                       (void *)GS_STATEDIR_CONTAINER_CONFIG, err, sizeof err) != 0 ||
        gs_config_check_unknown(environ, err, sizeof err) != 0) {
        set_broken(err);
        return;
    }
    gs_log_threshold = gs_rt.cfg.log_level;
    if (!gs_rt.cfg.any_limit && !gs_rt.cfg.region_path[0] && gs_rt.cfg.compute_mode != GS_COMPUTE_SHARE)
        return; /* GS_MODE_PASSTHROUGH */
    if (!gs_rt.cfg.region_path[0]) {
        gs_statedir_fallback_region(gs_rt.cfg.region_path, sizeof gs_rt.cfg.region_path);
        region_private = 1;
    }
    gs_rt.mode = GS_MODE_ENFORCE;
}

__attribute__((destructor)) static void runtime_fini(void)
{
    /* Hand our usage back now rather than waiting for a reclaim scan. A
     * later allocation finds no slot (refused: it could not be handed
     * back); a later free finds its slot empty (gs_region_detach). */
    pthread_mutex_lock(&setup_lock);
    int s = slot;
    finished = 1;
    __atomic_store_n(&slot, -1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&setup_lock);
    if (region && s >= 0)
        gs_region_detach(region, s);
}

struct gs_region *gs_rt_region(void)
{
    struct gs_region *r = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
    if (GS_LIKELY(r != NULL))
        return r;
    pthread_mutex_lock(&setup_lock);
    if (!region && gs_mode() == GS_MODE_ENFORCE) {
        char err[512];
        /* in a container the node agent set up, the agent made the region:
         * one missing, empty or blank was removed or wiped by the tenant,
         * who would get its whole limit afresh beside its live processes */
        r = region_private ? gs_region_open_private(gs_rt.cfg.region_path, &region_fd, err, sizeof err)
                           : gs_region_open(gs_rt.cfg.region_path, !region_agent_made, &region_fd, err, sizeof err);
        if (!r) {
            set_region_broken(err);
        } else if (fstat(region_fd, &region_id) != 0) {
            set_region_broken("cannot stat the region just opened");
            gs_region_close(r, region_fd);
            region_fd = -1;
            r = NULL;
        } else {
            if (!r->container[0] && gs_rt.cfg.container_name[0])
                snprintf(r->container, sizeof r->container, "%s", gs_rt.cfg.container_name);
            __atomic_store_n(&region, r, __ATOMIC_RELEASE);
        }
    }
    r = region;
    pthread_mutex_unlock(&setup_lock);
    return r;
}

/* A descriptor of our own of the file our mapping shows: the same inode,
 * or none (a region replaced since it was opened). Never 0-2: a program
 * that runs with its stdio closed (a daemon) forks children that fill them
 * with files of their own, and an exec'd child would find one empty. */
static int reopen_own_fd(void)
{
    int fd = open(gs_rt.cfg.region_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd >= 0 && fd <= 2) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        fd = high;
    }
    if (fd >= 0 && !is_region_fd(fd)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* A descriptor and mapping of the region of our own, for a forked child
 * or a program that closed ours: the slot lock is taken through the
 * descriptor, and held while the mapping made through it lasts. Through a
 * descriptor no mapping held (a child's mapping is the parent's), the
 * child's lock went when the program closed it, a sibling took the slot
 * for dead and dropped its charges; and a killed parent's slot stayed
 * locked while its child lived. Mapped over the old mapping at the same
 * address: the same pages, the same robust mutex. -1, nothing changed,
 * where it cannot be. */
static int own_fd_and_mapping(struct gs_region *r)
{
    int fd = reopen_own_fd();
    if (fd >= 0 && mmap(r, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
        close(fd);
        fd = -1;
    }
    return fd;
}

int gs_rt_region_fd(void)
{
    int fd = __atomic_load_n(&region_fd, __ATOMIC_ACQUIRE);
    if (GS_LIKELY(fd >= 0 && is_region_fd(fd)))
        return fd;
    /* closed by the program (many close every descriptor above 2 as they
     * start), and its number perhaps another file's: liveness asked
     * through it took that file's word that every other slot was dead, and
     * their charges were dropped. A descriptor of our own again; the old
     * description, pinned by the mapping, still holds our slot's lock. */
    pthread_mutex_lock(&setup_lock);
    if (region_fd == fd) {
        int again = reopen_own_fd();
        gs_log(GS_LOG_INFO, "the region's descriptor %d was closed or replaced by the program; %s", fd,
               again >= 0 ? "opened the region again" : "the region is gone: its slots are taken as alive");
        __atomic_store_n(&region_fd, again, __ATOMIC_RELEASE);
    }
    fd = region_fd;
    pthread_mutex_unlock(&setup_lock);
    return fd;
}

int gs_rt_region_dir(char *dir, size_t len, struct stat *self)
{
    if (gs_statedir_parent(dir, len, gs_rt.cfg.region_path) != 0 || stat(gs_rt.cfg.region_path, self) != 0)
        return -1;
    return 0;
}

int gs_rt_slot(void)
{
    int s = __atomic_load_n(&slot, __ATOMIC_ACQUIRE);
    if (GS_LIKELY(s >= 0))
        return s;
    struct gs_region *r = gs_rt_region();
    if (!r)
        return -1;
    pthread_mutex_lock(&setup_lock);
    if (slot < 0 && !finished) {
        /* a forked child's, or one the program closed before its first
         * allocation (the number may be another file's now: left alone) */
        if (region_fd < 0 || !is_region_fd(region_fd))
            region_fd = own_fd_and_mapping(r);
        s = region_fd < 0 ? -1 : gs_region_attach(r, region_fd);
        if (s < 0) {
            char why[sizeof gs_rt.cfg.region_path + 128];
            if (region_fd < 0)
                snprintf(why, sizeof why, "region %s was removed or replaced since the parent process opened it",
                         gs_rt.cfg.region_path);
            else
                snprintf(why, sizeof why, "no free process slot in region %s (%d processes alive)",
                         gs_rt.cfg.region_path, GS_REGION_MAX_PROCS);
            set_region_broken(why);
        }
        __atomic_store_n(&slot, s, __ATOMIC_RELEASE);
    }
    s = slot;
    pthread_mutex_unlock(&setup_lock);
    return s;
}

int gs_rt_ready(void)
{
    if (gs_mode() == GS_MODE_ENFORCE)
        (void)gs_rt_slot();
    if (gs_mode() != GS_MODE_BROKEN)
        return 0;
    gs_rt_report_broken();
    return -1;
}

int gs_rt_dev_of_ordinal(CUdevice ordinal)
{
    if (ordinal >= GS_MAX_DEVICES) {
        /* past the tables a limit could not be applied: refused where one
         * is set (fail closed), left alone where nothing is limited */
        if (!gs_rt.cfg.any_limit && gs_rt.cfg.compute_mode != GS_COMPUTE_SHARE)
            return -1;
        static int logged;
        if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
            gs_log(GS_LOG_ERROR,
                   "device %d is past the %d devices gpuslice can account for in a process; its allocations, "
                   "contexts and limited launches are refused",
                   ordinal, GS_MAX_DEVICES);
        return GS_DEV_UNTRACKED;
    }
    if (ordinal < 0)
        return -1;
    int d = __atomic_load_n(&dev_map[ordinal], __ATOMIC_ACQUIRE);
    if (GS_LIKELY(d >= 0))
        return d;
    struct gs_region *r = gs_rt_region();
    gs_pfn_cuDeviceGetUuid get_uuid = GS_REAL_CU(cuDeviceGetUuid);
    CUuuid u;
    if (!r || !get_uuid || get_uuid(&u, ordinal) != CUDA_SUCCESS)
        return -1;
    char text[GS_UUID_TEXT_LEN];
    gs_format_gpu_uuid(u.bytes, text, sizeof text);
    d = gs_region_device(r, text, gs_rt.cfg.mem_limit[ordinal]);
    if (d < 0) {
        char why[sizeof gs_rt.cfg.region_path + 128];
        snprintf(why, sizeof why, "cannot record device %s in region %s (table full or lock unusable)", text,
                 gs_rt.cfg.region_path);
        set_region_broken(why);
        return -1;
    }
    if (gs_rt.cfg.compute_mode == GS_COMPUTE_CAP)
        gs_region_set_sm_limit(r, d, gs_rt.cfg.sm_limit[ordinal]);
    __atomic_store_n(&dev_map[ordinal], d, __ATOMIC_RELEASE);
    gs_log(GS_LOG_DEBUG, "device %d is %s, limit %llu bytes", ordinal, text, (unsigned long long)r->dev[d].mem_limit);
    return d;
}

/* 1 when the process sees exactly one device: then the current device is
 * ordinal 0 and the hot path needs no driver query. */
static int single_device = -1;

int gs_rt_dev_current(CUdevice *ordinal_out)
{
    int single = __atomic_load_n(&single_device, __ATOMIC_RELAXED);
    if (GS_LIKELY(single == 1)) {
        int d = __atomic_load_n(&dev_map[0], __ATOMIC_ACQUIRE);
        if (d >= 0) {
            if (ordinal_out)
                *ordinal_out = 0;
            return d;
        }
    } else if (single < 0) {
        gs_pfn_cuDeviceGetCount count = GS_REAL_CU(cuDeviceGetCount);
        int n = 0;
        if (count && count(&n) == CUDA_SUCCESS)
            __atomic_store_n(&single_device, n == 1, __ATOMIC_RELAXED);
    }
    gs_pfn_cuCtxGetDevice get = GS_REAL_CU(cuCtxGetDevice);
    CUdevice ord = -1;
    if (!get || get(&ord) != CUDA_SUCCESS)
        return -1;
    if (ordinal_out)
        *ordinal_out = ord;
    return gs_rt_dev_of_ordinal(ord);
}

static int find_uuid(const struct gs_region *r, const char *uuid)
{
    uint32_t n = __atomic_load_n(&r->ndevices, __ATOMIC_ACQUIRE);
    for (uint32_t d = 0; d < n && d < GS_REGION_MAX_DEVICES; d++)
        if (strncmp(r->dev[d].uuid, uuid, GS_REGION_UUID_LEN) == 0)
            return (int)d;
    return -1;
}

/* An NVML-only process (nvidia-smi) has no CUDA ordinals of its own yet:
 * ask the CUDA driver which devices this process sees, so the configured
 * per-ordinal limits land on the right UUIDs. */
static void register_cuda_devices(void)
{
    if (gs_real_resolve(GS_LIB_CUDA, 1) != 0)
        return;
    gs_pfn_cuInit init = GS_REAL_CU(cuInit);
    gs_pfn_cuDeviceGetCount count = GS_REAL_CU(cuDeviceGetCount);
    int n = 0;
    if (!init || !count || init(0) != CUDA_SUCCESS || count(&n) != CUDA_SUCCESS)
        return;
    for (int i = 0; i < n && i < GS_MAX_DEVICES; i++)
        (void)gs_rt_dev_of_ordinal(i);
}

int gs_rt_dev_of_nvml(nvmlDevice_t device)
{
    struct gs_region *r = gs_rt_region();
    gs_pfn_nvmlDeviceGetUUID get_uuid = GS_REAL_NVML(nvmlDeviceGetUUID);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    if (!r || !get_uuid || get_uuid(device, uuid, sizeof uuid) != NVML_SUCCESS)
        return -1;
    int d = find_uuid(r, uuid);
    if (d < 0) {
        register_cuda_devices();
        d = find_uuid(r, uuid);
    }
    return d;
}
