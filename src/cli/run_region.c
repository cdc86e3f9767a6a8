/* The region of a run's container. A region is created whole: made and
 * initialised under a private name, then linked into place, so no other run
 * ever reads one half made. It records the limits of the run that made it,
 * and every run that uses it holds a shared lock on GS_REGION_RUN_BYTE while
 * its command runs, so a later run of the same --name is compared with those
 * limits, and refused while the container is in use, before any process of
 * it has touched a GPU. */
#define _GNU_SOURCE
#include "run_region.h"
#include "cli.h"
#include "ofdlock.h"
#include "region_view.h"
#include "size_parse.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { JOINED = 0, RETRY = 1, REFUSED = 2, FAILED = -1 };

static void record_limits(struct gs_region_run_limits *out, const struct gs_config *cfg)
{
    memset(out, 0, sizeof *out);
    out->set = 1;
    out->compute_mode = (uint32_t)cfg->compute_mode;
    out->share_weight = cfg->share_weight;
    out->managed_policy = (uint32_t)cfg->managed_policy;
    for (int i = 0; i < GS_MAX_DEVICES; i++) {
        out->mem_limit[i] = cfg->mem_limit[i];
        out->sm_limit[i] = cfg->sm_limit[i];
    }
}

static void show_mem(uint64_t bytes, char *buf, size_t len)
{
    if (bytes)
        gs_format_size(bytes, buf, len);
    else
        snprintf(buf, len, "none");
}

/* 1 and what differs in what, or 0 when the limits are the same. */
static int run_limits_differ(const struct gs_region_run_limits *have, const struct gs_region_run_limits *want,
                             char *what, size_t len)
{
    for (int i = 0; i < GS_MAX_DEVICES; i++) {
        char a[GS_FORMAT_SIZE_MAX], b[GS_FORMAT_SIZE_MAX];
        show_mem(have->mem_limit[i], a, sizeof a);
        show_mem(want->mem_limit[i], b, sizeof b);
        if (have->mem_limit[i] != want->mem_limit[i]) {
            snprintf(what, len, "a memory limit of %s on GPU %d; this run asks for %s", a, i, b);
            return 1;
        }
        if (have->sm_limit[i] != want->sm_limit[i]) {
            snprintf(what, len, "a compute limit of %u%% on GPU %d; this run asks for %u%%",
                     have->sm_limit[i] ? have->sm_limit[i] : 100, i, want->sm_limit[i] ? want->sm_limit[i] : 100);
            return 1;
        }
    }
    if (have->compute_mode != want->compute_mode || have->share_weight != want->share_weight ||
        have->managed_policy != want->managed_policy) {
        snprintf(what, len, "another --mode, --weight or --managed");
        return 1;
    }
    return 0;
}

/* A region no run recorded limits in (made by a process itself): compare
 * the limits its devices hold, where this run's are the same everywhere. */
static int device_limits_differ(const struct gs_region *r, const struct gs_config *cfg, char *what, size_t len)
{
    for (int i = 1; i < GS_MAX_DEVICES; i++)
        if (cfg->mem_limit[i] != cfg->mem_limit[0] || cfg->sm_limit[i] != cfg->sm_limit[0])
            return 0; /* per-device limits: ordinals are the process's own, not comparable here */
    for (uint32_t d = 0; d < r->ndevices; d++) {
        const struct gs_region_device *dv = &r->dev[d];
        char a[GS_FORMAT_SIZE_MAX], b[GS_FORMAT_SIZE_MAX];
        show_mem(dv->mem_limit, a, sizeof a);
        show_mem(cfg->mem_limit[0], b, sizeof b);
        if (dv->mem_limit != cfg->mem_limit[0]) {
            snprintf(what, len, "a memory limit of %s on %s; this run asks for %s", a, dv->uuid, b);
            return 1;
        }
        if (cfg->compute_mode == GS_COMPUTE_CAP && dv->sm_limit != cfg->sm_limit[0]) {
            snprintf(what, len, "a compute cap of %u%% on %s; this run asks for %u%%",
                     dv->sm_limit ? dv->sm_limit : 100, dv->uuid, cfg->sm_limit[0] ? cfg->sm_limit[0] : 100);
            return 1;
        }
    }
    return 0;
}

static int hold_run_lock(int fd)
{
    struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = GS_REGION_RUN_BYTE, .l_len = 1 };
    return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -1;
}

static void fill_new(struct gs_region *r, const char *name, const struct gs_config *cfg)
{
    snprintf(r->container, sizeof r->container, "%s", name);
    record_limits(&r->run, cfg);
    int same = 1;
    for (int i = 1; i < GS_MAX_DEVICES; i++)
        same &= cfg->mem_limit[i] == cfg->mem_limit[0];
    /* What `gpuslice top` shows before the first process touches a GPU. */
    if (same && cfg->mem_limit[0] >> 20 <= UINT32_MAX)
        r->default_limit_mib = (uint32_t)(cfg->mem_limit[0] >> 20);
}

/* 0: made (*fd holds the run lock); 1: a region is there already; -1. */
static int create_whole(const char *path, const char *name, const struct gs_config *cfg, int *fd)
{
    char tmp[PATH_MAX + 128], err[512];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.new-%d", path, (int)getpid()) >= sizeof tmp)
        return -1;
    unlink(tmp);
    int tfd = -1;
    struct gs_region *r = gs_region_open(tmp, 1, &tfd, err, sizeof err);
    if (!r) {
        fprintf(stderr, "gpuslice run: %s\n", err);
        return -1;
    }
    fill_new(r, name, cfg);
    gs_region_close(r, -1);
    int rc = hold_run_lock(tfd) == 0 ? link(tmp, path) : -1;
    int e = errno;
    unlink(tmp);
    if (rc == 0) {
        *fd = tfd;
        return 0;
    }
    close(tfd);
    if (e == EEXIST)
        return 1;
    fprintf(stderr, "gpuslice run: cannot create region %s: %s\n", path, strerror(e));
    return -1;
}

/* The region open as fd, or NULL with what is wrong with it in err. */
static struct gs_region *read_region(int fd, char *err, size_t errlen)
{
    struct gs_region *copy = malloc(sizeof *copy);
    void *buf = malloc(sizeof *copy);
    ssize_t n = copy && buf ? pread(fd, buf, sizeof *copy, 0) : -1;
    if (n < 0 || gs_region_view_parse(copy, buf, (size_t)n, err, errlen) != 0) {
        if (n < 0)
            snprintf(err, errlen, "cannot be read");
        free(copy);
        copy = NULL;
    }
    free(buf);
    return copy;
}

static int limits_differ(const struct gs_region *r, const struct gs_config *cfg, char *what, size_t len)
{
    struct gs_region_run_limits want;
    record_limits(&want, cfg);
    return r->run.set ? run_limits_differ(&r->run, &want, what, len) : device_limits_differ(r, cfg, what, len);
}

/* The region at path differs from this run: start it afresh when unused. */
static int replace_unused(const char *path, const char *name, const char *what)
{
    char err[512];
    int live = 0;
    if (gs_cli_remove_unused_region(path, &live, err, sizeof err) != 0) {
        struct stat st;
        if (lstat(path, &st) != 0 && errno == ENOENT)
            return RETRY; /* another run removed it first */
        fprintf(stderr, "gpuslice run: %s\n", err);
        return FAILED;
    }
    if (!live)
        return RETRY; /* removed: this run sets the limits */
    fprintf(stderr,
            "gpuslice run: container '%s' is in use by %d process%s with %s.\n"
            "  Run it with the same limits, stop the container's processes to change them, or use another --name.\n",
            name, live, live == 1 ? "" : "es", what);
    return REFUSED;
}

/* The region at path cannot be read as one of this build's (an older
 * gpuslice's, whose layout differs, or a damaged one): start it afresh
 * when no process of any build holds a lock on it, as replace_unused does
 * for other limits; a live process keeps it. */
static int replace_unreadable(const char *path, const char *name, const char *why)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0 && errno == ENOENT)
        return RETRY; /* another run removed it first */
    int held = fd < 0 ? -1 : gs_ofd_any_held(fd);
    if (held == 0 && unlink(path) == 0) {
        close(fd);
        fprintf(stderr, "gpuslice run: region %s %s; no process used it: container '%s' starts afresh\n", path, why,
                name);
        return RETRY;
    }
    if (fd >= 0)
        close(fd);
    fprintf(stderr,
            "gpuslice run: region %s %s%s.\n"
            "  Stop the processes of container '%s' (another build of gpuslice may run them), or use another --name.\n",
            path, why, held > 0 ? ", and a process still uses it" : "", name);
    return FAILED;
}

/* Whether path still names the file fd has open: a remover (gs_cli_remove_unused_region)
 * may have unlinked it between our open and our lock. */
static int still_at(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static int join_existing(const char *path, const char *name, const struct gs_config *cfg, int *fd_out)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    if (fd < 0 && errno == ENOENT)
        return RETRY;
    int locked = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? hold_run_lock(fd) : -2;
    if (locked == -1 && (errno == EAGAIN || errno == EACCES)) {
        close(fd); /* a remover holds it for the moment of its unlink */
        struct timespec pause = { 0, 1000000 };
        nanosleep(&pause, NULL);
        return RETRY;
    }
    if (locked == 0 && !still_at(fd, path)) {
        close(fd);
        return RETRY;
    }
    if (locked != 0) {
        fprintf(stderr, "gpuslice run: region %s cannot be used: %s\n  If no process uses container '%s', remove it.\n",
                path, fd < 0 ? strerror(errno) : "not a regular file that can be locked", name);
        if (fd >= 0)
            close(fd);
        return FAILED;
    }
    char what[300];
    struct gs_region *r = read_region(fd, what, sizeof what);
    int differ = r ? limits_differ(r, cfg, what, sizeof what) : -1;
    free(r);
    if (differ == 0) {
        *fd_out = fd;
        return JOINED;
    }
    close(fd); /* and the run lock with it: the checks below see other processes' locks only */
    return differ < 0 ? replace_unreadable(path, name, what) : replace_unused(path, name, what);
}

int gs_run_attach_region(const char *path, const char *name, const struct gs_config *cfg, int *lock_fd)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        int rc = create_whole(path, name, cfg, lock_fd);
        if (rc <= 0)
            return rc == 0 ? 0 : GS_EXIT_SETUP;
        rc = join_existing(path, name, cfg, lock_fd);
        if (rc == JOINED)
            return 0;
        if (rc != RETRY)
            return rc == REFUSED ? GS_EXIT_USAGE : GS_EXIT_SETUP;
    }
    fprintf(stderr, "gpuslice run: container '%s' keeps being replaced by other runs; try again\n", name);
    return GS_EXIT_SETUP;
}
