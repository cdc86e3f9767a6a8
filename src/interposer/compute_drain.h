/* A window's drain with a bound: each launching thread's wait for the work
 * its window queued (compute_limiter.c, close_window) is made on a helper
 * thread of its own, so that the launching thread can stop waiting. A
 * program whose queued work waits for its host to act after the launch
 * returns (a kernel spinning on a host flag, cuStreamWaitValue32, an event
 * another thread records) would otherwise hang in the launch for good. */
#ifndef GPUSLICE_COMPUTE_DRAIN_H
#define GPUSLICE_COMPUTE_DRAIN_H

#include "../abi/cuda_abi.h"
#include <stdint.h>

#define GS_DRAIN_MAX_EVENTS 4

struct gs_drainer;

enum gs_drain_result {
    GS_DRAIN_DONE,      /* the work completed; *done_ns says when */
    GS_DRAIN_GAVE_UP,   /* the bound passed first: the events now belong to the
                         * drainer, which destroys them once the work is done;
                         * the caller makes new ones */
    GS_DRAIN_UNBOUNDED, /* no helper thread could be had: waited on the calling
                         * thread, unbounded, as the driver would; *done_ns set */
};

/* Waits on the calling thread, in its current context, as the driver
 * waits: with whole_ctx for all of the context's work, then for
 * events[0..n); unbounded. The compute clock when the work is done. */
uint64_t gs_drain_unbounded(const CUevent *events, int n, int whole_ctx);

/* Waits until events[0..n) have completed, with whole_ctx all of ctx's work
 * first, for at most bound_ns of the compute clock. *dr is the calling
 * thread's drainer, made at its first use (NULL again after it gave up:
 * that one finishes its wait on its own). */
enum gs_drain_result gs_drain(struct gs_drainer **dr, CUcontext ctx, const CUevent *events, int n, int whole_ctx,
                              uint64_t bound_ns, uint64_t *done_ns);

/* The owning thread ends: its drainer's thread exits and frees it. */
void gs_drainer_release(struct gs_drainer *dr);

/* ctx is being destroyed, and the events made in it with it: drainers
 * given up on that still wait on some leave them be. */
void gs_drain_forget_ctx(CUcontext ctx);

/* A forked child: the drainers' threads stayed in the parent (each
 * thread's drainer pointer is dropped by its owner's state). */
void gs_drain_fork_child(void);

#endif
