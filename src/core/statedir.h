/*
 * Where gpuslice keeps its state: the one owner of every region, ledger and
 * limits path, and of how regions are listed.
 *
 * Two layouts share one state directory tree:
 * - flat (`gpuslice run`): <dir>/<name>.region for each container and
 *   <dir>/<GPU uuid>.ledger for each GPU;
 * - per container (the node agent): <root>/<key>/region, mounted into the
 *   container at GS_STATEDIR_CONTAINER; <root>/.limits/<key>/limits.conf,
 *   mounted read-only at GS_STATEDIR_CONTAINER_LIMITS; <root>/.ledger/<GPU
 *   uuid>.ledger, one per GPU, each mounted into the containers of that GPU
 *   at GS_STATEDIR_CONTAINER_LEDGER/<uuid>.ledger; <root>/.roster/<GPU
 *   uuid>/roster (roster.h), each GPU's directory mounted read-only into the
 *   containers of that GPU at GS_STATEDIR_CONTAINER_ROSTER/<uuid>.
 * Otherwise a GPU's ledger lives next to the region that uses it.
 */
#ifndef GPUSLICE_STATEDIR_H
#define GPUSLICE_STATEDIR_H

#include <stddef.h>

#define GS_STATEDIR_CONTAINER "/var/run/gpuslice"
#define GS_STATEDIR_CONTAINER_REGION GS_STATEDIR_CONTAINER "/region"
#define GS_STATEDIR_CONTAINER_LIMITS "/etc/gpuslice"
#define GS_STATEDIR_CONTAINER_CONFIG GS_STATEDIR_CONTAINER_LIMITS "/limits.conf"
#define GS_STATEDIR_CONTAINER_LEDGER "/var/run/gpuslice-ledger"
#define GS_STATEDIR_CONTAINER_ROSTER "/var/run/gpuslice-roster"

/* A CLI user's state directory: $GPUSLICE_STATE_DIR, else /run/gpuslice when
 * writable (root), else /tmp/gpuslice-<uid>. */
void gs_statedir_default(char *buf, size_t len);

/* The region a process uses when none is configured. */
void gs_statedir_fallback_region(char *buf, size_t len);

/* Each returns 0, or -1 when the result would not fit in buf. */
int gs_statedir_region_path(char *buf, size_t len, const char *dir, const char *name);
int gs_statedir_ledger_path(char *buf, size_t len, const char *ledger_dir, const char *uuid);
/* A GPU's roster: <roster_dir>/<uuid>/roster (a directory per GPU, so that
 * the agent can replace the file while it is mounted). */
int gs_statedir_roster_path(char *buf, size_t len, const char *roster_dir, const char *uuid);
/* The directory holding path ("/" for a file at the root). */
int gs_statedir_parent(char *buf, size_t len, const char *path);

/* The node agent's directories for allocation key under root. */
int gs_statedir_agent_region_dir(char *buf, size_t len, const char *root, const char *key);
int gs_statedir_agent_limits_dir(char *buf, size_t len, const char *root, const char *key);
/* The node agent's per-GPU device ledgers under root. */
int gs_statedir_agent_ledger_dir(char *buf, size_t len, const char *root);
/* ... and the directory of their per-GPU roster directories. */
int gs_statedir_agent_roster_dir(char *buf, size_t len, const char *root);

/* Calls fn(path, key, arg) for every region under dir, in both layouts
 * (key: the container's name or allocation key). Entries that are not
 * regular files, symbolic links included, are skipped; so are names that
 * begin with a dot. Stops early when fn returns non-zero and returns that;
 * -1 when dir cannot be opened (errno set), else 0. */
typedef int (*gs_statedir_region_fn)(const char *path, const char *key, void *arg);
int gs_statedir_each_region(const char *dir, gs_statedir_region_fn fn, void *arg);

#endif
