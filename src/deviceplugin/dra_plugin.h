/*
 * The node agent's DRA mode (gpuslice-node-agent --dra; docs/dra.md): a DRA
 * kubelet plugin. It serves kubelet's plugin-registration API v1 on
 * <registry-dir>/<driver>-reg.sock (kubelet's plugin watcher finds it
 * there) and the DRA plugin API v1 on <plugins-dir>/<driver>/dra.sock, and
 * publishes the node's ResourceSlice (dra_objects.h) through the API
 * server, again whenever a GPU's health changes. NodePrepareResources reads
 * each claim's allocation (dra_claim.h), lays out the same state as the
 * device-plugin path (agent_state.h: region, limits.conf, ledgers,
 * rosters), writes the claim's CDI spec and returns its CDI device IDs;
 * NodeUnprepareResources removes them. Both are idempotent, and a restarted
 * agent finds everything on disk.
 */
#ifndef GPUSLICE_DP_DRA_PLUGIN_H
#define GPUSLICE_DP_DRA_PLUGIN_H

#include <pthread.h>

#include "plugin.h"

struct gs_dra {
    struct gs_plugin *p;    /* inventory, API client, state root, interposer paths */
    char driver[64];        /* the DRA driver name (DNS subdomain) */
    char registry_dir[256]; /* kubelet's plugins_registry directory */
    char plugins_dir[256];  /* kubelet's plugins directory; ours is <it>/<driver> */
    char cdi_dir[256];      /* where the runtime reads CDI specs */
    pthread_mutex_t lock;   /* one prepare or unprepare at a time */
};

/* Checks the names and paths (0, or -1 with err). */
int gs_dra_check(const struct gs_dra *d, char *err, size_t errlen);

/* Serves and publishes until *stop. 0 on a clean stop. */
int gs_dra_run(struct gs_dra *d, volatile int *stop);

#endif
