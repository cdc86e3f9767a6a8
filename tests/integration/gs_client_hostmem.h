/* gs_client's tenant of host memory the device reaches (gs_client_hostmem.c). */
#ifndef GS_CLIENT_HOSTMEM_H
#define GS_CLIENT_HOSTMEM_H
#include "gs_client_compute.h"

/* Runs argv if it is a host-memory command: sets *rc, may print key=value
 * fields, returns 1; else returns 0. */
int gs_client_hostmem(int argc, char **argv, CUresult *rc, gs_entry_fn entry);
#endif
