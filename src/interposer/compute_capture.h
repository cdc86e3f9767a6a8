/*
 * Stream capture and the limiter (docs/compute.md, "Stream capture"): while
 * any capture of the process is open, no launch is gated, no window is
 * closed and no event is recorded or synchronised -- launches into a capture
 * do not run (the graph is throttled at cuGraphLaunch), and a global-mode
 * capture forbids synchronisation and event queries in every thread.
 */
#ifndef GPUSLICE_COMPUTE_CAPTURE_H
#define GPUSLICE_COMPUTE_CAPTURE_H

#include "../abi/cuda_abi.h"

/* launch_hooks.c wraps Begin/EndCapture with these. */
void gs_compute_capture_prepare(void);                               /* before Begin*Capture: waits out drains */
void gs_compute_capture_begun(CUstream s, CUresult rc);              /* after it, with its result */
void gs_compute_capture_ended(CUstream s, CUresult rc, void *graph); /* graph: what EndCapture gave */

/* A collective's kernel was launched while captures are open. Its stream
 * may be another than the one a capture began on (NCCL launches on its own
 * stream, joined to the capture), so every open capture is marked: a graph
 * marked wrongly is charged less only the part of its span past its
 * shortest (compute_graphs.h). */
void gs_compute_capture_saw_collective(void);

/* Captures open now (any thread). */
int gs_compute_capturing(void);

/* A thread about to record, query or synchronise events takes the sync
 * side: 1 if it may (then gs_compute_sync_leave after), 0 while a capture
 * is open. Both sides announce themselves first (seq_cst), so a capture
 * never begins while a drain is under way. */
int gs_compute_sync_enter(void);
void gs_compute_sync_leave(void);

/* Whether s is capturing (or cannot be asked). Only on the slow path: a
 * backstop for captures begun through an entry point we do not wrap. */
int gs_compute_stream_capturing(CUstream s);

#endif
