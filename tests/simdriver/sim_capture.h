/*
 * Stream capture in the simulated driver (sim_capture.c), modelled on the
 * real driver's rules:
 * - work launched into a capturing stream is recorded, not run; the capture
 *   ends in a graph whose launch takes the recorded time. A captured
 *   collective keeps its place in the graph and, when the graph runs, waits
 *   for its peers as a launched one does (NCCL captured into a CUDA graph:
 *   a TP decoder's CUDA-graph step);
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
/* What a captured graph runs, in order: each part's kernel work (ns), then
 * its collective (coll_ns of its own work among `ranks` processes of
 * `group`), if ranks is not 0. Past SIM_GRAPH_PARTS parts, a collective's
 * work joins the last part's kernel work (it no longer waits). */
#define SIM_GRAPH_PARTS 8
struct sim_graph_part {
    uint64_t ns;
    uint64_t coll_ns;
    unsigned ranks, group;
};
struct sim_graph_body {
    unsigned n; /* parts in use; 0 = one part of no work */
    struct sim_graph_part part[SIM_GRAPH_PARTS];
};

/* A launch into s of ns of kernel work, or of a collective's (coll: its
 * ranks and group; NULL for a kernel or a graph): returns 1 and sets *rc if s
 * is capturing (the work is recorded, not run), else 0. */
int sim_capture_launch(CUstream s, uint64_t ns, const struct sim_graph_part *coll, CUresult *rc);
/* An unsafe call about stream s (NULL: none in particular): CUDA_SUCCESS,
 * or 900 after invalidating what the call broke. */
CUresult sim_capture_unsafe(CUstream s);
/* Invalidates s's capture, if any. */
void sim_capture_invalidate(CUstream s);
/* sim_launch.c: an executable graph that runs body per launch. */
CUresult sim_graph_of_body(CUgraphExec *out, const struct sim_graph_body *body);

#endif
