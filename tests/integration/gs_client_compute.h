/* gs_client's compute commands (gs_client_compute.c). */
#ifndef GS_CLIENT_COMPUTE_H
#define GS_CLIENT_COMPUTE_H
#include "../../src/abi/cuda_abi.h"

/* Looks up an entry point the way gs_client was told to (base name for
 * cuGetProcAddress, versioned name for dlsym; base NULL: dlsym only). */
typedef void *(*gs_entry_fn)(const char *base, const char *vname, int per_thread);
/* cuLaunchKernel's signature. */
typedef CUresult (*gs_launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 CUstream, void **, void **);

/* What a stream capture into an executable graph calls, looked up once
 * through entry (gs_capture_api_of: 0 when all were found). */
struct gs_capture_api {
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*begin)(CUstream, int);
    CUresult (*end)(CUstream, void **);
    CUresult (*instantiate)(CUgraphExec *, void *, unsigned long long);
    gs_launch_fn launch;
};
int gs_capture_api_of(gs_entry_fn entry, struct gs_capture_api *api);

/* What loading a module and running its kernels calls, looked up once
 * through entry (gs_module_api_of: 0 when all were found). */
struct gs_module_api {
    CUresult (*load)(CUmodule *, const void *);
    CUresult (*get)(CUfunction *, CUmodule, const char *);
    gs_launch_fn launch;
    CUresult (*sync)(CUstream);
};
int gs_module_api_of(gs_entry_fn entry, struct gs_module_api *api);

/* Runs argv if it is a compute command: sets *rc, may print key=value
 * fields, returns 1; else returns 0. */
int gs_client_compute(int argc, char **argv, CUresult *rc, gs_entry_fn entry);
/* A context was destroyed: the module it held is gone, and with it the
 * current function (unless that is a library's kernel). */
void gs_client_compute_ctx_gone(void);
/* The current function ("kernel US"), or NULL. */
CUfunction gs_client_func(void);
#endif
