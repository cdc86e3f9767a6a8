/* gs_client's compute commands (gs_client_compute.c). */
#ifndef GS_CLIENT_COMPUTE_H
#define GS_CLIENT_COMPUTE_H
#include "../../src/abi/cuda_abi.h"

/* Looks up an entry point the way gs_client was told to (base name for
 * cuGetProcAddress, versioned name for dlsym; base NULL: dlsym only). */
typedef void *(*gs_entry_fn)(const char *base, const char *vname, int per_thread);
/* Runs argv if it is a compute command: sets *rc, may print key=value
 * fields, returns 1; else returns 0. */
int gs_client_compute(int argc, char **argv, CUresult *rc, gs_entry_fn entry);
#endif
