#include "region.h"
#include "ofdlock.h"
#include "region_export.h"
#include "procinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int init_lock(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) != 0)
        return -1;
    int rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (rc == 0)
        rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (rc == 0)
        rc = pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
    return rc == 0 ? 0 : -1;
}

/* Called with flock held and the file still empty: lay the region out. */
static void init_region(struct gs_region *r)
{
    memset(r, 0, sizeof *r);
    r->version = GS_REGION_VERSION;
    r->size = (uint32_t)sizeof *r;
    r->created_unix = (uint64_t)time(NULL);
    (void)init_lock(&r->lock);
    /* Publish last: a reader that sees the magic sees a whole region. */
    __atomic_store_n(&r->magic, GS_REGION_MAGIC, __ATOMIC_RELEASE);
}

static int terminated(const char *s, size_t len)
{
    return memchr(s, '\0', len) != NULL;
}

int gs_region_check(const struct gs_region *r, char *err, size_t errlen)
{
    uint64_t magic = __atomic_load_n(&r->magic, __ATOMIC_ACQUIRE);
    if (magic != GS_REGION_MAGIC) {
        snprintf(err, errlen, "is not a gpuslice region (magic %#llx)", (unsigned long long)magic);
        return -1;
    }
    if (r->version != GS_REGION_VERSION || r->size != sizeof *r) {
        snprintf(err, errlen, "has layout version %u and size %u, this build uses version %u and size %zu", r->version,
                 r->size, GS_REGION_VERSION, sizeof *r);
        return -1;
    }
    uint32_t nd = __atomic_load_n(&r->ndevices, __ATOMIC_ACQUIRE);
    if (nd > GS_REGION_MAX_DEVICES || !terminated(r->container, sizeof r->container) || r->run.set > 1) {
        snprintf(err, errlen, "has a corrupt header (%u devices, at most %d)", nd, GS_REGION_MAX_DEVICES);
        return -1;
    }
    for (uint32_t d = 0; d < nd; d++) {
        const struct gs_region_device *dv = &r->dev[d];
        if (!terminated(dv->uuid, sizeof dv->uuid) || dv->sm_limit > 100 || dv->flags != 0 ||
            __atomic_load_n(&dv->mem_used, __ATOMIC_RELAXED) > GS_REGION_MAX_BYTES ||
            __atomic_load_n(&dv->mem_limit, __ATOMIC_RELAXED) > GS_REGION_MAX_BYTES) {
            snprintf(err, errlen, "has a corrupt entry for device %u", d);
            return -1;
        }
    }
    for (int i = 0; i < GS_REGION_MAX_PROCS; i++) {
        const struct gs_region_proc *p = &r->proc[i];
        int32_t pid = __atomic_load_n(&p->pid, __ATOMIC_RELAXED);
        int bad = pid < 0 || pid > GS_REGION_MAX_PID || p->flags != 0;
        for (int d = 0; d < GS_REGION_MAX_DEVICES && !bad; d++)
            bad = __atomic_load_n(&p->mem_used[d], __ATOMIC_RELAXED) > GS_REGION_MAX_BYTES ||
                  __atomic_load_n(&p->ctx_overhead[d], __ATOMIC_RELAXED) > GS_REGION_MAX_BYTES;
        if (bad) {
            snprintf(err, errlen, "has a corrupt process slot %d (pid %d)", i, (int)pid);
            return -1;
        }
    }
    return gs_region_exports_check(r, err, errlen);
}

/* A private region must be this user's own file that nobody else may write:
 * one planted by another user (before ours existed) would set our limits. */
static int check_private(const char *path, const struct stat *st, char *err, size_t errlen)
{
    if (st->st_uid != geteuid()) {
        snprintf(err, errlen,
                 "region %s is owned by uid %u, mode %04o, not by you (uid %u): another user may have made it to "
                 "control your limits; remove it or name your own with GPUSLICE_REGION",
                 path, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777), (unsigned)geteuid());
        return -1;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(err, errlen, "region %s has mode %04o, which lets other users write to it: chmod go-w it or remove it",
                 path, (unsigned)(st->st_mode & 07777));
        return -1;
    }
    return 0;
}

static struct gs_region *open_region(const char *path, int create, int own_only, int *fd_out, char *err, size_t errlen);

struct gs_region *gs_region_open(const char *path, int create, int *fd_out, char *err, size_t errlen)
{
    return open_region(path, create, 0, fd_out, err, errlen);
}

struct gs_region *gs_region_open_private(const char *path, int *fd_out, char *err, size_t errlen)
{
    return open_region(path, 1, 1, fd_out, err, errlen);
}

static struct gs_region *open_region(const char *path, int create, int own_only, int *fd_out, char *err, size_t errlen)
{
    if (fd_out)
        *fd_out = -1;
    /* O_NONBLOCK: a FIFO planted under the region's name must not hang us
     * before fstat can refuse it. */
    int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (create ? O_CREAT : 0);
    int fd = open(path, flags, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open region %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "region %s is not a regular file", path);
        close(fd);
        return NULL;
    }
    if (own_only && check_private(path, &st, err, errlen) != 0) {
        close(fd);
        return NULL;
    }
    /* flock serialises first-time initialisation and is dropped by the
     * kernel if the initialiser dies, so a half-made file is redone. */
    if (flock(fd, LOCK_EX) != 0) {
        snprintf(err, errlen, "cannot lock region %s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    struct gs_region *r = NULL;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot stat region %s: %s", path, strerror(errno));
        goto out;
    }
    int fresh = st.st_size == 0;
    if (fresh && !create) {
        snprintf(err, errlen, "region %s is empty (no gpuslice process has run yet)", path);
        goto out;
    }
    if (!fresh && (size_t)st.st_size != sizeof *r) {
        snprintf(err, errlen, "region %s has size %lld, expected %zu (truncated, or another gpuslice version)", path,
                 (long long)st.st_size, sizeof *r);
        goto out;
    }
    if (fresh && ftruncate(fd, (off_t)sizeof *r) != 0) {
        snprintf(err, errlen, "cannot size region %s: %s", path, strerror(errno));
        goto out;
    }
    void *m = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        snprintf(err, errlen, "cannot map region %s: %s", path, strerror(errno));
        goto out;
    }
    r = m;
    char why[200];
    if (__atomic_load_n(&r->magic, __ATOMIC_ACQUIRE) == 0 && !create) {
        /* blank: made by whoever may create it, or wiped by a tenant that
         * wants its limit afresh */
        snprintf(err, errlen, "region %s is blank (all zeros): not one gpuslice made, or wiped", path);
        munmap(m, sizeof *r);
        r = NULL;
    } else if (__atomic_load_n(&r->magic, __ATOMIC_ACQUIRE) == 0) {
        init_region(r);
    } else if (gs_region_check(r, why, sizeof why) != 0) {
        snprintf(err, errlen, "region %s %s", path, why);
        munmap(m, sizeof *r);
        r = NULL;
    }
out:
    flock(fd, LOCK_UN);
    if (r && fd_out)
        *fd_out = fd;
    else
        close(fd);
    return r;
}

void gs_region_close(struct gs_region *r, int fd)
{
    if (r)
        munmap(r, sizeof *r);
    if (fd >= 0)
        close(fd);
}

off_t gs_region_slot_byte(int slot)
{
    return (off_t)(offsetof(struct gs_region, proc) + (size_t)slot * sizeof(struct gs_region_proc));
}

int gs_region_slot_alive(int fd, int slot)
{
    return gs_ofd_held(fd, gs_region_slot_byte(slot)) != 0;
}

int gs_region_reclaim_locked(struct gs_region *r, int fd, int self)
{
    unsigned char dead[GS_REGION_MAX_PROCS] = { 0 };
    int reclaimed = 0;
    for (int i = 0; i < GS_REGION_MAX_PROCS; i++) {
        if (r->proc[i].pid != 0 && i != self && !gs_region_slot_alive(fd, i)) {
            dead[i] = 1;
            reclaimed++;
        }
    }
    /* First hand what the dead shared with the living to a living holder. */
    if (reclaimed)
        gs_region_exports_drop_locked(r, dead);
    for (int i = 0; i < GS_REGION_MAX_PROCS; i++)
        if (dead[i])
            memset(&r->proc[i], 0, sizeof r->proc[i]);
    gs_region_rebuild_totals_locked(r);
    return reclaimed;
}

int gs_region_device(struct gs_region *r, const char *uuid, uint64_t mem_limit)
{
    if (gs_region_lock(r) != 0)
        return -1;
    int idx = -1;
    uint32_t nd = r->ndevices < GS_REGION_MAX_DEVICES ? r->ndevices : GS_REGION_MAX_DEVICES;
    for (uint32_t d = 0; d < nd; d++) {
        if (strncmp(r->dev[d].uuid, uuid, GS_REGION_UUID_LEN) == 0) {
            idx = (int)d;
            break;
        }
    }
    if (idx >= 0) {
        uint64_t cur = r->dev[idx].mem_limit;
        if (mem_limit && (!cur || mem_limit < cur))
            r->dev[idx].mem_limit = mem_limit;
    } else if (nd < GS_REGION_MAX_DEVICES) {
        idx = (int)nd;
        struct gs_region_device *dv = &r->dev[idx];
        snprintf(dv->uuid, sizeof dv->uuid, "%s", uuid);
        dv->mem_limit = mem_limit;
        __atomic_store_n(&r->ndevices, nd + 1, __ATOMIC_RELEASE);
    }
    gs_region_unlock(r);
    return idx;
}

void gs_region_set_sm_limit(struct gs_region *r, int dev, uint32_t pct)
{
    if (pct == 0 || dev < 0 || dev >= GS_REGION_MAX_DEVICES || gs_region_lock(r) != 0)
        return;
    uint32_t cur = r->dev[dev].sm_limit;
    if (!cur || pct < cur)
        r->dev[dev].sm_limit = pct;
    gs_region_unlock(r);
}

int gs_region_attach(struct gs_region *r, int fd)
{
    uint64_t st = 0;
    pid_t pid = getpid();
    if (fd < 0 || gs_proc_start_time(pid, &st) != 0)
        return -1;
    if (gs_region_lock(r) != 0)
        return -1;
    gs_region_reclaim_locked(r, fd, -1);
    int slot = -1;
    /* A free slot whose byte is still locked belongs to a process between
     * its detach and its unlock: take another. */
    for (int i = 0; i < GS_REGION_MAX_PROCS && slot < 0; i++)
        if (r->proc[i].pid == 0 && gs_ofd_lock_byte(fd, gs_region_slot_byte(i)) == 0)
            slot = i;
    if (slot >= 0) {
        struct gs_region_proc *p = &r->proc[slot];
        memset(p, 0, sizeof *p);
        p->start_time = st;
        p->pidns = gs_proc_pidns();
        /* The lock came first: nobody sees this pid on an unlocked byte. */
        __atomic_store_n(&p->pid, pid, __ATOMIC_RELEASE);
    }
    gs_region_unlock(r);
    return slot;
}

void gs_region_detach(struct gs_region *r, int slot)
{
    if (slot < 0 || slot >= GS_REGION_MAX_PROCS || gs_region_lock(r) != 0)
        return;
    unsigned char leaving[GS_REGION_MAX_PROCS] = { 0 };
    leaving[slot] = 1;
    gs_region_exports_drop_locked(r, leaving); /* shared charges move to the other holders */
    struct gs_region_proc *p = &r->proc[slot];
    for (int d = 0; d < GS_REGION_MAX_DEVICES; d++) {
        uint64_t u = p->mem_used[d];
        r->dev[d].mem_used = r->dev[d].mem_used >= u ? r->dev[d].mem_used - u : 0;
    }
    memset(p, 0, sizeof *p);
    gs_region_unlock(r);
}

static int fits(const struct gs_region_device *dv, uint64_t bytes)
{
    return dv->mem_limit == 0 || (dv->mem_used <= dv->mem_limit && bytes <= dv->mem_limit - dv->mem_used);
}

static int in_range(int slot, int dev)
{
    return slot >= 0 && slot < GS_REGION_MAX_PROCS && dev >= 0 && dev < GS_REGION_MAX_DEVICES;
}

/* Reserves bytes for slot on dev if they fit; overhead: they are a
 * context's, also counted in the slot's ctx_overhead. */
static int reserve(struct gs_region *r, gs_region_fd_fn fd_of, int slot, int dev, uint64_t bytes, int overhead)
{
    if (!in_range(slot, dev) || gs_region_lock(r) != 0)
        return -1;
    struct gs_region_device *dv = &r->dev[dev];
    int ok = fits(dv, bytes);
    /* Only when the limit is in the way do we pay for a scan of dead
     * processes (and for checking our descriptor is still the region's):
     * usage left by a killed process is returned here at once. */
    if (!ok) {
        gs_region_unlock(r);
        int fd = fd_of();
        if (gs_region_lock(r) != 0)
            return -1;
        gs_region_reclaim_locked(r, fd, slot);
        ok = fits(dv, bytes);
    }
    if (ok) {
        r->proc[slot].mem_used[dev] += bytes;
        if (overhead)
            r->proc[slot].ctx_overhead[dev] += bytes;
        dv->mem_used += bytes;
    }
    gs_region_unlock(r);
    return ok ? 0 : -1;
}

/* Gives back bytes of slot on dev, clamped at what the slot holds (-1 when
 * it held less); overhead as for reserve(). */
static int release(struct gs_region *r, int slot, int dev, uint64_t bytes, int overhead)
{
    if (!in_range(slot, dev) || gs_region_lock(r) != 0)
        return -1;
    int rc = 0;
    uint64_t *mine = &r->proc[slot].mem_used[dev];
    if (*mine < bytes) {
        bytes = *mine;
        rc = -1;
    }
    *mine -= bytes;
    if (overhead) {
        uint64_t *ctx = &r->proc[slot].ctx_overhead[dev];
        *ctx = *ctx >= bytes ? *ctx - bytes : 0;
    }
    struct gs_region_device *dv = &r->dev[dev];
    dv->mem_used = dv->mem_used >= bytes ? dv->mem_used - bytes : 0;
    gs_region_unlock(r);
    return rc;
}

int gs_region_reserve(struct gs_region *r, gs_region_fd_fn fd_of, int slot, int dev, uint64_t bytes)
{
    return reserve(r, fd_of, slot, dev, bytes, 0);
}

int gs_region_release(struct gs_region *r, int slot, int dev, uint64_t bytes)
{
    return release(r, slot, dev, bytes, 0);
}

int gs_region_reserve_overhead(struct gs_region *r, gs_region_fd_fn fd_of, int slot, int dev, uint64_t bytes)
{
    return reserve(r, fd_of, slot, dev, bytes, 1);
}

int gs_region_release_overhead(struct gs_region *r, int slot, int dev, uint64_t bytes)
{
    return release(r, slot, dev, bytes, 1);
}

void gs_region_charge_force(struct gs_region *r, int slot, int dev, uint64_t bytes)
{
    if (!in_range(slot, dev) || gs_region_lock(r) != 0)
        return;
    r->proc[slot].mem_used[dev] += bytes;
    r->proc[slot].ctx_overhead[dev] += bytes;
    r->dev[dev].mem_used += bytes;
    gs_region_unlock(r);
}

uint64_t gs_region_free_bytes(const struct gs_region *r, int dev)
{
    const struct gs_region_device *dv = &r->dev[dev];
    if (dv->mem_limit == 0)
        return UINT64_MAX;
    uint64_t used = __atomic_load_n(&dv->mem_used, __ATOMIC_RELAXED);
    return used >= dv->mem_limit ? 0 : dv->mem_limit - used;
}
