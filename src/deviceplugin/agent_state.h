/*
 * The node agent's state directories on the host (docs/device-plugin.md):
 * per allocation key, <root>/<key> (mounted read-write into the container:
 * the region) and <root>/.limits/<key> (mounted read-only: limits.conf,
 * and the agent's own records: ids, pod_uid, owner, assignment); per GPU,
 * <root>/.ledger/<uuid>.ledger and <root>/.roster/<uuid>/roster (roster.h,
 * the directory mounted read-only). All file I/O of the agent's handlers lives
 * here.
 */
#ifndef GPUSLICE_DP_AGENT_STATE_H
#define GPUSLICE_DP_AGENT_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "placement.h"
#include "roster.h"

#define GS_PIN_MAX 16384 /* longest assignment text the agent pins */

struct gs_alloc_dirs {
    char key[32];
    char state_dir[600];
    char limits_dir[620];
};

/* Names and creates the directories of device set ids under root and
 * guards against a key collision (the ids file). Returns 0 or a GS_ST_*
 * code with msg. */
int gs_agent_alloc_dirs(const char *root, char *const *ids, size_t n, struct gs_alloc_dirs *d, char *msg,
                        size_t msglen);

/* At startup: the state root and its .limits, mode 0700 (only root enters
 * them; containers see their own directories through their mounts). */
int gs_agent_state_init(const char *root, char *msg, size_t msglen);

/* At startup, for the node's GPUs: <root>/.ledger (root's, 0711) and in it
 * <uuid>.ledger for each (root's, 0666; kept when valid), which Allocate
 * mounts into each container of that GPU; <root>/.roster/<uuid>/ (0755)
 * with a roster (kept when valid), mounted read-only likewise. 0, or -1
 * with msg. */
int gs_agent_ledgers_init(const char *root, const char (*uuids)[GS_UUID_MAX], int n, char *msg, size_t msglen);

/* Whether container of pod uid is the recorded owner of these devices
 * (*same_owner: a container restart) and, if so, whether assignment is the
 * one accepted at its first start. 0, or -1 when it changed since. */
int gs_agent_pin_check(const struct gs_alloc_dirs *d, const char *uid, const char *container, const char *assignment,
                       int *same_owner);

/* Whether the agent's own pin of device set ids under root names container
 * of pod uid: it started there before (a container restart). Read only. */
int gs_agent_pinned_to(const char *root, char *const *ids, size_t n, const char *uid, const char *container);

/* Before a container starts, first or again: recreates its state directory
 * whole (the old tree is moved aside and removed without following any
 * symbolic link; nothing outside it is touched) and creates its region,
 * owned as o says. 0, or -1 with msg. */
int gs_agent_state_reset(const char *root, const struct gs_alloc_dirs *d, const struct gs_region_owner *o, char *msg,
                         size_t msglen);

/* Writes the container's limits.conf, pod_uid and the pin (the accepted
 * assignment and its owner). 0, or -1 with errno. */
int gs_agent_write_limits(const struct gs_alloc_dirs *d, const char *text, const char *uid, const char *container,
                          const char *assignment);

/* Lists allocation key's container (its region, made by
 * gs_agent_state_reset) in the roster of GPU uuid with the weight and mode
 * of limits, replacing the key's earlier entry and dropping those whose
 * region is gone. 0, or -1 with msg. */
int gs_agent_roster_put(const char *root, const char *uuid, const char *key, const struct gs_roster_entry *limits,
                        char *msg, size_t msglen);

/* Writes text to dir/name atomically (a temporary file in dir, fsync,
 * rename; mode 0644): readers see the old file or the new one. 0, or -1
 * with errno. */
int gs_agent_write_atomic(const char *dir, const char *name, const char *text);

/* Removes the directories of device set ids (its state directory and its
 * limits directory), never following a symbolic link; nothing there is
 * fine. Refuses (GS_ST_INTERNAL with msg) when the key's ids file names
 * another set. 0 otherwise. */
int gs_agent_alloc_remove(const char *root, char *const *ids, size_t n, char *msg, size_t msglen);

#endif
