/* The device ledger; see ledger.h and docs/compute.md. */
#define _GNU_SOURCE
#include "ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void init_ledger(struct gs_ledger *l)
{
    memset(l, 0, sizeof *l);
    l->version = GS_LEDGER_VERSION;
    l->size = (uint32_t)sizeof *l;
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) == 0) {
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        pthread_mutex_init(&l->lock, &a);
        pthread_mutexattr_destroy(&a);
    }
    __atomic_store_n(&l->magic, GS_LEDGER_MAGIC, __ATOMIC_RELEASE);
}

struct gs_ledger *gs_ledger_open(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open device ledger %s: %s", path, strerror(errno));
        return NULL;
    }
    struct gs_ledger *l = NULL;
    struct stat st;
    if (flock(fd, LOCK_EX) != 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot lock device ledger %s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (st.st_size != 0 && (size_t)st.st_size != sizeof *l) {
        snprintf(err, errlen, "device ledger %s has size %lld, expected %zu: another gpuslice version?", path,
                 (long long)st.st_size, sizeof *l);
    } else if (st.st_size == 0 && ftruncate(fd, (off_t)sizeof *l) != 0) {
        snprintf(err, errlen, "cannot size device ledger %s: %s", path, strerror(errno));
    } else {
        void *m = mmap(NULL, sizeof *l, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            snprintf(err, errlen, "cannot map device ledger %s: %s", path, strerror(errno));
        } else {
            l = m;
            uint64_t magic = __atomic_load_n(&l->magic, __ATOMIC_ACQUIRE);
            if (magic == 0) {
                init_ledger(l);
            } else if (magic != GS_LEDGER_MAGIC || l->version != GS_LEDGER_VERSION) {
                snprintf(err, errlen, "device ledger %s has layout version %u, this build uses %u", path,
                         l->version, GS_LEDGER_VERSION);
                munmap(m, sizeof *l);
                l = NULL;
            }
        }
    }
    flock(fd, LOCK_UN);
    close(fd);
    return l;
}

void gs_ledger_close(struct gs_ledger *l)
{
    if (l)
        munmap(l, sizeof *l);
}

static int container_open(const struct gs_ledger *l, uint64_t container)
{
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++)
        if (l->m[i].pid != 0 && l->m[i].open != 0 && l->m[i].container == container)
            return 1;
    return 0;
}

/* Frees the turn if its container has no window open any more. */
static void settle_turn(struct gs_ledger *l)
{
    if (l->turn_container == 0 || container_open(l, l->turn_container))
        return;
    l->turn_container = 0;
    l->turn_until_ns = 0;
    __atomic_add_fetch(&l->turn_seq, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &l->turn_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int lock(struct gs_ledger *l)
{
    int rc = pthread_mutex_lock(&l->lock);
    if (rc == EOWNERDEAD) {
        /* the holder died mid-update: the members are the truth */
        settle_turn(l);
        pthread_mutex_consistent(&l->lock);
        return 0;
    }
    return rc == 0 ? 0 : -1;
}

int gs_ledger_join(struct gs_ledger *l, int32_t pid, uint64_t start_time, uint64_t pidns, uint64_t container,
                   uint32_t weight)
{
    if (lock(l) != 0)
        return -1;
    int slot = -1;
    for (int i = 0; i < GS_LEDGER_MEMBERS && slot < 0; i++)
        if (l->m[i].pid == 0)
            slot = i;
    if (slot >= 0)
        l->m[slot] = (struct gs_ledger_member){pid, 0, start_time, pidns, container, 0, weight, 0};
    pthread_mutex_unlock(&l->lock);
    return slot;
}

uint64_t gs_ledger_open_window(struct gs_ledger *l, int slot, uint64_t now, uint64_t until, uint32_t *seq)
{
    if (lock(l) != 0)
        return 0;
    struct gs_ledger_member *m = &l->m[slot];
    __atomic_store_n(&m->active_ns, now, __ATOMIC_RELAXED);
    uint64_t wait = 0;
    if (l->turn_container == 0 || l->turn_container == m->container || now >= l->turn_until_ns) {
        if (l->turn_container != m->container)
            l->turn_until_ns = 0;
        l->turn_container = m->container;
        if (until > l->turn_until_ns)
            l->turn_until_ns = until;
        m->open++;
    } else {
        wait = l->turn_until_ns - now;
        *seq = __atomic_load_n(&l->turn_seq, __ATOMIC_ACQUIRE);
    }
    pthread_mutex_unlock(&l->lock);
    return wait;
}

void gs_ledger_extend(struct gs_ledger *l, int slot, uint64_t until)
{
    if (lock(l) != 0)
        return;
    if (l->turn_container == l->m[slot].container && until > l->turn_until_ns)
        l->turn_until_ns = until;
    pthread_mutex_unlock(&l->lock);
}

void gs_ledger_close_window(struct gs_ledger *l, int slot)
{
    if (lock(l) != 0)
        return;
    if (l->m[slot].open > 0)
        l->m[slot].open--;
    settle_turn(l);
    pthread_mutex_unlock(&l->lock);
}

void gs_ledger_touch(struct gs_ledger *l, int slot, uint64_t now)
{
    __atomic_store_n(&l->m[slot].active_ns, now, __ATOMIC_RELAXED);
}

uint64_t gs_ledger_busy_weight(struct gs_ledger *l, uint64_t container, uint64_t since)
{
    uint64_t seen[GS_LEDGER_MEMBERS] = {0}, total = 0;
    uint32_t k = 0;
    if (lock(l) != 0)
        return 0;
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++) {
        const struct gs_ledger_member *m = &l->m[i];
        if (m->pid == 0 || m->container == container || __atomic_load_n(&m->active_ns, __ATOMIC_RELAXED) < since)
            continue;
        uint32_t j = 0;
        while (j < k && seen[j] != m->container)
            j++;
        if (j == k) {
            seen[k++] = m->container;
            total += m->weight;
        }
    }
    pthread_mutex_unlock(&l->lock);
    return total;
}

int gs_ledger_has_pid(struct gs_ledger *l, uint64_t container, int32_t pid)
{
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++)
        if (__atomic_load_n(&l->m[i].pid, __ATOMIC_RELAXED) == pid && l->m[i].container != container)
            return 1;
    return 0;
}

void gs_ledger_wait(struct gs_ledger *l, uint32_t seq, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL)};
    /* a shared (not private) futex: the waker is another process */
    syscall(SYS_futex, &l->turn_seq, FUTEX_WAIT, seq, &ts, NULL, 0);
}

int gs_ledger_others(struct gs_ledger *l, uint64_t container)
{
    int n = 0;
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++)
        n += __atomic_load_n(&l->m[i].pid, __ATOMIC_RELAXED) != 0 && l->m[i].container != container;
    return n;
}

void gs_ledger_reap(struct gs_ledger *l, int (*alive)(int32_t pid, uint64_t start_time, uint64_t pidns))
{
    struct gs_ledger_member snap[GS_LEDGER_MEMBERS];
    int dead[GS_LEDGER_MEMBERS] = {0};
    if (lock(l) != 0)
        return;
    memcpy(snap, l->m, sizeof snap);
    pthread_mutex_unlock(&l->lock);
    /* liveness outside the lock: it reads /proc */
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++)
        dead[i] = snap[i].pid != 0 && !alive(snap[i].pid, snap[i].start_time, snap[i].pidns);
    if (lock(l) != 0)
        return;
    for (int i = 0; i < GS_LEDGER_MEMBERS; i++)
        if (dead[i] && l->m[i].pid == snap[i].pid && l->m[i].start_time == snap[i].start_time)
            l->m[i] = (struct gs_ledger_member){0};
    settle_turn(l);
    pthread_mutex_unlock(&l->lock);
}
