/*
 * What a container of the node agent gets, whichever API asks: the
 * environment and the mounts that put it under the interposer with its
 * limits (docs/device-plugin.md, "The Allocate answer"). The device plugin
 * answers them in Allocate; the DRA driver writes them into a CDI spec
 * (docs/dra.md). One list, so that the two paths cannot drift apart.
 * Pure: names paths, touches no file.
 */
#ifndef GPUSLICE_DP_CONTAINER_EDITS_H
#define GPUSLICE_DP_CONTAINER_EDITS_H

#include <stddef.h>

#include "agent_state.h"
#include "annotation.h"

#define GS_EDITS_MAX_ENV 8
#define GS_EDITS_MAX_MOUNTS (4 + 2 * GS_ASSIGN_MAX_GPUS)

struct gs_edit_mount {
    char host[800];
    char cont[200];
    int ro;
};

struct gs_container_edits {
    int nenv;
    char env[GS_EDITS_MAX_ENV][2][GS_ASSIGN_MAX_GPUS * GS_UUID_MAX]; /* key, value */
    int nmounts;
    struct gs_edit_mount m[GS_EDITS_MAX_MOUNTS];
};

struct gs_edits_in {
    const char *state_root;    /* the agent's --state-root */
    const char *lib_host;      /* the interposer on the host ... */
    const char *lib_container; /* ... and in the container */
    const char *preload_host;  /* the file mounted as /etc/ld.so.preload */
    const struct gs_alloc_dirs *dirs;
    const char *const *uuids; /* the container's GPUs, in NVML order */
    size_t n;
    int visible_env; /* name the GPUs in NVIDIA_VISIBLE_DEVICES (else CDI names them) */
};

/* Fills out. 0, or GS_ST_INTERNAL with msg when a path is too long. */
int gs_container_edits(const struct gs_edits_in *in, struct gs_container_edits *out, char *msg, size_t msglen);

#endif
