/* gs_client's commands for the legacy, graph-memory and VMM-import paths
 * (gs_client_paths.c). */
#ifndef GS_CLIENT_PATHS_H
#define GS_CLIENT_PATHS_H
#include "gs_client_compute.h"

/* Runs argv if it is one of these commands: sets *rc, may print key=value
 * fields, returns 1; else returns 0. */
int gs_client_paths(int argc, char **argv, CUresult *rc, gs_entry_fn entry);
#endif
