/* Which device a memory pool's memory lands on (pool_hooks.c). */
#ifndef GPUSLICE_POOL_HOOKS_H
#define GPUSLICE_POOL_HOOKS_H

#include "../abi/cuda_abi.h"

/* The region device of pool's memory: the device the program made it on or
 * asked it of; the current device for a pool never seen. -1: none. */
int gs_pool_device(CUmemoryPool pool);

#endif
