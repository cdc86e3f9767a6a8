/* gs_client's context commands (gs_client_contexts.c). */
#ifndef GS_CLIENT_CONTEXTS_H
#define GS_CLIENT_CONTEXTS_H
#include "gs_client_compute.h"

/* Runs argv if it is a context command: sets *rc, may print key=value
 * fields, returns 1; else returns 0. */
int gs_client_contexts(int argc, char **argv, CUresult *rc, gs_entry_fn entry);
/* Runs argv if it is the gone command (gs_client_gone.c): as above. */
int gs_client_gone(int argc, char **argv, CUresult *rc, gs_entry_fn entry);
#endif
