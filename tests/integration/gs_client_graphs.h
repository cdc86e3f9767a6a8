/* gs_client's CUDA-graph tenant (gs_client_graphs.c). */
#ifndef GS_CLIENT_GRAPHS_H
#define GS_CLIENT_GRAPHS_H
#include "gs_client_compute.h"

/* Runs argv if it is a graph command: sets *rc, may print key=value
 * fields, returns 1; else returns 0. */
int gs_client_graphs(int argc, char **argv, CUresult *rc, gs_entry_fn entry);
#endif
