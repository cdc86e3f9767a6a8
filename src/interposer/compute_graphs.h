/*
 * CUDA graphs that hold a collective. NCCL's kernels captured into a graph
 * (a CUDA-graph decoder with tensor parallelism: PyTorch, vLLM) spin inside
 * the graph while a peer is held back; charged as work, that spin held the
 * rank back in turn, as it did for launched collectives (a TP step captured
 * as a graph, capped at 40 on the simulated driver, had not finished 500
 * steps after 60 s of the tenants' time). A capture during which a collective
 * was launched marks the graph it ends in; instantiating a marked graph marks
 * the executable graph, whose launches are then measured as collectives are
 * (compute_collective.h) and charged less the part of their span past the
 * shortest recent one.
 */
#ifndef GPUSLICE_COMPUTE_GRAPHS_H
#define GPUSLICE_COMPUTE_GRAPHS_H

#include "../abi/cuda_abi.h"

/* A capture that a collective was launched into ended in graph g. */
void gs_compute_graph_holds_collective(CUgraph g);

/* cuGraphInstantiate* returned rc for graph g, filling *exec. */
void gs_compute_graph_instantiated(CUresult rc, const CUgraphExec *exec, CUgraph g);

/* exec was destroyed: its handle may come back for another graph. */
void gs_compute_graph_exec_destroyed(CUgraphExec exec);

/* Whether launches of exec run a collective. */
int gs_compute_graph_exec_collective(CUgraphExec exec);

#endif
