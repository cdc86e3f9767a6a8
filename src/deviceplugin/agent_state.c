/* See agent_state.h. */
#include "agent_state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube_client.h"
#include "ledger.h"
#include "ofdlock.h"
#include "placement.h"
#include "region.h"
#include "roster.h"
#include "statedir.h"

#define REMOVE_MAX_DEPTH 32

static int mkdirs(const char *path, mode_t mode)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *s = tmp + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(tmp, mode) != 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return mkdir(tmp, mode) != 0 && errno != EEXIST ? -1 : 0;
}

/* Writes text to dir/name atomically: a temporary file in dir, fsync,
 * rename. Readers see the old file or the new one, never a part. */
static int write_atomic(const char *dir, const char *name, const char *text)
{
    char tmp[1200], dst[1200];
    snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, name);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return -1;
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    int ok = off == len && fchmod(fd, 0644) == 0 && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, dst) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e ? e : EIO;
        return -1;
    }
    return 0;
}

/* Reads a small regular file into buf (never through a symbolic link, never
 * blocking on a FIFO); returns its length, or -1 when it is missing, not a
 * regular file or longer than buf can hold. */
static long read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    ssize_t r = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size < len)
        r = read(fd, buf, len - 1);
    close(fd);
    if (r < 0 || (size_t)r != (size_t)st.st_size)
        return -1;
    buf[r] = '\0';
    return (long)r;
}

/* The directories of an allocation: <state-root>/<key> (the region,
 * read-write in the container) and <state-root>/.limits/<key> (limits.conf,
 * read-only in the container; the tenant cannot edit its own limits). The
 * ids file there guards against a key collision. */
int gs_agent_alloc_dirs(const char *root, char *const *ids, size_t n, struct gs_alloc_dirs *d, char *msg, size_t msglen)
{
    gs_alloc_key(ids, n, d->key, sizeof d->key);
    if (gs_statedir_agent_region_dir(d->state_dir, sizeof d->state_dir, root, d->key) != 0 ||
        gs_statedir_agent_limits_dir(d->limits_dir, sizeof d->limits_dir, root, d->key) != 0) {
        snprintf(msg, msglen, "state root %s is too long", root);
        return GS_ST_INTERNAL;
    }
    if (mkdirs(d->state_dir, 0755) != 0 || mkdirs(d->limits_dir, 0755) != 0) {
        snprintf(msg, msglen, "cannot create state directory %s: %s", d->state_dir, strerror(errno));
        return GS_ST_INTERNAL;
    }
    char want[GS_ASSIGN_MAX_GPUS * (GS_REPLICA_ID_MAX + 1) + 1];
    gs_ids_lines(ids, n, want, sizeof want);
    char have[sizeof want + 8], path[1200];
    snprintf(path, sizeof path, "%s/ids", d->limits_dir);
    long r = read_small(path, have, sizeof have);
    if (r >= 0 && strcmp(have, want) != 0) {
        snprintf(msg, msglen, "state key %s collides with another device set (%s); refusing", d->key, path);
        return GS_ST_INTERNAL;
    }
    if (r < 0 && write_atomic(d->limits_dir, "ids", want) != 0) {
        snprintf(msg, msglen, "cannot write %s: %s", path, strerror(errno));
        return GS_ST_INTERNAL;
    }
    return 0;
}

int gs_agent_state_init(const char *root, char *msg, size_t msglen)
{
    char limits[700];
    if (mkdirs(root, 0700) != 0 || chmod(root, 0700) != 0 ||
        snprintf(limits, sizeof limits, "%s/.limits", root) >= (int)sizeof limits || mkdirs(limits, 0700) != 0 ||
        chmod(limits, 0700) != 0) {
        snprintf(msg, msglen, "cannot prepare state root %s (mode 0700): %s", root, strerror(errno));
        return -1;
    }
    return 0;
}

/* One GPU's ledger file: a regular file of root's, mode 0666, with one
 * link, laid out (gs_ledger_lay_out: no tenant then takes its lock to lay
 * it out, and one that holds that lock for good keeps no one out).
 * Anything else under that name (which only root could have made: the
 * directory is root's 0711 and each container sees only its own files,
 * through file mounts) is removed and the file made afresh; a valid one is
 * kept, with whatever members it has. */
static int ledger_file(int dirfd, const char *name)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        (!S_ISREG(st.st_mode) || st.st_uid != 0 || st.st_nlink != 1)) {
        kube_log(KUBE_LOG_WARN, "device ledger %s: not a plain file of root's; made afresh", name);
        if (unlinkat(dirfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0)
            return -1;
    }
    int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0)
        return -1;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fchown(fd, 0, 0) == 0 && fchmod(fd, 0666) == 0;
    int why = ok && gs_ledger_lay_out(fd) != 0 ? errno : 0;
    if (why == EINVAL) {
        /* another version's layout (an older agent's, its containers gone with it) */
        kube_log(KUBE_LOG_WARN, "device ledger %s: not of this version's layout; made afresh", name);
        ok = ftruncate(fd, 0) == 0;
        why = ok && gs_ledger_lay_out(fd) != 0 ? errno : 0;
    }
    if (why == EAGAIN) /* a tenant holds its lock: the first to open it lays it out */
        kube_log(KUBE_LOG_WARN, "device ledger %s: its lock is held by another process; not laid out", name);
    ok = ok && (why == 0 || why == EAGAIN);
    int e = errno;
    close(fd);
    errno = e;
    return ok ? 0 : -1;
}

/* GPU uuid's roster directory under root, made if missing (root's, 0755:
 * mounted read-only into the GPU's containers), and in it a roster, empty
 * unless a valid one is there. 0, or -1 with errno. */
static int roster_dir(const char *root, const char *uuid, char *dir, size_t len)
{
    char top[700];
    if (gs_statedir_agent_roster_dir(top, sizeof top, root) != 0 || mkdirs(top, 0711) != 0 || chmod(top, 0711) != 0)
        return -1;
    if (snprintf(dir, len, "%s/%s", top, uuid) >= (int)len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (mkdirs(dir, 0755) != 0 || chmod(dir, 0755) != 0)
        return -1;
    char path[900], text[GS_ROSTER_MAX_BYTES + 1], err[200];
    static struct gs_roster r;
    snprintf(path, sizeof path, "%s/" GS_ROSTER_FILE, dir);
    long got = read_small(path, text, sizeof text);
    if (got >= 0 && gs_roster_parse(text, (size_t)got, &r, err, sizeof err) == 0)
        return 0;
    if (got >= 0)
        kube_log(1, "roster %s: %s; made afresh (its containers are re-listed as they start)", path, err);
    return write_atomic(dir, GS_ROSTER_FILE, GS_ROSTER_HEADER);
}

int gs_agent_ledgers_init(const char *root, const char (*uuids)[GS_UUID_MAX], int n, char *msg, size_t msglen)
{
    char dir[700];
    if (gs_statedir_agent_ledger_dir(dir, sizeof dir, root) != 0 || mkdirs(dir, 0711) != 0 || chmod(dir, 0711) != 0) {
        snprintf(msg, msglen, "cannot prepare the device ledger directory under %s: %s", root, strerror(errno));
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        snprintf(msg, msglen, "cannot open %s: %s", dir, strerror(errno));
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char path[900];
        if (gs_statedir_ledger_path(path, sizeof path, "", uuids[i]) != 0 || ledger_file(dfd, path + 1) != 0) {
            snprintf(msg, msglen, "cannot prepare the device ledger of GPU %s in %s: %s", uuids[i], dir,
                     strerror(errno));
            rc = -1;
        } else if (roster_dir(root, uuids[i], path, sizeof path) != 0) {
            snprintf(msg, msglen, "cannot prepare the roster of GPU %s under %s: %s", uuids[i], root, strerror(errno));
            rc = -1;
        }
    }
    close(dfd);
    return rc;
}

/* Removes entry name of directory dirfd and, when it is a directory,
 * everything under it, without following a symbolic link anywhere: each
 * level is opened O_NOFOLLOW|O_DIRECTORY relative to its parent and its
 * entries are unlinked relative to it (unlinkat never follows a link). 0, or -1 when something stayed. */
static int remove_at(int parent, const char *name, int depth)
{
    if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -1;
    if (depth >= REMOVE_MAX_DEPTH)
        return -1;
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    int rc = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (remove_at(dirfd(d), e->d_name, depth + 1) != 0)
            rc = -1;
    }
    closedir(d);
    if (unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
        rc = -1;
    return rc;
}

/* Creates the container's region file in its fresh directory, owned as o
 * says, and initialises it, so that a process of any uid the pod runs as
 * finds a valid region it can open (it cannot create one: the directory
 * is root's). */
static int make_region(const char *dir, const struct gs_region_owner *o, char *msg, size_t msglen)
{
    char path[700], err[512];
    snprintf(path, sizeof path, "%s/region", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(msg, msglen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    int ok = fchown(fd, (uid_t)o->uid, (gid_t)o->gid) == 0 && fchmod(fd, (mode_t)o->mode) == 0;
    int e = errno;
    close(fd);
    if (!ok) {
        snprintf(msg, msglen, "cannot give %s to uid %u gid %u mode %04o: %s", path, o->uid, o->gid, o->mode,
                 strerror(e));
        return -1;
    }
    struct gs_region *r = gs_region_open(path, 1, NULL, err, sizeof err);
    if (!r) {
        snprintf(msg, msglen, "cannot initialise %s: %s", path, err);
        return -1;
    }
    gs_region_close(r, -1);
    return 0;
}

int gs_agent_state_reset(const char *root, const struct gs_alloc_dirs *d, const struct gs_region_owner *o, char *msg,
                         size_t msglen)
{
    static unsigned long seq;
    int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rootfd < 0) {
        snprintf(msg, msglen, "cannot open state root %s: %s", root, strerror(errno));
        return -1;
    }
    /* Move the old tree out of the way first: whatever removing it meets,
     * the new owner's directory is made fresh. */
    char trash[96];
    snprintf(trash, sizeof trash, ".trash-%s-%ld-%lu", d->key, (long)getpid(),
             __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
    int rc = -1;
    if (renameat(rootfd, d->key, rootfd, trash) != 0 && errno != ENOENT) {
        snprintf(msg, msglen, "cannot move %s aside: %s", d->state_dir, strerror(errno));
        goto out;
    }
    if (remove_at(rootfd, trash, 0) != 0)
        kube_log(KUBE_LOG_WARN,
                 "%s/%s: some of a previous owner's state could not be removed (%s); the "
                 "container gets a fresh directory regardless",
                 root, trash, strerror(errno));
    if (mkdirat(rootfd, d->key, 0755) != 0) {
        snprintf(msg, msglen, "cannot create %s: %s", d->state_dir, strerror(errno));
        goto out;
    }
    int dfd = openat(rootfd, d->key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int ok = dfd >= 0 && fchown(dfd, 0, 0) == 0 && fchmod(dfd, 0755) == 0;
    if (dfd >= 0)
        close(dfd);
    if (!ok) {
        snprintf(msg, msglen, "cannot set up %s: %s", d->state_dir, strerror(errno));
        goto out;
    }
    rc = make_region(d->state_dir, o, msg, msglen);
out:
    close(rootfd);
    return rc;
}

/* Whether the pin under limits_dir names container of pod uid. */
static int owner_is(const char *limits_dir, const char *uid, const char *container)
{
    char path[760], want[400], have[400];
    snprintf(want, sizeof want, "%s %s\n", uid, container);
    snprintf(path, sizeof path, "%s/owner", limits_dir);
    return read_small(path, have, sizeof have) > 0 && strcmp(have, want) == 0;
}

int gs_agent_pin_check(const struct gs_alloc_dirs *d, const char *uid, const char *container, const char *assignment,
                       int *same_owner)
{
    char path[700];
    *same_owner = owner_is(d->limits_dir, uid, container);
    if (!*same_owner)
        return 0;
    snprintf(path, sizeof path, "%s/assignment", d->limits_dir);
    char *buf = malloc(GS_PIN_MAX);
    int rc = -1;
    if (buf && read_small(path, buf, GS_PIN_MAX) >= 0 && strcmp(buf, assignment) == 0)
        rc = 0;
    free(buf);
    return rc;
}

int gs_agent_pinned_to(const char *root, char *const *ids, size_t n, const char *uid, const char *container)
{
    char key[32], dir[700];
    gs_alloc_key(ids, n, key, sizeof key);
    return gs_statedir_agent_limits_dir(dir, sizeof dir, root, key) == 0 && owner_is(dir, uid, container);
}

int gs_agent_write_limits(const struct gs_alloc_dirs *d, const char *text, const char *uid, const char *container,
                          const char *assignment)
{
    char owner[400];
    snprintf(owner, sizeof owner, "%s %s\n", uid, container);
    if (write_atomic(d->limits_dir, "limits.conf", text) != 0 || write_atomic(d->limits_dir, "pod_uid", uid) != 0 ||
        write_atomic(d->limits_dir, "assignment", assignment) != 0)
        return -1;
    return write_atomic(d->limits_dir, "owner", owner); /* last: the pin holds once whole */
}

/* The id of allocation key's region under root (gs_ledger_container_id);
 * 0 when it has none. */
static uint64_t region_id(const char *root, const char *key)
{
    char path[700];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s/region", root, key) >= (int)sizeof path || lstat(path, &st) != 0 ||
        !S_ISREG(st.st_mode))
        return 0;
    return gs_ledger_container_id((uint64_t)st.st_dev, (uint64_t)st.st_ino);
}

/* Whether a process has allocation key's region open: each holds a lock on
 * it (its slot). Kept when that cannot be told. */
static int region_in_use(const char *root, const char *key)
{
    char path[700];
    if (snprintf(path, sizeof path, "%s/%s/region", root, key) >= (int)sizeof path)
        return 1;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno != ENOENT;
    int held = gs_ofd_any_held(fd);
    close(fd);
    return held != 0;
}

/* Drops from r the entries whose region no process has open: the
 * containers of pods long gone, whose state stays under the root (a device
 * plugin learns of no container's end). Only when the roster is full: an
 * idle container dropped loses its place in its GPU's shares until it
 * starts again. */
static void drop_idle(const char *root, struct gs_roster *r)
{
    unsigned n = 0;
    for (unsigned i = 0; i < r->n; i++)
        if (region_in_use(root, r->e[i].key))
            r->e[n++] = r->e[i];
    r->n = n;
}

int gs_agent_roster_put(const char *root, const char *uuid, const char *key, const struct gs_roster_entry *limits,
                        char *msg, size_t msglen)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static struct gs_roster r, keep;
    char dir[900], path[1000], text[GS_ROSTER_MAX_BYTES + 1], err[200];
    uint64_t id = region_id(root, key);
    if (id == 0) {
        snprintf(msg, msglen, "allocation %s has no region under %s", key, root);
        return -1;
    }
    pthread_mutex_lock(&lock);
    int rc = roster_dir(root, uuid, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/" GS_ROSTER_FILE, dir);
    long got = rc == 0 ? read_small(path, text, sizeof text) : -1;
    if (rc == 0 && (got < 0 || gs_roster_parse(text, (size_t)got, &r, err, sizeof err) != 0))
        r.n = 0; /* roster_dir just made it valid: someone else wrote it since */
    /* The entries whose region is still the one they name, but this key's
     * earlier one: a region removed since freed its inode, which another
     * file may now have. */
    keep.n = 0;
    for (unsigned i = 0; rc == 0 && i < r.n; i++)
        if (strcmp(r.e[i].key, key) != 0 && r.e[i].container != id && region_id(root, r.e[i].key) == r.e[i].container)
            keep.e[keep.n++] = r.e[i];
    if (rc == 0 && keep.n >= GS_ROSTER_MAX)
        drop_idle(root, &keep);
    if (rc == 0 && keep.n < GS_ROSTER_MAX) {
        keep.e[keep.n] = *limits;
        keep.e[keep.n].container = id;
        snprintf(keep.e[keep.n++].key, sizeof keep.e[0].key, "%s", key);
        rc = gs_roster_format(&keep, text, sizeof text) == 0 ? write_atomic(dir, GS_ROSTER_FILE, text) : -1;
    } else if (rc == 0) {
        errno = ENOSPC;
        rc = -1;
    }
    if (rc != 0)
        snprintf(msg, msglen, "cannot write the roster of GPU %s (%s): %s", uuid, path, strerror(errno));
    pthread_mutex_unlock(&lock);
    return rc;
}

int gs_agent_write_atomic(const char *dir, const char *name, const char *text)
{
    return write_atomic(dir, name, text);
}

int gs_agent_alloc_remove(const char *root, char *const *ids, size_t n, char *msg, size_t msglen)
{
    struct gs_alloc_dirs d;
    gs_alloc_key(ids, n, d.key, sizeof d.key);
    char limits[700], want[GS_ASSIGN_MAX_GPUS * (GS_REPLICA_ID_MAX + 1) + 1], have[sizeof want + 8], path[800];
    if (gs_statedir_agent_limits_dir(d.limits_dir, sizeof d.limits_dir, root, d.key) != 0 ||
        snprintf(limits, sizeof limits, "%s/.limits", root) >= (int)sizeof limits) {
        snprintf(msg, msglen, "state root %s is too long", root);
        return GS_ST_INTERNAL;
    }
    gs_ids_lines(ids, n, want, sizeof want);
    snprintf(path, sizeof path, "%s/ids", d.limits_dir);
    if (read_small(path, have, sizeof have) >= 0 && strcmp(have, want) != 0) {
        snprintf(msg, msglen, "state key %s belongs to another device set (%s); not removing it", d.key, path);
        return GS_ST_INTERNAL;
    }
    int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int limfd = open(limits, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc = 0;
    if (rootfd < 0 || limfd < 0 || remove_at(rootfd, d.key, 0) != 0 || remove_at(limfd, d.key, 0) != 0) {
        snprintf(msg, msglen, "cannot remove the state of %s under %s: %s", d.key, root, strerror(errno));
        rc = GS_ST_INTERNAL;
    }
    if (rootfd >= 0)
        close(rootfd);
    if (limfd >= 0)
        close(limfd);
    return rc;
}
