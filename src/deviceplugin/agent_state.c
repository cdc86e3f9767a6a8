/* See agent_state.h. */
#include "agent_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube_client.h"
#include "placement.h"
#include "statedir.h"

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

/* Reads a small file into buf; returns its length or -1. */
static long read_small(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t r = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[r] = '\0';
    return (long)r;
}

/* The directories of an allocation: <state-root>/<key> (the region,
 * read-write in the container) and <state-root>/.limits/<key> (limits.conf,
 * read-only in the container; the tenant cannot edit its own limits). The
 * ids file there guards against a key collision. */
int gs_agent_alloc_dirs(const char *root, char *const *ids, size_t n, struct gs_alloc_dirs *d,
                        char *msg, size_t msglen)
{
    gs_alloc_key(ids, n, d->key, sizeof d->key);
    if (gs_statedir_agent_region_dir(d->state_dir, sizeof d->state_dir, root, d->key) != 0 ||
        gs_statedir_agent_limits_dir(d->limits_dir, sizeof d->limits_dir, root, d->key) != 0) {
        snprintf(msg, msglen, "state root %s is too long", root);
        return GS_ST_INTERNAL;
    }
    if (mkdirs(d->state_dir, 0755) != 0 || mkdirs(d->limits_dir, 0755) != 0) {
        snprintf(msg, msglen, "cannot create state directory %s: %s", d->state_dir,
                 strerror(errno));
        return GS_ST_INTERNAL;
    }
    char want[GS_ASSIGN_MAX_GPUS * (GS_REPLICA_ID_MAX + 1) + 1];
    gs_ids_lines(ids, n, want, sizeof want);
    char have[sizeof want + 8], path[1200];
    snprintf(path, sizeof path, "%s/ids", d->limits_dir);
    long r = read_small(path, have, sizeof have);
    if (r >= 0 && strcmp(have, want) != 0) {
        snprintf(msg, msglen, "state key %s collides with another device set (%s); refusing",
                 d->key, path);
        return GS_ST_INTERNAL;
    }
    if (r < 0 && write_atomic(d->limits_dir, "ids", want) != 0) {
        snprintf(msg, msglen, "cannot write %s: %s", path, strerror(errno));
        return GS_ST_INTERNAL;
    }
    return 0;
}

/* A new owner of these devices: the previous owner's region (its
 * processes are gone, kubelet freed the devices) is not ours to keep. */
void gs_agent_owner_reset(const struct gs_alloc_dirs *d, const char *uid, const char *what)
{
    char owner[128] = "", path[1300];
    snprintf(path, sizeof path, "%s/pod_uid", d->limits_dir);
    if (read_small(path, owner, sizeof owner) > 0 && strcmp(owner, uid) != 0) {
        char region[700];
        snprintf(region, sizeof region, "%s/region", d->state_dir);
        if (unlink(region) == 0)
            kube_log(2, "%s: devices change owner (%s -> %s); removed the old region", what,
                     owner, uid);
    }
}

int gs_agent_write_limits(const struct gs_alloc_dirs *d, const char *text, const char *uid)
{
    if (write_atomic(d->limits_dir, "limits.conf", text) != 0)
        return -1;
    return write_atomic(d->limits_dir, "pod_uid", uid);
}
