/*
 * Collective kernels under a compute limit (src/core/collective.h says why):
 * they pass the launch gate without waiting (holding one back makes every
 * peer spin) and outside the windows' busy intervals; each is measured with
 * two events on its own stream and charged its spin-free estimate.
 */
#ifndef GPUSLICE_COMPUTE_COLLECTIVE_H
#define GPUSLICE_COMPUTE_COLLECTIVE_H

#include "../abi/cuda_abi.h"
#include "../core/region_layout.h"

/* Whether f is a collective's kernel (its name, asked once per function). */
int gs_compute_is_collective(CUfunction f);

/* A module, library or context was unloaded: its functions' handles may be
 * handed out again for other kernels, so every answer is forgotten (each
 * function is asked again at its next launch). */
void gs_compute_collective_unloaded(void);

/* Around the real launch of collective f with `blocks` blocks on stream s:
 * before returns a token for after (-1: not measured). */
int gs_compute_collective_before(CUfunction f, unsigned blocks, CUstream s);
void gs_compute_collective_after(int token, CUstream s, CUresult rc);

/* Around the real launch of an executable graph that holds a collective
 * (compute_graphs.h), inside the launch gate: its span is measured as a
 * collective's, and the part of it past the shortest recent span counts as
 * spin (gs_compute_collective_spin); its work is charged with the window's
 * busy interval, not here. Returns a token for gs_compute_collective_after. */
int gs_compute_collective_graph_before(CUgraphExec g, CUstream s);

/* Charges the measured collectives of device d (region index) that have
 * completed; never waits. */
void gs_compute_collective_harvest(int d);

/* GPU ns, within [0, len_ns] after event `from` (recorded on device d and
 * complete), that the process's unharvested collectives on d spent waiting
 * for their peers: the part of each one's span before its spin-free time.
 * A stream that waits for a collective's result (PyTorch makes the compute
 * stream wait for NCCL's) is held that long, and a busy interval measured
 * across it would charge the peer's wait as our work. Then charges the
 * completed ones (gs_compute_collective_harvest). */
uint64_t gs_compute_collective_spin(int d, CUevent from, uint64_t len_ns);

/* Whether a collective of the process on device d spun for its peers well
 * past its estimate lately (within GS_LIM_THROTTLED_NS of now): its ranks
 * are out of step, and its container contends for the turn frame's slots
 * (compute_ledger.h) even if its account is not held back. */
int gs_compute_collective_spun(int d, uint64_t now);

/* Context ctx is about to be destroyed: the ring's events made in it are
 * destroyed while they still can be, and its collectives in flight charged
 * their estimate, unread (their events go with it). */
void gs_compute_collective_forget(CUcontext ctx);

/* In a forked child: the locks another thread of the parent may have held
 * are made anew (gs_compute_fork_child). */
void gs_compute_collective_fork_child(void);

/* Whether the process has collectives on device d that have not been
 * harvested (gs_compute_collective_spin still sees them). */
int gs_compute_collective_in_flight(int d);

/* Moves the process's step mark (gs_step_after_kernel) past a kernel's
 * launch (collective 0) or a collective's (1) on a limited device. */
void gs_compute_step_mark(struct gs_region *r, int collective);

/* Whether this process has launched a collective on a limited device: it
 * is a rank of a job whose peers wait for it at each collective. */
int gs_compute_is_rank(const struct gs_region *r);

/* Whether a live process of the container other than ours has a step mark
 * above ours: a rank of our job began a step we have not. */
int gs_compute_peer_ahead(const struct gs_region *r);

#endif
