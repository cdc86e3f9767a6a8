/* Removing a container's region once nothing uses it: shared by `run`
 * (a private run's state goes with its last process), `rm`, and a named run
 * that starts a container afresh with new limits. */
#include "cli.h"
#include "ofdlock.h"
#include "region.h"
#include "statedir.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int gs_cli_remove_unused_region(const char *path, int *live_out, char *err, size_t errlen)
{
    int fd = -1;
    struct gs_region *r = gs_region_open(path, 0, &fd, err, errlen);
    if (!r)
        return -1;
    int live = 0, rc = 0;
    if (gs_region_lock(r) != 0) {
        snprintf(err, errlen, "%s: its lock cannot be taken", path);
        rc = -1;
    } else {
        gs_region_reclaim_locked(r, fd, -1);
        for (int i = 0; i < GS_REGION_MAX_PROCS; i++)
            live += r->proc[i].pid != 0;
        /* A gpuslice run whose command has not taken a slot yet holds the
         * run byte shared; held exclusively here until the unlink, so that
         * no run joins the file between the test and the unlink (a run
         * that opened it before re-checks, once locked, that the path is
         * still the file it locked) */
        if (!live && gs_ofd_lock_byte(fd, GS_REGION_RUN_BYTE) != 0)
            live = 1;
        if (!live && unlink(path) != 0) {
            snprintf(err, errlen, "cannot remove %s: %s", path, strerror(errno));
            rc = -1;
        }
        gs_region_unlock(r);
    }
    gs_region_close(r, fd);
    if (live_out)
        *live_out = live;
    return rc;
}

/* A private run's name: run-<digits>. */
static int private_name(const char *key)
{
    if (strncmp(key, "run-", 4) != 0 || !key[4])
        return 0;
    for (const char *c = key + 4; *c; c++)
        if (!isdigit((unsigned char)*c))
            return 0;
    return 1;
}

static int sweep_one(const char *path, const char *key, void *arg)
{
    (void)arg;
    char err[512];
    if (private_name(key) && gs_cli_remove_unused_region(path, NULL, err, sizeof err) != 0)
        fprintf(stderr, "gpuslice run: note: a stale private region stays: %s\n", err);
    return 0;
}

void gs_cli_sweep_private_regions(const char *dir)
{
    (void)gs_statedir_each_region(dir, sweep_one, NULL);
}
