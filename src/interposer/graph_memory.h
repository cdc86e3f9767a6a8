/* Graph memory nodes (graph_memory_hooks.c). */
#ifndef GPUSLICE_GRAPH_MEMORY_H
#define GPUSLICE_GRAPH_MEMORY_H

#include "../abi/cuda_abi.h"

/* After a successful cuMemFree/cuMemFreeAsync of dptr: releases the charge
 * of a graph allocation that outlived its executable graph, if dptr is one.
 * One atomic load when there are none. */
void gs_graph_mem_freed(CUdeviceptr dptr);

#endif
