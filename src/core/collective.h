/*
 * Collective kernels (NCCL's all-reduce and friends) wait on the GPU for
 * their peers: a rank's kernel spins until every rank has reached it. Under a
 * cap, the time it spins while a peer is held back is not the rank's work,
 * and charged as such it held the rank back in turn: on 2 x H200 a
 * tensor-parallel loop capped at 40 ran at 0.02 of native (docs/compute.md,
 * "Several GPUs"). So a collective is charged the time it takes with no wait,
 * estimated as the shortest span recent launches of the same kernel and grid
 * took (the one whose peers were all there when it began), never more than
 * its own span. Pure logic, unit-tested; the interposer measures the spans
 * (src/interposer/compute_collective.c).
 */
#ifndef GPUSLICE_COLLECTIVE_H
#define GPUSLICE_COLLECTIVE_H

#include <stdint.h>

/* Whether a kernel's name (as cuFuncGetName gives it, mangled or not) is a
 * collective's: NCCL's device kernels are ncclDevKernel_* (2.19 on) and
 * ncclKernel_* (before). */
int gs_collective_name(const char *name);

/* The spans of the last GS_COLL_SPANS launches of one kernel and grid. */
#define GS_COLL_SPANS 32
/* Launches of a kernel and grid that are measured before any is charged: a
 * first span may hold a long wait (a peer still starting, connections being
 * set up), and alone it would be its own estimate. */
#define GS_COLL_TRUSTED 4
struct gs_coll_est {
    uint64_t span[GS_COLL_SPANS];
    uint32_t n; /* spans recorded, saturating at GS_COLL_SPANS */
    uint32_t head;
};

/* Records a launch's measured span (GPU ns from the point its stream reached
 * it to its end) and returns what to charge now: the shortest span of the
 * last GS_COLL_SPANS launches, this one included; for the first
 * GS_COLL_TRUSTED launches nothing, then all of them at once at the shortest
 * of their spans. */
uint64_t gs_coll_est_add(struct gs_coll_est *e, uint64_t span_ns);

/* The current estimate of a launch's spin-free time (0: fewer than
 * GS_COLL_TRUSTED measured), for a launch that cannot be measured. */
uint64_t gs_coll_est_now(const struct gs_coll_est *e);

/* Where a rank stands in its job's steps (each process of a container keeps
 * one mark, in its region slot): twice the collectives it launched, plus one
 * once it launched a kernel after the last. Ranks of one job launch the same
 * collectives in the same order, so a peer whose mark is above ours has begun
 * a step we have not: at the end of a turn-frame slot a rank follows such a
 * peer into it rather than leave the peer's collective spinning for it
 * through the next container's slot (compute_limiter.c). */
static inline uint64_t gs_step_after_kernel(uint64_t mark)
{
    return mark | 1;
}

static inline uint64_t gs_step_after_collective(uint64_t mark)
{
    return (mark | 1) + 1;
}

#endif
