/* A run's container region: created whole with the run's limits recorded,
 * or joined when its limits are the same (src/cli/run_region.c). */
#ifndef GPUSLICE_CLI_RUN_REGION_H
#define GPUSLICE_CLI_RUN_REGION_H

#include "config.h"
#include "region.h"

/* Creates or joins the region at path for container name. Returns 0 with
 * *lock_fd holding the run lock (close it to let go), or the exit status
 * after printing why (GS_EXIT_USAGE: in use with other limits). */
int gs_run_attach_region(const char *path, const char *name, const struct gs_config *cfg, int *lock_fd);

#endif
