/* A GPU's roster under churn (src/deviceplugin/agent_state.c): a device
 * plugin learns of no container's end, so the state of pods long gone stays
 * under the root. Their roster entries must not fill the roster: past 128
 * device sets that had used a GPU, no new container could start on it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_state.h"
#include "check.h"
#include "ofdlock.h"

#define UUID "GPU-11111111-2222-3333-4444-555555555555"

/* Starts the container of replica k as PreStartContainer does: its
 * directories, its region, its roster entry. */
static int start(const char *root, int k, struct gs_alloc_dirs *d, char *msg, size_t len)
{
    char id[96];
    snprintf(id, sizeof id, UUID "::%d", k);
    char *ids[1] = { id };
    struct gs_region_owner o = { .uid = 0, .gid = 0, .mode = 0600 };
    struct gs_roster_entry e = { .weight = 100 };
    if (gs_agent_alloc_dirs(root, ids, 1, d, msg, len) != 0 || gs_agent_state_reset(root, d, &o, msg, len) != 0)
        return -1;
    return gs_agent_roster_put(root, UUID, d->key, &e, msg, len);
}

/* How many lines of the roster name key. */
static int listed(const char *root, const char *key)
{
    char path[600], line[256];
    snprintf(path, sizeof path, "%s/.roster/" UUID "/roster", root);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, key) != NULL;
    if (f)
        fclose(f);
    return n;
}

int main(void)
{
    char root[] = "/tmp/gpuslice-roster-churn-XXXXXX", msg[1024];
    CHECK(mkdtemp(root) != NULL);
    const char uuids[1][GS_UUID_MAX] = { UUID };
    CHECK(gs_agent_state_init(root, msg, sizeof msg) == 0);
    CHECK(gs_agent_ledgers_init(root, uuids, 1, msg, sizeof msg) == 0);
    /* replica 0's container runs: a process holds a lock on its region */
    struct gs_alloc_dirs live;
    CHECK(start(root, 0, &live, msg, sizeof msg) == 0);
    char region[700];
    snprintf(region, sizeof region, "%s/%s/region", root, live.key);
    int fd = open(region, O_RDWR | O_CLOEXEC);
    CHECK(fd >= 0 && gs_ofd_lock_byte(fd, 0) == 0);
    /* 200 more come and go on the same GPU */
    int failed_at = -1;
    for (int k = 1; k <= 200 && failed_at < 0; k++) {
        struct gs_alloc_dirs d;
        if (start(root, k, &d, msg, sizeof msg) != 0) {
            failed_at = k;
            fprintf(stderr, "container %d: %s\n", k, msg);
        }
    }
    CHECK(failed_at < 0);
    CHECK(listed(root, live.key) == 1); /* the running one keeps its place */
    close(fd);
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", root);
    CHECK(system(rm) == 0);
    return check_result("roster churn");
}
