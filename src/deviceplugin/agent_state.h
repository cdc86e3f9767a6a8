/*
 * The node agent's state directories on the host (docs/device-plugin.md):
 * per allocation key, <root>/<key> (mounted read-write into the container:
 * the region) and <root>/.limits/<key> (mounted read-only: limits.conf,
 * and the agent's own records: ids, pod_uid). All file I/O of the agent's
 * handlers lives here.
 */
#ifndef GPUSLICE_DP_AGENT_STATE_H
#define GPUSLICE_DP_AGENT_STATE_H

#include <stddef.h>

struct gs_alloc_dirs {
    char key[32];
    char state_dir[600];
    char limits_dir[620];
};

/* Names and creates the directories of device set ids under root and
 * guards against a key collision (the ids file). Returns 0 or a GS_ST_*
 * code with msg. */
int gs_agent_alloc_dirs(const char *root, char *const *ids, size_t n, struct gs_alloc_dirs *d,
                        char *msg, size_t msglen);

/* Before a container of pod uid starts on these devices: when they were
 * another pod's, the previous owner's state is not ours to keep. */
void gs_agent_owner_reset(const struct gs_alloc_dirs *d, const char *uid, const char *what);

/* Writes the container's limits.conf and pod_uid. 0, or -1 with errno. */
int gs_agent_write_limits(const struct gs_alloc_dirs *d, const char *text, const char *uid);

#endif
