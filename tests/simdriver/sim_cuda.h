/*
 * Internal interface between the files of the simulated libcuda.so.1.
 * Process-local objects (contexts, pools, streams) live here; anything other
 * processes must see lives in the shared struct sim_state.
 */
#ifndef GPUSLICE_SIM_CUDA_H
#define GPUSLICE_SIM_CUDA_H

#include "sim_cuda_api.h"
#include "sim_state.h"

#define SIM_MAX_CTX 256
#define SIM_MAX_POOLS 64
#define SIM_CTX_MAGIC 0x43545853U  /* "SXTC" */
#define SIM_POOL_MAGIC 0x4c4f4f50U /* "POOL" */

struct sim_ctx {
    uint32_t magic;
    int in_use;
    int dev;
    int primary;  /* the device's primary context */
    int refcount; /* primary only: retains minus releases */
    unsigned int flags;
};

struct sim_pool {
    uint32_t magic;
    int in_use;
    int dev;
    int is_default;
};

/* Process-local tables; index = handle identity. Guarded by the state lock. */
extern struct sim_ctx sim_ctxs[SIM_MAX_CTX];
extern struct sim_pool sim_pools[SIM_MAX_POOLS];

/*
 * Every entry point that touches state brackets its work with these:
 * sim_enter checks cuInit, locks, prunes the dead and finds our process slot.
 */
struct sim_call {
    struct sim_state *st;
    int proc;
};
CUresult sim_enter(struct sim_call *c);
void sim_leave(struct sim_call *c);
/* The calling thread's current context index, checked alive; lock held. */
CUresult sim_current_ctx(int *ctx);
/* cuInit checked, then the current context as sim_current_ctx gives it (what
 * a launch, a module or pinned host memory needs). */
CUresult sim_need_ctx(int *ctx);
/* The state after cuInit, or NULL (for calls that need no lock). */
/* CUDA_VISIBLE_DEVICES, read at cuInit: a CUDA ordinal's physical device
 * (-1 if none), and a physical device's ordinal (-1 if not visible). */
int sim_dev_phys(CUdevice ordinal);
CUdevice sim_dev_ordinal(int phys);
struct sim_state *sim_initialized_state(void);

/* Waits for all of the process's work on the current device (its streams
 * form one queue); takes the lock itself. */
CUresult sim_drain_current(void);
/* Waits for the process's work on physical device dev (a context's destroy does). */
CUresult sim_drain_dev(int dev);

/* Unloads the modules loaded in context index ctx, as its destroy does
 * (sim_launch.c; takes its own lock, never the state's). */
void sim_modules_ctx_gone(int ctx);

/* Context handles <-> table indices; -1 if not a live context. */
int sim_ctx_index(CUcontext ctx);
CUcontext sim_ctx_handle(int index);

/* Memory accounting (sim_memory.c). Lock held for all of these. */
uint64_t sim_round_up(uint64_t v, uint64_t to);
/* Charges and records one allocation. kind SIM_KIND_DEVICE at most 1 MiB is
 * carved from a chunk; kinds that hold no memory charge nothing. align: VA
 * alignment (0 = 2 MiB). */
CUresult sim_alloc_new(struct sim_call *c, int ctx, int dev, int kind, uint64_t size, int legacy, uint64_t align,
                       struct sim_alloc **out);
/* Uncharges and forgets one allocation (VMM mappings drop their reference). */
void sim_alloc_drop(struct sim_state *st, struct sim_alloc *a);
/* Our allocation of one of the kinds in kind_mask (1 << kind) starting at va. */
struct sim_alloc *sim_alloc_at(struct sim_call *c, uint64_t va, unsigned kind_mask);
struct sim_alloc *sim_alloc_by_id(struct sim_state *st, uint64_t id);
/* Frees what a context owns, at its destruction. */
void sim_drop_ctx_allocs(struct sim_call *c, int ctx);
#define SIM_MASK(kind) (1U << (kind))

/* NULL, the legacy and per-thread stream handles, or a live stream (sim_launch.c). */
int sim_stream_valid(CUstream s);
/* Destroys the streams and events of context ctx, at its destruction. */
void sim_drop_ctx_handles(int ctx);

/* Graphs built with memory nodes (sim_graph_memory.c). The _mem_free and
 * _mem_range hooks run with the lock held (inside sim_enter): a live graph
 * allocation at ptr is freed / resolved, returning 1, else 0. */
int sim_graph_mem_free(struct sim_call *c, uint64_t ptr);
int sim_graph_mem_range(struct sim_call *c, uint64_t ptr, uint64_t *base, uint64_t *size);
/* 1 if g is an executable graph with memory nodes: it was launched, *rc says how. */
int sim_graph_mem_launch(CUgraphExec g, CUresult *rc);
int sim_graph_mem_owns(CUgraph g);
CUresult sim_graph_mem_instantiate(CUgraphExec *out, CUgraph g);

/* Whether the device reaches len bytes of host memory at p: pinned or
 * registered there, or any with pageable access on (sim_host_memory.c). */
int sim_host_reachable(const void *p, size_t len);

/* Resets process-local objects (a forked child starts without contexts). */
void sim_ctx_reset_local(void);
void sim_pool_reset_local(void);

#endif
