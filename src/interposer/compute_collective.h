/*
 * Collective kernels under a compute limit (src/core/collective.h says why):
 * they pass the launch gate without waiting (holding one back makes every
 * peer spin) and outside the windows' busy intervals; each is measured with
 * two events on its own stream and charged its spin-free estimate.
 */
#ifndef GPUSLICE_COMPUTE_COLLECTIVE_H
#define GPUSLICE_COMPUTE_COLLECTIVE_H

#include "../abi/cuda_abi.h"

/* Whether f is a collective's kernel (its name, asked once per function). */
int gs_compute_is_collective(CUfunction f);

/* Around the real launch of collective f with `blocks` blocks on stream s:
 * before returns a token for after (-1: not measured). */
int gs_compute_collective_before(CUfunction f, unsigned blocks, CUstream s);
void gs_compute_collective_after(int token, CUstream s, CUresult rc);

/* Charges the measured collectives of device d (region index) that have
 * completed; never waits. */
void gs_compute_collective_harvest(int d);

/* Whether the process has collectives on device d that have not completed
 * (harvests first). */
int gs_compute_collective_in_flight(int d);

#endif
