/*
 * The launch gate (docs/compute.md): every launch wrapper passes through it.
 * Stream capture is compute_capture.h's, ledger membership
 * compute_ledger.h's, the NVML loop compute_outer.h's.
 */
#ifndef GPUSLICE_COMPUTE_LIMITER_H
#define GPUSLICE_COMPUTE_LIMITER_H

#include "../abi/cuda_abi.h"
#include "../core/region.h"

enum { GS_COMPUTE_UNKNOWN = 0, GS_COMPUTE_OFF = 1, GS_COMPUTE_ON = 2 };
/* OFF when no compute limit is configured: the wrappers then tail-call the
 * driver after one predictable branch. */
extern int gs_compute_state;

/* Before a launch on stream s (graph: a CUDA graph's, cuGraphLaunch): may
 * wait for the container's tokens. Returns the region device to hand to
 * gs_compute_after, -1 (not limited), or GS_COMPUTE_REFUSED (limited, but
 * the limiter has no memory for the thread, or the device is past its
 * tables: the launch fails rather than run unlimited). */
#define GS_COMPUTE_REFUSED (-2)
int gs_compute_before(CUstream s, int graph);
/* After the launch returned rc. */
void gs_compute_after(int dev, CUstream s, CUresult rc, int graph);
/* Before a collective's kernel (never held back by windows: its peers
 * would spin for it): waits while its container owes more than
 * GS_LIM_COLL_DEBT_NS on the current device. 0, or GS_COMPUTE_REFUSED as
 * gs_compute_before. */
int gs_compute_collective_hold(void);
/* Before the tenant waits for stream s (whole_context: for all of its
 * context's work): the calling thread's busy interval on the current device
 * may end there, and gets a marker. */
void gs_compute_tenant_sync(CUstream s, int whole_context);

/* The process queues work that waits for its host (host_wait_hooks.c): its
 * windows' drains are bounded from now on. */
void gs_compute_note_host_waits(void);

/* Before the program's destroy of stream *s, or (s NULL) of context ctx (a
 * primary context's release, which may destroy it, too): no thread hands the
 * driver a handle of it from the limiter's state afterwards, and this
 * thread's windows in ctx end at once. Marked before the real call, not
 * held across it: a destroy waits for the context's work, which may wait
 * for another thread's next launch. A destroy that fails costs a window
 * counted busy until drained, or a state set up afresh. */
void gs_compute_forget(const CUstream *s, CUcontext ctx);

/* After the real destroy (or release, or reset) of context ctx returned:
 * other threads' windows it ended are charged as busy until now, at their
 * thread's next launch or exit. */
void gs_compute_forgotten(CUcontext ctx);

#endif
