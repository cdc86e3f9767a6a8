#define _GNU_SOURCE
#include "region_view.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gs_region_view_parse(struct gs_region *out, const void *buf, size_t len, char *err, size_t errlen)
{
    if (len != sizeof *out) {
        snprintf(err, errlen, "has %zu bytes, a region has %zu", len, sizeof *out);
        return -1;
    }
    memcpy(out, buf, sizeof *out);
    return gs_region_check(out, err, errlen);
}

/* Reads exactly len bytes; -1 when the file ends early or has more. */
static int read_exact(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    char extra;
    return read(fd, &extra, 1) == 0 ? 0 : -1;
}

struct gs_region_view *gs_region_view_open(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open region %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != sizeof(struct gs_region)) {
        snprintf(err, errlen, "%s is not a region of this gpuslice version (not a regular file of %zu bytes)", path,
                 sizeof(struct gs_region));
        close(fd);
        return NULL;
    }
    struct gs_region_view *v = malloc(sizeof *v);
    if (!v) {
        snprintf(err, errlen, "out of memory reading %s", path);
        close(fd);
        return NULL;
    }
    v->fd = fd;
    char why[200];
    if (read_exact(fd, &v->r, sizeof v->r) != 0) {
        snprintf(err, errlen, "region %s changed size while it was read", path);
    } else if (gs_region_check(&v->r, why, sizeof why) != 0) {
        snprintf(err, errlen, "region %s %s", path, why);
    } else {
        return v;
    }
    gs_region_view_free(v);
    return NULL;
}

void gs_region_view_free(struct gs_region_view *v)
{
    if (!v)
        return;
    if (v->fd >= 0)
        close(v->fd);
    free(v);
}

int gs_region_view_alive(const struct gs_region_view *v, int slot)
{
    return slot >= 0 && slot < GS_REGION_MAX_PROCS && v->r.proc[slot].pid != 0 && gs_region_slot_alive(v->fd, slot);
}

uint64_t gs_region_view_used(const struct gs_region_view *v, int dev, int *live_procs)
{
    uint64_t used = 0;
    int live = 0;
    for (int i = 0; i < GS_REGION_MAX_PROCS; i++) {
        if (!gs_region_view_alive(v, i))
            continue;
        live++;
        if (dev >= 0 && dev < GS_REGION_MAX_DEVICES)
            used += v->r.proc[i].mem_used[dev];
    }
    if (live_procs)
        *live_procs = live;
    return used;
}
