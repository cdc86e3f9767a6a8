/* Entry points that queue waits for the host (host_wait_hooks.c). */
#ifndef GS_HOST_WAIT_HOOKS_H
#define GS_HOST_WAIT_HOOKS_H

#include "../abi/cuda_abi.h"

/* What a lookup of name (a base name through cuGetProcAddress, an exported
 * name through dlsym) that found the driver's function found hands back: our
 * wrapper of it, or found itself. Where it cannot wrap a variant of an entry
 * point that queues host waits (a newer ABI than this build knows), the
 * process is noted as one that queues such work: that variant passes
 * through unseen. */
void *gs_lookup_wrapped(const char *name, void *found);

/* rc, after noting the process where it is CUDA_SUCCESS: the driver gave
 * it host memory the device reaches, where a kernel may spin on a flag that
 * no API call shows (its drains wait with a bound from then on). */
CUresult gs_host_memory_had(CUresult rc);
#endif
