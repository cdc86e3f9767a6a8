/*
 * The compute limiter inside the interposer (docs/compute.md): the gate every
 * launch wrapper passes through, and the outer NVML loop.
 */
#ifndef GPUSLICE_COMPUTE_LIMITER_H
#define GPUSLICE_COMPUTE_LIMITER_H

#include "../abi/cuda_abi.h"
#include "../core/region.h"

enum { GS_COMPUTE_UNKNOWN = 0, GS_COMPUTE_OFF = 1, GS_COMPUTE_ON = 2 };
/* OFF when no compute limit is configured: the wrappers then tail-call the
 * driver after one predictable branch. */
extern int gs_compute_state;

/* Before a launch on stream s: may wait for the container's tokens. Returns
 * the region device to hand to gs_compute_after, or -1 (not limited). */
int gs_compute_before(CUstream s);
/* After the launch returned rc. */
void gs_compute_after(int dev, CUstream s, CUresult rc);

/* Stream capture (launch_hooks.c wraps Begin/EndCapture): while any capture
 * of the process is open, no launch is gated, no window is closed and no
 * event is recorded or synchronised -- launches into a capture do not run
 * (the graph is throttled at cuGraphLaunch), and a global-mode capture
 * forbids synchronisation and event queries in every thread. */
void gs_compute_capture_prepare(void);         /* before Begin*Capture: waits out drains */
void gs_compute_capture_begun(CUstream s, CUresult rc); /* after it, with its result */
void gs_compute_capture_ended(CUstream s, CUresult rc);
/* Captures open now (any thread). */
int gs_compute_capturing(void);

/* The slow outer loop (compute_outer.c): at most every GS_LIM_OUTER_NS per
 * container and device, from any of its processes. */
void gs_compute_outer(struct gs_region *r, int dev, uint64_t now);

/* Members of other containers in device d's ledger, after dropping the dead
 * (the outer loop: while there are any, the ledger corrects for them). */
int gs_compute_ledger_others(int dev);

/* Share mode: the summed weights of the other containers in device d's
 * ledger that showed demand since `since`, and whether pid belongs to one
 * of them (its NVML samples are then already counted). */
uint64_t gs_compute_ledger_busy_weight(int dev, uint64_t since);
int gs_compute_ledger_has_pid(int dev, uint32_t pid);

/* The limiter's clock (CLOCK_MONOTONIC, the simulated driver's too). */
uint64_t gs_compute_now(void);

#endif
