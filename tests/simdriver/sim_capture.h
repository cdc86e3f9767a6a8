/*
 * Stream capture in the simulated driver (sim_capture.c), modelled on the
 * real driver's rules:
 * - work launched into a capturing stream is recorded, not run; the capture
 *   ends in a graph whose launch takes the recorded time;
 * - synchronising with or querying a capturing stream, or querying an event
 *   last recorded in one, invalidates the capture (the app's later launches
 *   into it and its cuStreamEndCapture then fail with 901);
 * - while a global-mode capture is active anywhere in the process (or a
 *   thread-local one in the calling thread), "unsafe" calls -- stream, event
 *   and context synchronisation and queries -- fail with 900 and invalidate
 *   those captures. Relaxed-mode captures prohibit nothing.
 */
#ifndef GPUSLICE_SIM_CAPTURE_H
#define GPUSLICE_SIM_CAPTURE_H

#include <stdint.h>

#include "sim_cuda.h"

/* 0 not capturing, 1 capturing, 2 capture invalidated. */
int sim_capture_status(CUstream s);
/* A launch of ns into s: returns 1 and sets *rc if s is capturing (the work
 * is recorded, not run), else 0. */
int sim_capture_launch(CUstream s, uint64_t ns, CUresult *rc);
/* An unsafe call about stream s (NULL: none in particular): CUDA_SUCCESS,
 * or 900 after invalidating what the call broke. */
CUresult sim_capture_unsafe(CUstream s);
/* Invalidates s's capture, if any. */
void sim_capture_invalidate(CUstream s);
/* sim_launch.c: an executable graph that takes ns per launch. */
CUresult sim_graph_of_ns(CUgraphExec *out, uint64_t ns);

#endif
