/* The device ledger; see ledger.h and docs/compute.md. */
#define _GNU_SOURCE
#include "ledger.h"
#include "map_guard.h"
#include "ofdlock.h"
#include "procinfo.h"
#include "turn_frame.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Lock bytes lie past the end of the file (locks need no data there). */
#define LOCK_OFF ((off_t)1 << 20)
#define SLOT_OFF(i) (LOCK_OFF + 1 + (off_t)(i))

#define LD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The header, magic last: an opener that reads the magic sees the rest. */
static void stamp_header(struct gs_ledger_file *f)
{
    ST(&f->version, GS_LEDGER_VERSION);
    ST(&f->size, (uint32_t)sizeof *f);
    __atomic_store_n(&f->magic, GS_LEDGER_MAGIC, __ATOMIC_RELEASE);
}

static void init_file(struct gs_ledger_file *f)
{
    memset(f, 0, sizeof *f);
    stamp_header(f);
}

/* Calls try_once(fd), a lock taken without blocking, until it succeeds:
 * retried for wait_ns, or tried once before *patient_after, which a wait
 * that timed out sets GS_LEDGER_LOCK_BACKOFF_NS ahead. Any tenant can hold
 * either of the ledger's locks for good: a blocking flock hung every other
 * process's first limited launch for as long, and a full wait at every try
 * cost each neighbour the whole wait per window (the OFD lock) or held a
 * capped tenant's launches half the time (a 100 ms flock wait every
 * 100 ms). 0, or -1 with errno (EAGAIN: held). */
static int bounded_lock(int (*try_once)(int fd), int fd, uint64_t wait_ns, uint64_t *patient_after)
{
    uint64_t t0 = 0;
    while (try_once(fd) != 0) {
        if (errno != EAGAIN && errno != EACCES && errno != EINTR)
            return -1;
        uint64_t now = mono_ns();
        if (!t0 && now < LD(patient_after)) {
            errno = EAGAIN;
            return -1;
        }
        if (!t0) {
            t0 = now;
        } else if (now - t0 > wait_ns) {
            ST(patient_after, now + GS_LEDGER_LOCK_BACKOFF_NS);
            errno = EAGAIN;
            return -1; /* held too long: someone stalled or hostile */
        }
        struct timespec ts = { 0, 20000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}

static int try_init_lock(int fd)
{
    return flock(fd, LOCK_EX | LOCK_NB);
}

/* Until when the init lock is only tried (the process's, for every ledger:
 * an opener tries again at its launches). */
static uint64_t init_patient_after_ns;

/* The flock that guards a file's first lay-out. */
static int init_lock(int fd)
{
    return bounded_lock(try_init_lock, fd, GS_LEDGER_OPEN_WAIT_NS, &init_patient_after_ns);
}

/* Whether magic is a ledger's that someone wrote garbage over (or never
 * laid out: 0), rather than another gpuslice version's. */
static int not_laid_out(uint64_t magic)
{
    return magic != GS_LEDGER_MAGIC;
}

/* The mapping of a ledger file of the right size: laid out afresh where it
 * never was or was written over (only under the init lock: locked; live
 * members restore their records, gs_ledger_heal), else checked. */
static struct gs_ledger_file *map_laid_out(int fd, const char *path, int locked, char *err, size_t errlen)
{
    void *m = mmap(NULL, sizeof(struct gs_ledger_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        snprintf(err, errlen, "cannot map device ledger %s: %s", path, strerror(errno));
        return NULL;
    }
    struct gs_ledger_file *f = m;
    /* Any container can shrink the file under everyone's mapping. */
    gs_map_guard_add(m, sizeof *f);
    uint64_t magic = __atomic_load_n(&f->magic, __ATOMIC_ACQUIRE);
    if (not_laid_out(magic) && locked) {
        init_file(f);
        return f;
    }
    if (not_laid_out(magic))
        snprintf(err, errlen, "device ledger %s is not laid out, and another process holds its lock", path);
    else if (f->version != GS_LEDGER_VERSION)
        snprintf(err, errlen, "device ledger %s has layout version %u, this build uses %u", path, f->version,
                 GS_LEDGER_VERSION);
    else
        return f;
    gs_map_guard_remove(m);
    munmap(m, sizeof *f);
    errno = not_laid_out(magic) ? EAGAIN : EINVAL;
    return NULL;
}

/* Whether fd begins as another layout version's ledger. A file of the
 * wrong size that does not (cut short or grown by a tenant: any container
 * can write it) is sized back under the init lock; its layout, where the
 * header survived, is kept. */
static int another_version(int fd)
{
    uint64_t magic = 0;
    uint32_t version = 0;
    return pread(fd, &magic, sizeof magic, 0) == (ssize_t)sizeof magic && magic == GS_LEDGER_MAGIC &&
           pread(fd, &version, sizeof version, offsetof(struct gs_ledger_file, version)) == (ssize_t)sizeof version &&
           version != GS_LEDGER_VERSION;
}

/* The file's mapping, laid out by whoever comes first under flock. A file
 * of the right size needs no lock: one held past GS_LEDGER_OPEN_WAIT_NS
 * only keeps an empty file from being laid out (the node agent lays its
 * ledgers out itself). NULL with errno EAGAIN where trying later may do. */
static struct gs_ledger_file *map_file(int fd, const char *path, char *err, size_t errlen)
{
    struct gs_ledger_file *f = NULL;
    struct stat st;
    int locked = init_lock(fd) == 0;
    int e = errno;
    if ((!locked && e != EAGAIN) || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot lock device ledger %s: %s", path, strerror(locked ? errno : e));
        e = EINVAL;
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "device ledger %s is not a regular file", path);
        e = EINVAL;
    } else if (st.st_size != 0 && (size_t)st.st_size != sizeof *f && another_version(fd)) {
        snprintf(err, errlen, "device ledger %s has size %lld, expected %zu: another gpuslice version's", path,
                 (long long)st.st_size, sizeof *f);
        e = EINVAL;
    } else if ((size_t)st.st_size != sizeof *f && !locked) {
        snprintf(err, errlen, "device ledger %s is %s, and another process holds its lock", path,
                 st.st_size ? "of the wrong size" : "not laid out");
        e = EAGAIN;
    } else if ((size_t)st.st_size != sizeof *f && ftruncate(fd, (off_t)sizeof *f) != 0) {
        snprintf(err, errlen, "cannot size device ledger %s: %s", path, strerror(errno));
        e = EINVAL;
    } else {
        f = map_laid_out(fd, path, locked, err, errlen);
        e = errno;
    }
    if (locked)
        flock(fd, LOCK_UN);
    errno = e;
    return f;
}

int gs_ledger_lay_out(int fd)
{
    static struct gs_ledger_file fresh; /* the agent's thread alone: no mapping, no SIGBUS guard there */
    struct stat st;
    if (init_lock(fd) != 0)
        return -1;
    uint64_t magic = 0;
    uint32_t version = 0;
    int rc = fstat(fd, &st) == 0 ? 0 : -1;
    int sized = rc == 0 && (size_t)st.st_size == sizeof fresh;
    if (sized &&
        (pread(fd, &magic, sizeof magic, 0) != (ssize_t)sizeof magic ||
         pread(fd, &version, sizeof version, offsetof(struct gs_ledger_file, version)) != (ssize_t)sizeof version))
        rc = -1;
    if (rc == 0 && (st.st_size == 0 || (sized && not_laid_out(magic)))) {
        /* empty, sized by an opener that died before its layout, or written over: as gs_ledger_open lays it out */
        init_file(&fresh);
        rc = pwrite(fd, &fresh, sizeof fresh, 0) == (ssize_t)sizeof fresh ? 0 : -1;
    } else if (rc == 0 && !(sized && version == GS_LEDGER_VERSION)) {
        rc = -1;
        errno = EINVAL;
    }
    int e = errno;
    flock(fd, LOCK_UN);
    errno = e;
    return rc;
}

struct gs_ledger *gs_ledger_open(const char *path, char *err, size_t errlen)
{
    struct gs_ledger *l = calloc(1, sizeof *l);
    if (!l || strlen(path) >= sizeof l->path) {
        snprintf(err, errlen, "cannot open device ledger %s: %s", path, l ? "path too long" : "out of memory");
        free(l);
        return NULL;
    }
    l->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (l->fd < 0) {
        snprintf(err, errlen, "cannot open device ledger %s: %s", path, strerror(errno));
        free(l);
        return NULL;
    }
    struct stat st;
    if (fstat(l->fd, &st) == 0) {
        l->file_dev = (uint64_t)st.st_dev;
        l->file_ino = (uint64_t)st.st_ino;
    }
    l->f = map_file(l->fd, path, err, errlen);
    if (!l->f) {
        int e = errno;
        close(l->fd);
        free(l);
        errno = e;
        return NULL;
    }
    snprintf(l->path, sizeof l->path, "%s", path);
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++)
        l->slot_fd[i] = -1;
    pthread_mutex_init(&l->trust_lock, NULL);
    pthread_mutex_init(&l->lock_mutex, NULL);
    return l;
}

void gs_ledger_forget(struct gs_ledger *l)
{
    if (!l)
        return;
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++)
        if (l->slot_fd[i] >= 0)
            close(l->slot_fd[i]); /* the parent's description stays open in the parent */
    gs_map_guard_remove(l->f);
    munmap(l->f, sizeof *l->f);
    if (l->fd >= 0)
        close(l->fd);
    pthread_mutex_destroy(&l->trust_lock);
    pthread_mutex_destroy(&l->lock_mutex);
    free(l);
}

int gs_ledger_cut_short(const struct gs_ledger *l)
{
    return gs_map_guard_tripped(l->f);
}

/* Whether fd is a descriptor of l's file. */
static int ours(const struct gs_ledger *l, int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && (uint64_t)st.st_dev == l->file_dev && (uint64_t)st.st_ino == l->file_ino;
}

int gs_ledger_descriptors_ours(const struct gs_ledger *l)
{
    if (!ours(l, l->fd))
        return 0;
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++) {
        int fd = __atomic_load_n(&l->slot_fd[i], __ATOMIC_RELAXED);
        if (fd >= 0 && !ours(l, fd))
            return 0;
    }
    return 1;
}

/* The handle's mutex, which keeps this process's other threads out of the
 * ledger's lock and of a remap: waited for at most GS_LEDGER_LOCK_WAIT_NS
 * (its holder is one of ours, in a bounded section). 0, or -1 with errno
 * EAGAIN. */
static int lock_threads(struct gs_ledger *l)
{
    /* the holder waits for the ledger's lock, and sleeps and calls the
     * kernel under it: cancelled at one of those points, it would keep the
     * mutex, and every other thread would find the ledger locked for good */
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    uint64_t ns = (uint64_t)until.tv_nsec + GS_LEDGER_LOCK_WAIT_NS;
    until.tv_sec += (time_t)(ns / 1000000000ULL);
    until.tv_nsec = (long)(ns % 1000000000ULL);
    if (pthread_mutex_clocklock(&l->lock_mutex, CLOCK_MONOTONIC, &until) != 0) {
        pthread_setcancelstate(cancel, NULL);
        errno = EAGAIN;
        return -1;
    }
    l->holder_cancel = cancel;
    return 0;
}

/* lock_threads' release: the holder may be cancelled again. */
static void unlock_threads(struct gs_ledger *l)
{
    int cancel = l->holder_cancel;
    pthread_mutex_unlock(&l->lock_mutex);
    pthread_setcancelstate(cancel, NULL);
}

/* Whether l's path still names the file l has open: one removed or
 * replaced since is followed by joining afresh, not mapped again. */
static int path_still_ours(const struct gs_ledger *l)
{
    struct stat st;
    return lstat(l->path, &st) == 0 && (uint64_t)st.st_dev == l->file_dev && (uint64_t)st.st_ino == l->file_ino;
}

int gs_ledger_map_again(struct gs_ledger *l)
{
    if (!path_still_ours(l)) {
        errno = ESTALE;
        return -1;
    }
    if (init_lock(l->fd) != 0)
        return -1; /* EAGAIN: tried again at the next run */
    struct stat st;
    int rc = fstat(l->fd, &st);
    if (rc == 0 && (uint64_t)st.st_size != sizeof *l->f)
        rc = ftruncate(l->fd, (off_t)sizeof *l->f);
    int e = errno;
    flock(l->fd, LOCK_UN);
    if (rc != 0) {
        errno = e == EAGAIN ? EIO : e;
        return -1;
    }
    /* not under a sibling thread's change of the turn, which may have read
     * the zeroed pages and would write into the file's */
    if (lock_threads(l) != 0)
        return -1;
    /* rearmed first: a fault of a cut after the mapping trips it again */
    gs_map_guard_rearm(l->f);
    rc = mmap(l->f, sizeof *l->f, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, l->fd, 0) == MAP_FAILED ? -1 : 0;
    e = errno;
    if (rc != 0)
        gs_map_guard_trip(l->f); /* still the private pages */
    unlock_threads(l);
    errno = rc != 0 && e == EAGAIN ? ENOMEM : e;
    return rc;
}

void gs_ledger_fork_child(struct gs_ledger *l)
{
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++) {
        if (l->slot_fd[i] >= 0 && ours(l, l->slot_fd[i]))
            close(l->slot_fd[i]);
        l->slot_fd[i] = -1;
    }
    if (l->fd >= 0 && ours(l, l->fd))
        close(l->fd);
    l->fd = -1;
    /* the mapping pins the description it was made through, and with it
     * the ledger's lock where the parent held it: zeroed private pages in
     * its place (on failure the mapping stays, pinning it as before) */
    (void)!mmap(l->f, sizeof *l->f, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    l->trust_lock = fresh;
    l->lock_mutex = fresh;
}

void gs_ledger_abandon(struct gs_ledger *l)
{
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++) {
        int fd = __atomic_exchange_n(&l->slot_fd[i], -1, __ATOMIC_RELAXED);
        if (fd >= 0 && ours(l, fd))
            close(fd); /* a number the program reused is its own */
    }
    gs_map_guard_remove(l->f);
}

void gs_ledger_close(struct gs_ledger *l)
{
    if (!l)
        return;
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++)
        if (l->slot_fd[i] >= 0)
            l->f->m[i] = (struct gs_ledger_member){ 0 };
    gs_ledger_forget(l);
}

static int try_ledger_lock(int fd)
{
    return gs_ofd_lock_byte(fd, LOCK_OFF);
}

/* First among this process's threads (lock_threads), then among processes,
 * bounded as the init lock is (bounded_lock), with the handle's own
 * back-off. Without the mutex a second thread took the OFD lock its sibling
 * held, and either one's unlock let another process in. */
int gs_ledger_lock(struct gs_ledger *l)
{
    if (lock_threads(l) != 0)
        return -1;
    if (bounded_lock(try_ledger_lock, l->fd, GS_LEDGER_LOCK_WAIT_NS, &l->patient_after_ns) == 0)
        return 0;
    int e = errno;
    unlock_threads(l);
    errno = e;
    return -1;
}

void gs_ledger_unlock(struct gs_ledger *l)
{
    gs_ofd_unlock_byte(l->fd, LOCK_OFF);
    unlock_threads(l);
}

/* Whether member i is alive: its byte is held by some description (ours,
 * if this handle joined it). */
static int alive(struct gs_ledger *l, int i)
{
    return l->slot_fd[i] >= 0 || gs_ofd_held(l->fd, SLOT_OFF(i)) == 1;
}

/* A count of windows (a member's open or draining ones) as read: garbage,
 * past GS_LEDGER_MAX_OPEN, is 0. */
static uint32_t valid_count(uint32_t o)
{
    return o > GS_LEDGER_MAX_OPEN ? 0 : o;
}

static uint32_t open_of(const struct gs_ledger_member *m)
{
    return valid_count(LD(&m->open));
}

static uint32_t draining_of(const struct gs_ledger_member *m)
{
    return valid_count(LD(&m->draining));
}

/* Whether container has a live member with a window open (lock held). */
static int container_open(struct gs_ledger *l, uint64_t container)
{
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++)
        if (LD(&l->f->m[i].container) == container && open_of(&l->f->m[i]) && alive(l, i))
            return 1;
    return 0;
}

/* Wakes the turn's waiters to look again (lock held). */
static void wake_waiters(struct gs_ledger *l)
{
    __atomic_add_fetch(&l->f->turn_seq, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &l->f->turn_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void release_turn(struct gs_ledger *l)
{
    /* the holds were of this turn: the container's next one starts afresh */
    uint64_t c = LD(&l->f->turn_container);
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++)
        if (LD(&l->f->m[i].container) == c)
            ST(&l->f->m[i].hold_ns, (uint64_t)0);
    ST(&l->f->turn_container, (uint64_t)0);
    ST(&l->f->turn_until_ns, (uint64_t)0);
    wake_waiters(l);
}

/* Frees the turn if its container has no live window open (lock held). */
static void settle_turn(struct gs_ledger *l)
{
    uint64_t c = LD(&l->f->turn_container);
    if (c != 0 && !container_open(l, c))
        release_turn(l);
}

/* Adds step (+1 or -1) to a count of windows (valid_count), never below
 * 0; atomically, since a close that could not take the ledger's lock
 * counts without it. */
static void count_step(uint32_t *count, int step)
{
    uint32_t o = LD(count), n;
    do {
        uint32_t v = valid_count(o);
        n = step > 0 ? v + 1 : v ? v - 1 : 0;
    } while (!__atomic_compare_exchange_n(count, &o, n, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

/* The latest end the windows of the holder's members with a window open
 * took this turn until (lock held); 0 where none is open, UINT64_MAX while
 * one of them drains. */
static uint64_t open_hold(struct gs_ledger *l, uint64_t container)
{
    uint64_t hold = 0;
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++) {
        const struct gs_ledger_member *m = &l->f->m[i];
        if (LD(&m->container) != container || !open_of(m) || !alive(l, i))
            continue;
        if (draining_of(m))
            return UINT64_MAX;
        uint64_t h = LD(&m->hold_ns);
        hold = h > hold ? h : hold;
    }
    return hold;
}

/* settle_turn at now, and a turn held past its windows' own ends (a
 * drain's extension, the drains done) cut back to them: released if they
 * have passed, its waiters woken to look again if not (lock held). Only
 * ever shortened, so a forged hold keeps no turn longer. */
static void settle_turn_at(struct gs_ledger *l, uint64_t now)
{
    uint64_t c = LD(&l->f->turn_container);
    if (c == 0)
        return;
    uint64_t hold = open_hold(l, c);
    if (hold != 0 && hold >= LD(&l->f->turn_until_ns))
        return;
    if (hold <= now) {
        release_turn(l);
        return;
    }
    ST(&l->f->turn_until_ns, hold);
    wake_waiters(l);
}

int gs_ledger_join(struct gs_ledger *l, int32_t pid, uint64_t container, uint32_t weight)
{
    if (container == 0) {
        errno = EINVAL;
        return -1;
    }
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++) {
        if (l->slot_fd[i] >= 0)
            continue;
        int fd = gs_ofd_hold(l->path, SLOT_OFF(i));
        if (fd < 0)
            continue; /* a live member's */
        if (gs_ledger_lock(l) != 0) {
            close(fd);
            errno = EAGAIN; /* held past GS_LEDGER_LOCK_WAIT_NS: worth a later try */
            return -1;
        }
        l->slot_fd[i] = fd;
        l->pidns = gs_proc_pidns(); /* the joiner's: a forked child may be in another */
        l->f->m[i] =
            (struct gs_ledger_member){ .container = container, .pid = pid, .weight = weight, .pidns = l->pidns };
        settle_turn(l); /* whatever the dead owner held */
        gs_ledger_unlock(l);
        return i;
    }
    errno = ENOSPC;
    return -1;
}

void gs_ledger_heal(struct gs_ledger *l, int slot, uint64_t container, int32_t pid, uint32_t weight)
{
    if (slot < 0 || slot >= GS_LEDGER_MEMBERS || l->slot_fd[slot] < 0 || container == 0)
        return;
    struct gs_ledger_file *f = l->f;
    if (LD(&f->magic) != GS_LEDGER_MAGIC || LD(&f->version) != GS_LEDGER_VERSION || LD(&f->size) != (uint32_t)sizeof *f)
        stamp_header(f);
    struct gs_ledger_member *m = &f->m[slot];
    if (LD(&m->container) != container)
        ST(&m->container, container);
    if (LD(&m->pid) != pid)
        ST(&m->pid, pid);
    if (LD(&m->pidns) != l->pidns)
        ST(&m->pidns, l->pidns);
    if (LD(&m->weight) != weight)
        ST(&m->weight, weight);
}

/* The turn as it stands, validated: 0 when free, expired or forged; else
 * its holder, and in *until when it expires (read once: another container
 * may write the field meanwhile). */
static uint64_t turn_holder(struct gs_ledger *l, uint64_t now, uint64_t *until)
{
    uint64_t c = LD(&l->f->turn_container);
    *until = LD(&l->f->turn_until_ns);
    if (c == 0 || now >= *until || *until > now + GS_LEDGER_MAX_HOLD_NS)
        return 0;
    return c;
}

void gs_ledger_trust(struct gs_ledger *l, const struct gs_turn_claim *trusted, unsigned n)
{
    pthread_mutex_lock(&l->trust_lock);
    l->ntrusted = !trusted ? 0 : n < GS_LEDGER_MEMBERS ? n : GS_LEDGER_MEMBERS;
    for (unsigned i = 0; i < l->ntrusted; i++)
        l->trusted[i] = trusted[i];
    pthread_mutex_unlock(&l->trust_lock);
}

/* Where the frame stands for container me, claiming my_claim, at now,
 * among the live members that asked for the turn lately with a claim, as
 * far as their claims are trusted (lock held). 0: no frame to follow. */
static int frame_of(struct gs_ledger *l, uint64_t me, uint32_t my_claim, uint64_t now, struct gs_turn_slot *out)
{
    struct gs_turn_claim c[GS_LEDGER_MEMBERS + 1];
    unsigned n = 0;
    uint64_t since = now > GS_LEDGER_CONTEND_NS ? now - GS_LEDGER_CONTEND_NS : 0;
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++) {
        const struct gs_ledger_member *m = &l->f->m[i];
        uint64_t container = LD(&m->container);
        uint32_t claim = LD(&m->claim_ppm);
        if (container != 0 && claim != 0 && LD(&m->asked_ns) >= since && alive(l, i))
            c[n++] = (struct gs_turn_claim){ container, claim };
    }
    pthread_mutex_lock(&l->trust_lock);
    n = gs_turn_trusted_claims(c, n, me, my_claim, l->trusted, l->ntrusted);
    pthread_mutex_unlock(&l->trust_lock);
    return gs_turn_frame(c, &n, me, now, out);
}

/* A member asks for the GPU at now with its claim: the ledger locked, its
 * member marked active and asking. NULL (nothing locked) when it cannot. */
static struct gs_ledger_member *ask(struct gs_ledger *l, int slot, uint64_t now, uint32_t claim_ppm)
{
    if (slot < 0 || slot >= GS_LEDGER_MEMBERS || gs_ledger_lock(l) != 0)
        return NULL;
    struct gs_ledger_member *m = &l->f->m[slot];
    ST(&m->active_ns, now);
    ST(&m->asked_ns, now);
    ST(&m->claim_ppm, claim_ppm);
    return m;
}

uint64_t gs_ledger_open_window(struct gs_ledger *l, int slot, uint64_t now, uint64_t until, struct gs_ledger_turn *t)
{
    uint32_t claim = t->claim_ppm;
    *t = (struct gs_ledger_turn){ .claim_ppm = claim };
    struct gs_ledger_member *m = ask(l, slot, now, claim);
    if (!m)
        return 0;
    uint64_t holder_until;
    uint64_t holder = turn_holder(l, now, &holder_until);
    if (holder != 0 && holder != m->container && !container_open(l, holder))
        holder = 0; /* its windows are gone (or never were) */
    struct gs_turn_slot f;
    int framed = frame_of(l, m->container, claim, now, &f);
    uint64_t wait = 0;
    if ((holder == 0 || holder == m->container) && framed && f.owner != 0 && !f.mine) {
        wait = f.mine_ns - now; /* another container's slot: ours comes then */
        t->seq = __atomic_load_n(&l->f->turn_seq, __ATOMIC_ACQUIRE);
        t->holder = f.owner;
    } else if (holder == 0 || holder == m->container) {
        if (holder != m->container)
            ST(&l->f->turn_until_ns, (uint64_t)0);
        ST(&l->f->turn_container, m->container);
        if (framed && until > f.end_ns + GS_LEDGER_SLOT_GRACE_NS)
            until = f.end_ns + GS_LEDGER_SLOT_GRACE_NS;
        if (until > now + GS_LEDGER_MAX_HOLD_NS)
            until = now + GS_LEDGER_MAX_HOLD_NS;
        if (until > LD(&l->f->turn_until_ns) || holder == 0)
            ST(&l->f->turn_until_ns, until);
        count_step(&m->open, 1);
        if (until > LD(&m->hold_ns))
            ST(&m->hold_ns, until);
        t->took = 1;
        t->slot_end = framed ? f.end_ns : 0;
    } else {
        wait = holder_until - now;
        t->seq = __atomic_load_n(&l->f->turn_seq, __ATOMIC_ACQUIRE);
        t->holder = holder;
    }
    gs_ledger_unlock(l);
    return wait;
}

int gs_ledger_frame(struct gs_ledger *l, int slot, uint64_t now, uint32_t claim_ppm, struct gs_turn_slot *f)
{
    struct gs_ledger_member *m = ask(l, slot, now, claim_ppm);
    if (!m)
        return 0;
    int framed = frame_of(l, m->container, claim_ppm, now, f);
    gs_ledger_unlock(l);
    return framed;
}

int gs_ledger_extend(struct gs_ledger *l, int slot, uint64_t now, uint64_t until)
{
    if (slot < 0 || slot >= GS_LEDGER_MEMBERS || gs_ledger_lock(l) != 0)
        return 0;
    struct gs_ledger_member *m = &l->f->m[slot];
    if (until > now + GS_LEDGER_MAX_HOLD_NS)
        until = now + GS_LEDGER_MAX_HOLD_NS;
    int ours = LD(&l->f->turn_container) == m->container;
    if (ours) {
        if (until > LD(&l->f->turn_until_ns))
            ST(&l->f->turn_until_ns, until);
        count_step(&m->draining, 1);
    }
    gs_ledger_unlock(l);
    return ours;
}

/* One fewer of member m's windows open, and draining if drained. */
static void count_close(struct gs_ledger_member *m, int drained)
{
    count_step(&m->open, -1);
    if (drained)
        count_step(&m->draining, -1);
}

void gs_ledger_close_window(struct gs_ledger *l, int slot, uint64_t now, int drained)
{
    if (slot < 0 || slot >= GS_LEDGER_MEMBERS)
        return;
    if (gs_ledger_lock(l) != 0) {
        count_close(&l->f->m[slot], drained); /* cannot settle the turn now: at least stop counting the window */
        return;
    }
    count_close(&l->f->m[slot], drained);
    settle_turn_at(l, now);
    gs_ledger_unlock(l);
}

void gs_ledger_touch(struct gs_ledger *l, int slot, uint64_t now)
{
    if (slot >= 0 && slot < GS_LEDGER_MEMBERS)
        ST(&l->f->m[slot].active_ns, now);
}

void gs_ledger_publish(struct gs_ledger *l, int slot, uint32_t use_ppm, uint64_t wants_ns)
{
    if (slot < 0 || slot >= GS_LEDGER_MEMBERS)
        return;
    ST(&l->f->m[slot].use_ppm, use_ppm);
    ST(&l->f->m[slot].wants_ns, wants_ns);
}

void gs_ledger_wanted(struct gs_ledger *l, int slot, uint64_t ns)
{
    if (slot < 0 || slot >= GS_LEDGER_MEMBERS)
        return;
    ST(&l->f->m[slot].wants_ns, ns);
}

unsigned gs_ledger_claims(struct gs_ledger *l, uint64_t container, uint64_t since, uint64_t wants_since,
                          struct gs_ledger_claim *out, unsigned max)
{
    unsigned k = 0;
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++) {
        const struct gs_ledger_member *m = &l->f->m[i];
        uint64_t c = LD(&m->container);
        uint64_t active = LD(&m->active_ns);
        if (c == 0 || c == container || active < since)
            continue;
        uint32_t w = LD(&m->weight), use = LD(&m->use_ppm);
        w = w > GS_LIM_MAX_WEIGHT ? GS_LIM_MAX_WEIGHT : w;
        use = use > GS_LIM_PPM ? GS_LIM_PPM : use;
        int wants = LD(&m->wants_ns) >= wants_since;
        unsigned j = 0;
        while (j < k && out[j].container != c)
            j++;
        if (j == k) {
            if (k == max)
                continue;
            out[k++] = (struct gs_ledger_claim){ c, { w, use, wants, 0, 0 }, active };
        } else {
            out[j].d.use_ppm = use > out[j].d.use_ppm ? use : out[j].d.use_ppm;
            out[j].d.wants_more |= wants;
            out[j].active_ns = active > out[j].active_ns ? active : out[j].active_ns;
        }
    }
    return k;
}

unsigned gs_ledger_demands(struct gs_ledger *l, uint64_t container, uint64_t since, uint64_t wants_since,
                           struct gs_lim_demand *out, unsigned max)
{
    struct gs_ledger_claim c[GS_LEDGER_MEMBERS];
    unsigned n =
        gs_ledger_claims(l, container, since, wants_since, c, max < GS_LEDGER_MEMBERS ? max : GS_LEDGER_MEMBERS);
    for (unsigned i = 0; i < n; i++)
        out[i] = c[i].d;
    return n;
}

uint64_t gs_ledger_busy_weight(struct gs_ledger *l, uint64_t container, uint64_t since)
{
    struct gs_lim_demand d[GS_LEDGER_MEMBERS];
    unsigned n = gs_ledger_demands(l, container, since, UINT64_MAX, d, GS_LEDGER_MEMBERS);
    uint64_t total = 0;
    for (unsigned i = 0; i < n; i++)
        total += d[i].weight;
    return total;
}

/* Whether slot i is a live member of a container other than `container`
 * for which counts holds (callers test the cheap fields first: alive asks
 * the kernel). */
static int counted_other(struct gs_ledger *l, int i, uint64_t container, int (*counts)(uint64_t c, void *ctx),
                         void *ctx)
{
    uint64_t c = LD(&l->f->m[i].container);
    return c != 0 && c != container && counts(c, ctx) && alive(l, i);
}

int gs_ledger_pid_named(struct gs_ledger *l, uint64_t container, int32_t pid, int (*counts)(uint64_t c, void *ctx),
                        void *ctx)
{
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++)
        /* a dead member's pid may be anyone's now */
        if (LD(&l->f->m[i].pid) == pid && counted_other(l, i, container, counts, ctx))
            return 1;
    return 0;
}

unsigned gs_ledger_pidns_others(struct gs_ledger *l, uint64_t container, uint64_t pidns,
                                int (*counts)(uint64_t c, void *ctx), void *ctx)
{
    unsigned n = 0;
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++) {
        uint64_t ns = LD(&l->f->m[i].pidns);
        if ((ns == 0 || ns != pidns) && counted_other(l, i, container, counts, ctx))
            n++;
    }
    return n;
}

void gs_ledger_wait(struct gs_ledger *l, uint32_t seq, uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };
    /* a shared (not private) futex: the waker is another process */
    syscall(SYS_futex, &l->f->turn_seq, FUTEX_WAIT, seq, &ts, NULL, 0);
}

int gs_ledger_others(struct gs_ledger *l, uint64_t container)
{
    int n = 0;
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++) {
        uint64_t c = LD(&l->f->m[i].container);
        n += c != 0 && c != container;
    }
    return n;
}

void gs_ledger_reap(struct gs_ledger *l)
{
    if (gs_ledger_lock(l) != 0)
        return;
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++)
        if (LD(&l->f->m[i].container) != 0 && !alive(l, i))
            l->f->m[i] = (struct gs_ledger_member){ 0 };
    settle_turn(l);
    gs_ledger_unlock(l);
}

uint64_t gs_ledger_container_id(uint64_t dev, uint64_t ino)
{
    uint64_t x = ino ^ (dev * 0x9E3779B97F4A7C15ULL);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 29;
    return x ? x : 1;
}
