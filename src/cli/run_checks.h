/* What `gpuslice run` checks before it starts the command, so that the
 * command never runs with limits other than those the user typed. Each
 * returns 0, or -1 after printing what is wrong on stderr. */
#ifndef GPUSLICE_CLI_RUN_CHECKS_H
#define GPUSLICE_CLI_RUN_CHECKS_H

#include <stdint.h>

#include "config.h"

/* Refuses limit variables inherited from the caller's environment
 * (GPUSLICE_MEMORY_LIMIT_0, CUDA_DEVICE_MEMORY_LIMIT, GPUSLICE_MANAGED, ...),
 * which would beat the options, and GPUSLICE_CTX_OVERHEAD=0. */
int gs_run_refuse_inherited(char *const *envp);

/* Refuses lib unless it loads (RTLD_NOW) and exports the interposer's marker,
 * and its path can be an LD_PRELOAD entry (no ':' or blank). */
int gs_run_verify_lib(const char *lib);

/* Puts lib first in LD_PRELOAD unless an entry is exactly lib. */
int gs_run_prepend_preload(const char *lib);

/* What the user asked for, to be checked against the GPUs that exist. */
struct gs_run_request {
    const char *device_flag;  /* --device as typed, or NULL */
    const char *memory_flag;  /* --memory as typed, or NULL */
    unsigned per_device_mask; /* indexes given as INDEX=SIZE */
    uint64_t mem_limit[GS_MAX_DEVICES];
    const char *nvml; /* NVML to count GPUs through (the simulated one), or NULL */
};

/* Every --device entry names a GPU of this host, every INDEX= a GPU the
 * command will see, and no limit is above the memory of its GPU. GPUs are
 * counted through NVML; where NVML cannot be read the run is refused. */
int gs_run_check_gpus(const struct gs_run_request *req);

/* The line that points a user with no NVIDIA driver at --simulated-gpu. */
void gs_run_hint_simulated(void);

/* --simulated-gpu SIZE: COMMAND runs on gpuslice's simulated driver (a GPU of
 * SIZE whose state is kept in state_dir, shared by every run that names the
 * same SIZE there) instead of a real one; req->nvml is pointed at it. */
int gs_run_use_simulated(const char *size, const char *state_dir, struct gs_run_request *req);

/* Notes on stderr when COMMAND would find no CUDA driver at all. */
void gs_run_note_no_driver(void);

#endif
