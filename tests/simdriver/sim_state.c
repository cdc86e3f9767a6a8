/*
 * Attaching to the simulated GPU's state, locking it, and keeping the process
 * table true: a process that died (even by SIGKILL) loses its memory the next
 * time anyone looks, like on a real driver.
 */
#define _GNU_SOURCE /* F_OFD_SETLK, F_OFD_GETLK */
#include "sim_state.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim_export.h"

static struct sim_state *g_state;
static pthread_mutex_t g_attach_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_private;       /* g_state is ours alone (anonymous mapping) */
static char *g_path;        /* the state file's path; NULL for a private state */
static int g_state_fd = -1; /* open on it: where other processes' liveness bytes are read */

/* ---- configuration ---- */

int sim_parse_bytes(const char *text, uint64_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t mult;
    } units[] = {
        { "", 1 },
        { "k", 1ULL << 10 },
        { "K", 1ULL << 10 },
        { "Ki", 1ULL << 10 },
        { "KiB", 1ULL << 10 },
        { "m", 1ULL << 20 },
        { "M", 1ULL << 20 },
        { "Mi", 1ULL << 20 },
        { "MiB", 1ULL << 20 },
        { "g", 1ULL << 30 },
        { "G", 1ULL << 30 },
        { "Gi", 1ULL << 30 },
        { "GiB", 1ULL << 30 },
        { "T", 1ULL << 40 },
        { "Ti", 1ULL << 40 },
        { "TiB", 1ULL << 40 },
    };
    if (!text || text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            if (v > UINT64_MAX / units[i].mult)
                return -1;
            *out = v * units[i].mult;
            return 0;
        }
    }
    return -1;
}

static int env_bytes(const char *name, uint64_t dflt, uint64_t min, uint64_t *out)
{
    const char *v = getenv(name);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (sim_parse_bytes(v, out) != 0 || *out < min) {
        fprintf(stderr,
                "gpuslice-sim: invalid %s='%s': expected a byte count >= %llu "
                "(digits, optional K/M/G/T, Ki/Mi/Gi/Ti or KiB/MiB/GiB/TiB)\n",
                name, v, (unsigned long long)min);
        return -1;
    }
    return 0;
}

int sim_env_uint(const char *name, uint64_t dflt, uint64_t min, uint64_t max, const char *unit, uint64_t *out)
{
    const char *v = getenv(name);
    *out = dflt;
    if (!v)
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] < '0' || v[0] > '9' || n < min || n > max) {
        fprintf(stderr, "gpuslice-sim: invalid %s='%s': expected %s %llu..%llu\n", name, v, unit,
                (unsigned long long)min, (unsigned long long)max);
        return -1;
    }
    *out = n;
    return 0;
}

/* The device model's whole-number knobs (docs/simulated-driver.md), one row
 * each: read into the config, copied into a new state. */
static const struct uint_knob {
    const char *name;
    uint32_t dflt, min, max;
    const char *unit;
    size_t in_config, in_state; /* offsets of the uint32_t field */
} uint_knobs[] = {
    { "GPUSLICE_SIM_SWITCH_LOSS", 0, 0, 90, "percent", offsetof(struct sim_config, switch_loss_pct),
      offsetof(struct sim_state, switch_loss_pct) },
    { "GPUSLICE_SIM_NVML_SNAPSHOT", 0, 0, 1, "a flag", offsetof(struct sim_config, nvml_snapshot),
      offsetof(struct sim_state, nvml_snapshot) },
    { "GPUSLICE_SIM_TIMESLICE_US", 0, 0, 100000, "microseconds", offsetof(struct sim_config, timeslice_us),
      offsetof(struct sim_state, timeslice_us) },
    { "GPUSLICE_SIM_MPS", 0, 0, 1, "a flag", offsetof(struct sim_config, mps), offsetof(struct sim_state, mps) },
    { "GPUSLICE_SIM_NVML_PERIOD_MS", SIM_UTIL_PERIOD_NS / 1000000, 10, 2000, "milliseconds",
      offsetof(struct sim_config, nvml_period_ms), offsetof(struct sim_state, nvml_period_ms) },
    { "GPUSLICE_SIM_NVML_READ_US", 0, 0, 1000000, "microseconds", offsetof(struct sim_config, nvml_read_us),
      offsetof(struct sim_state, nvml_read_us) },
    { "GPUSLICE_SIM_NVML_READ_MEET", 0, 0, 16, "reads", offsetof(struct sim_config, nvml_read_meet),
      offsetof(struct sim_state, nvml_read_meet) },
    { "GPUSLICE_SIM_EVENT_NS", 0, 0, 100000, "nanoseconds", offsetof(struct sim_config, event_ns),
      offsetof(struct sim_state, event_ns) },
    { "GPUSLICE_SIM_NVML_SHORT_COUNT", 0, 0, 1, "a flag", offsetof(struct sim_config, nvml_short_count),
      offsetof(struct sim_state, nvml_short_count) },
    { "GPUSLICE_SIM_PAGEABLE_ACCESS", 0, 0, 1, "a flag", offsetof(struct sim_config, pageable_access),
      offsetof(struct sim_state, pageable_access) },
    { "GPUSLICE_SIM_POWER_INSTANT", 1, 0, 1, "a flag", offsetof(struct sim_config, power_instant),
      offsetof(struct sim_state, power_instant) },
    { "GPUSLICE_SIM_NVML_HOST_PIDS", 0, 0, 1, "a flag", offsetof(struct sim_config, nvml_host_pids),
      offsetof(struct sim_state, nvml_host_pids) },
};
#define N_UINT_KNOBS (sizeof(uint_knobs) / sizeof(uint_knobs[0]))

int sim_config_from_env(struct sim_config *cfg)
{
    uint64_t n = 1;
    const char *v = getenv("GPUSLICE_SIM_DEVICES");
    if (v) {
        char *end = NULL;
        errno = 0;
        unsigned long d = strtoul(v, &end, 10);
        if (errno || end == v || *end || v[0] < '0' || v[0] > '9' || d < 1 || d > SIM_MAX_DEVICES) {
            fprintf(stderr, "gpuslice-sim: invalid GPUSLICE_SIM_DEVICES='%s': expected 1..%d\n", v, SIM_MAX_DEVICES);
            return -1;
        }
        n = d;
    }
    cfg->ndevices = (uint32_t)n;
    if (env_bytes("GPUSLICE_SIM_MEM", SIM_DEFAULT_MEM, SIM_GRANULE, &cfg->mem) != 0)
        return -1;
    if (env_bytes("GPUSLICE_SIM_CTX_OVERHEAD", SIM_DEFAULT_CTX_OVERHEAD, 0, &cfg->ctx_overhead) != 0)
        return -1;
    uint64_t w = 0;
    if (sim_env_uint("GPUSLICE_SIM_POWER_DYN", SIM_DEFAULT_POWER_DYN_MW / 1000, 0, 10000, "watts", &w) != 0)
        return -1;
    cfg->power_dyn_mw = w * 1000;
    for (size_t i = 0; i < N_UINT_KNOBS; i++) {
        const struct uint_knob *k = &uint_knobs[i];
        if (sim_env_uint(k->name, k->dflt, k->min, k->max, k->unit, &w) != 0)
            return -1;
        uint32_t value = (uint32_t)w;
        memcpy((char *)cfg + k->in_config, &value, sizeof(value));
    }
    return 0;
}

/* ---- creating and mapping ---- */

static int init_mutex(pthread_mutex_t *m, int shared)
{
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) != 0)
        return -1;
    int rc = 0;
    if (shared)
        rc |= pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    /* A holder killed mid-update must not wedge every other process. */
    rc |= pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    rc |= pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
    return rc ? -1 : 0;
}

static void init_state(struct sim_state *st, const struct sim_config *cfg)
{
    st->version = SIM_STATE_VERSION;
    st->size = (uint32_t)sizeof(*st);
    st->ndevices = cfg->ndevices;
    st->ctx_overhead = cfg->ctx_overhead;
    st->power_dyn_mw = cfg->power_dyn_mw;
    for (size_t i = 0; i < N_UINT_KNOBS; i++)
        memcpy((char *)st + uint_knobs[i].in_state, (const char *)cfg + uint_knobs[i].in_config, sizeof(uint32_t));
    st->next_id = 1;
    for (uint32_t d = 0; d < cfg->ndevices; d++) {
        st->dev[d].total = cfg->mem;
        st->dev[d].tl_last_proc = -1;
        st->dev[d].tl_owner = -1;
    }
    for (int c = 0; c < SIM_MAX_CHUNKS; c++)
        st->chunks[c].proc = -1;
}

static struct sim_state *attach_private(void)
{
    struct sim_config cfg;
    if (sim_config_from_env(&cfg) != 0)
        return NULL;
    void *p = mmap(NULL, sizeof(struct sim_state), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("gpuslice-sim: mmap");
        return NULL;
    }
    struct sim_state *st = p;
    init_state(st, &cfg);
    if (init_mutex(&st->lock, 0) != 0) {
        munmap(p, sizeof(*st));
        return NULL;
    }
    st->magic = SIM_STATE_MAGIC;
    return st;
}

/* Whether no open file description holds a lock on any byte of fd's file:
 * no process of any build uses it (each holds its liveness byte while it
 * lives, proc_alive). */
static int unused_by_any(int fd)
{
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
    return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK;
}

/* A state file another build left: made anew if nothing uses it (it holds
 * nothing but a simulated GPU's state), else refused. 0: made empty. */
static int replace_foreign(int fd, const char *path, int create, const char *what)
{
    if (create && unused_by_any(fd) && ftruncate(fd, 0) == 0) {
        fprintf(stderr, "gpuslice-sim: '%s' was %s, used by no process: made anew\n", path, what);
        return 0;
    }
    fprintf(stderr,
            "gpuslice-sim: '%s' is %s: another build of the simulated driver made it; remove it once no program "
            "runs on that simulated GPU\n",
            path, what);
    return -1;
}

/* What makes a non-empty state file another build's, or NULL if it is this
 * build's. */
static const char *foreign_state(int fd, const struct stat *sb)
{
    if (sb->st_size == 0)
        return NULL;
    if ((size_t)sb->st_size != sizeof(struct sim_state))
        return "not a state file of this build (its size differs)";
    struct {
        uint64_t magic;
        uint32_t version, size;
    } head; /* the state's first fields (not the whole state: megabytes) */
    _Static_assert(offsetof(struct sim_state, version) == 8 && offsetof(struct sim_state, size) == 12,
                   "the state file starts with magic, version and size");
    if (pread(fd, &head, sizeof head, 0) != (ssize_t)sizeof head || head.magic != SIM_STATE_MAGIC ||
        head.version != SIM_STATE_VERSION || head.size != sizeof(struct sim_state))
        return "of a foreign magic or version";
    return NULL;
}

static struct sim_state *attach_file(const char *path, int create)
{
    /* no symbolic link: the state is rewritten whole when it is not one of
     * this build's, so a link planted beside it would have that done to
     * whatever it names; nor anything but a regular file */
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (create ? O_CREAT : 0), 0666);
    struct stat kind;
    if (fd >= 0 && (fstat(fd, &kind) != 0 || !S_ISREG(kind.st_mode))) {
        close(fd);
        fd = -1;
        errno = EINVAL;
    }
    if (fd < 0) {
        fprintf(stderr, "gpuslice-sim: cannot open GPUSLICE_SIM_STATE='%s': %s\n", path, strerror(errno));
        return NULL;
    }
    /* flock serialises creation; the robust mutex guards everything after. */
    struct sim_state *st = NULL;
    struct stat sb;
    if (flock(fd, LOCK_EX) != 0 || fstat(fd, &sb) != 0) {
        fprintf(stderr, "gpuslice-sim: cannot lock '%s': %s\n", path, strerror(errno));
        goto out;
    }
    const char *foreign = foreign_state(fd, &sb);
    if (foreign) {
        if (replace_foreign(fd, path, create, foreign) != 0)
            goto out;
        sb.st_size = 0;
    }
    int fresh = sb.st_size == 0;
    if (fresh && !create) {
        fprintf(stderr, "gpuslice-sim: '%s' is empty: no process has used it yet\n", path);
        goto out;
    }
    struct sim_config cfg;
    if (fresh) {
        if (sim_config_from_env(&cfg) != 0)
            goto out;
        if (ftruncate(fd, (off_t)sizeof(struct sim_state)) != 0) {
            fprintf(stderr, "gpuslice-sim: cannot size '%s': %s\n", path, strerror(errno));
            goto out;
        }
        /* open to every uid, as the device nodes of a GPU are: pods of
         * different users share one simulated GPU (the umask took the
         * creator's 0666 down to 0644, and the second user was refused) */
        if (sb.st_uid == geteuid() && fchmod(fd, 0666) != 0) {
            fprintf(stderr, "gpuslice-sim: cannot open '%s' to every user: %s\n", path, strerror(errno));
            goto out;
        }
    }
    void *p = mmap(NULL, sizeof(struct sim_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "gpuslice-sim: cannot map '%s': %s\n", path, strerror(errno));
        goto out;
    }
    st = p;
    if (fresh) {
        init_state(st, &cfg);
        if (init_mutex(&st->lock, 1) != 0) {
            munmap(p, sizeof(*st));
            st = NULL;
            goto out;
        }
        __atomic_store_n(&st->magic, SIM_STATE_MAGIC, __ATOMIC_RELEASE);
    }
out:
    /* Unlock explicitly: the descriptor stays open (and would keep a flock). */
    flock(fd, LOCK_UN);
    if (!st) {
        close(fd);
        return NULL;
    }
    /* Kept: others' liveness bytes are read through it (proc_alive). */
    if (g_state_fd >= 0)
        close(g_state_fd);
    g_state_fd = fd;
    free(g_path);
    g_path = strdup(path);
    return st;
}

/*
 * Without a state file, libcuda.so.1 and libnvidia-ml.so.1 of one process
 * must still agree; each exports its private state so that the other, when
 * already loaded, can use it instead of making its own.
 */
SIM_EXPORT void *gpusliceSimPrivateState(void);
SIM_EXPORT void *gpusliceSimPrivateState(void)
{
    return g_private ? g_state : NULL;
}

static struct sim_state *find_sibling_private(void)
{
    void *h = dlopen(SIM_SIBLING_SONAME, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return NULL;
    void *(*fn)(void) = (void *(*)(void))dlsym(h, "gpusliceSimPrivateState");
    struct sim_state *st = fn ? fn() : NULL;
    dlclose(h);
    return st;
}

struct sim_state *sim_state_attach(void)
{
    pthread_mutex_lock(&g_attach_lock);
    if (!g_state) {
        const char *path = getenv("GPUSLICE_SIM_STATE");
        if (path && path[0]) {
            g_state = attach_file(path, 1);
        } else {
            g_state = find_sibling_private();
            if (!g_state) {
                g_state = attach_private();
                g_private = g_state != NULL;
            }
        }
    }
    struct sim_state *st = g_state;
    pthread_mutex_unlock(&g_attach_lock);
    return st;
}

struct sim_state *sim_state_open_existing(const char *path)
{
    return attach_file(path, 0);
}

void sim_state_detach(void)
{
    pthread_mutex_lock(&g_attach_lock);
    /* The mapping is left in place: a sibling library may still point at it. */
    g_state = NULL;
    g_private = 0;
    pthread_mutex_unlock(&g_attach_lock);
}

/* ---- processes ---- */

/* Our start time (/proc/self/stat field 22): /proc/self is us in whatever
 * pid namespace its /proc belongs to, where /proc/<getpid()> may not be. */
static uint64_t self_start_time(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* The command name may hold spaces and ')': fields count from the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return 0;
    for (int field = 3; field <= 22; field++) { /* p ends on the space before field 22 */
        p = strchr(p + 1, ' ');
        if (!p)
            return 0;
    }
    unsigned long long t = strtoull(p + 1, NULL, 10);
    return t ? t : 1;
}

/* Who we are, cached per pid (a forked child is someone else). */
struct sim_self {
    pid_t pid;
    uint64_t pidns;
    uint64_t start_time;
};

static const struct sim_self *self_identity(void)
{
    static __thread struct sim_self cached;
    pid_t pid = getpid();
    if (cached.pid != pid) {
        struct stat ns;
        cached.pidns = stat("/proc/self/ns/pid", &ns) == 0 ? (uint64_t)ns.st_ino : 0;
        cached.start_time = self_start_time();
        cached.pid = pid;
    }
    return &cached;
}

static int is_self(const struct sim_proc *p)
{
    const struct sim_self *me = self_identity();
    return p->ns_pid == me->pid && p->pidns == me->pidns && p->start_time == me->start_time;
}

/* The inode of the host's pid namespace (PROC_PID_INIT_INO, fixed by the kernel). */
#define SIM_INIT_PIDNS 0xEFFFFFFCULL

/* The pid the real driver reports for us: our pid in the host's namespace.
 * In a child namespace whose /proc is the host's (unshare without
 * --mount-proc), /proc/self/status's NSpid names it first; in a container
 * with a /proc of its own nothing does, and a stand-in that no process of
 * ours has takes its place, as a host pid would. */
static int32_t nvml_pid(int slot)
{
    const struct sim_self *me = self_identity();
    if (me->pidns == SIM_INIT_PIDNS)
        return me->pid;
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long outer = 0, inner = 0;
    int levels = 0;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "NSpid:", 6) == 0) {
            levels = sscanf(line + 6, "%ld %ld", &outer, &inner);
            break;
        }
    if (f)
        fclose(f);
    return levels == 2 ? (int32_t)outer : SIM_FOREIGN_PID_BASE + slot;
}

int32_t sim_proc_pid_seen(const struct sim_state *st, int32_t pid)
{
    const struct sim_self *me = self_identity();
    if (st->nvml_host_pids || me->pidns == SIM_INIT_PIDNS)
        return pid;
    for (int p = 0; p < SIM_MAX_PROCS; p++)
        if (st->procs[p].pid == pid)
            return st->procs[p].pidns == me->pidns ? st->procs[p].ns_pid : pid;
    return pid;
}

/* The descriptor holding our slot's liveness byte, opened by this process
 * (a forked child closes the one it inherited: its description, and so the
 * lock, is the parent's). */
static int g_live_fd = -1;
static int g_live_slot = -1;
static pthread_once_t g_live_once = PTHREAD_ONCE_INIT;

static void live_forget_in_child(void)
{
    if (g_live_fd >= 0)
        close(g_live_fd);
    g_live_fd = -1;
    g_live_slot = -1;
}

static void live_register_atfork(void)
{
    pthread_atfork(NULL, NULL, live_forget_in_child);
}

static int lock_byte(int fd, int cmd, short type, off_t off)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = off, .l_len = 1 };
    if (fcntl(fd, cmd, &fl) != 0)
        return -1;
    return fl.l_type;
}

/* Takes slot's liveness byte through a descriptor of our own. 0 or -1. */
static int live_hold(int slot)
{
    pthread_once(&g_live_once, live_register_atfork);
    if (!g_path) /* a private state: no one else to tell */
        return 0;
    if (g_live_fd < 0)
        g_live_fd = open(g_path, O_RDWR | O_CLOEXEC);
    if (g_live_fd < 0)
        return -1;
    if (lock_byte(g_live_fd, F_OFD_SETLK, F_WRLCK, SIM_LIVE_BYTE(slot)) < 0) {
        fprintf(stderr, "gpuslice-sim: cannot lock process slot %d of '%s': %s\n", slot, g_path, strerror(errno));
        return -1;
    }
    g_live_slot = slot;
    return 0;
}

/* Whether another process's slot is alive: its byte is locked. Without a
 * state file (a private state) every other slot is a leftover of a parent
 * that forked us. When the kernel cannot say, alive. */
static int proc_alive(int slot)
{
    if (g_state_fd < 0)
        return 0;
    return lock_byte(g_state_fd, F_OFD_GETLK, F_WRLCK, SIM_LIVE_BYTE(slot)) != F_UNLCK;
}

/* A mapping or import of another process's VMM memory ends: that memory
 * goes once its owner released it and nothing else refers to it. */
static void unref_phys(struct sim_state *st, uint64_t id)
{
    for (uint32_t i = 0; i < st->alloc_hwm; i++) {
        struct sim_alloc *phys = &st->allocs[i];
        if (phys->id != id || phys->kind != SIM_KIND_VMM_PHYS)
            continue;
        if (--phys->refs == 0) {
            st->procs[phys->proc].used[phys->dev] -= phys->charged;
            memset(phys, 0, sizeof(*phys));
        }
        return;
    }
}

void sim_proc_release(struct sim_state *st, int slot)
{
    for (uint32_t i = 0; i < st->alloc_hwm; i++) {
        struct sim_alloc *a = &st->allocs[i];
        if (!a->id || a->proc != slot)
            continue;
        uint64_t link = a->kind == SIM_KIND_VMM_MAP || a->kind == SIM_KIND_VMM_IMPORT ? a->link : 0;
        memset(a, 0, sizeof(*a));
        if (link)
            unref_phys(st, link);
    }
    for (uint32_t c = 0; c < st->chunk_hwm; c++)
        if (st->chunks[c].proc == slot) {
            memset(&st->chunks[c], 0, sizeof(st->chunks[c]));
            st->chunks[c].proc = -1;
        }
    memset(&st->procs[slot], 0, sizeof(st->procs[slot]));
}

/* Rebuilds the usage counters from the tables, after a holder died mid-update. */
static void recount(struct sim_state *st)
{
    for (int p = 0; p < SIM_MAX_PROCS; p++) {
        for (int d = 0; d < SIM_MAX_DEVICES; d++)
            st->procs[p].used[d] = (uint64_t)st->procs[p].contexts[d] * st->ctx_overhead;
    }
    for (uint32_t i = 0; i < st->alloc_hwm; i++) {
        const struct sim_alloc *a = &st->allocs[i];
        if (a->id && a->proc >= 0 && a->proc < SIM_MAX_PROCS && a->dev < SIM_MAX_DEVICES)
            st->procs[a->proc].used[a->dev] += a->charged;
    }
    for (uint32_t c = 0; c < st->chunk_hwm; c++) {
        const struct sim_chunk *k = &st->chunks[c];
        if (k->proc >= 0 && k->proc < SIM_MAX_PROCS && k->dev < SIM_MAX_DEVICES)
            st->procs[k->proc].used[k->dev] += SIM_GRANULE;
    }
}

static void prune_dead(struct sim_state *st)
{
    for (int p = 0; p < SIM_MAX_PROCS; p++) {
        const struct sim_proc *pr = &st->procs[p];
        if (pr->pid == 0 || is_self(pr))
            continue;
        if (!proc_alive(p))
            sim_proc_release(st, p);
    }
}

int sim_state_lock(struct sim_state *st)
{
    int rc = pthread_mutex_lock(&st->lock);
    if (rc == EOWNERDEAD) {
        /* Tables are written id-last, so entries are whole; counters may not be. */
        recount(st);
        pthread_mutex_consistent(&st->lock);
        rc = 0;
    }
    if (rc != 0)
        return -1;
    prune_dead(st);
    return 0;
}

void sim_state_unlock(struct sim_state *st)
{
    pthread_mutex_unlock(&st->lock);
}

int sim_proc_self(struct sim_state *st)
{
    if (g_live_slot >= 0 && is_self(&st->procs[g_live_slot]))
        return g_live_slot;
    int free_slot = -1;
    for (int p = 0; p < SIM_MAX_PROCS; p++) {
        const struct sim_proc *pr = &st->procs[p];
        if (pr->pid && is_self(pr)) {
            if (!g_path)
                return p;
            /* Ours before an exec, which closed its lock: that program is gone. */
            sim_proc_release(st, p);
        }
        if (st->procs[p].pid == 0 && free_slot < 0)
            free_slot = p;
    }
    if (free_slot < 0 || live_hold(free_slot) != 0)
        return -1;
    const struct sim_self *me = self_identity();
    struct sim_proc *pr = &st->procs[free_slot];
    memset(pr, 0, sizeof(*pr));
    pr->ns_pid = me->pid;
    pr->pidns = me->pidns;
    pr->start_time = me->start_time;
    pr->va_next = SIM_VA_BASE;
    pr->va32_next = SIM_VA32_BASE;
    pr->pid = nvml_pid(free_slot);
    return free_slot;
}

uint64_t sim_device_used(const struct sim_state *st, int dev)
{
    uint64_t sum = 0;
    for (int p = 0; p < SIM_MAX_PROCS; p++)
        if (st->procs[p].pid)
            sum += st->procs[p].used[dev];
    return sum;
}

/* ---- identity ---- */

void sim_device_uuid_bytes(int dev, unsigned char out[16])
{
    /* GPU-00000000-5151-0000-0000-00000000000N */
    memset(out, 0, 16);
    out[4] = 0x51;
    out[5] = 0x51;
    out[15] = (unsigned char)dev;
}

void sim_device_uuid_string(int dev, char *out, size_t len)
{
    unsigned char b[16];
    sim_device_uuid_bytes(dev, b);
    snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}
