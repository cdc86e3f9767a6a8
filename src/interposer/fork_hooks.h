/* fork(): the child is a new process, with no slot, no allocations, no
 * graphs and no charged contexts of its own. One pthread_atfork registration
 * (fork_hooks.c) runs every module's handlers from one table. */
#ifndef GPUSLICE_FORK_HOOKS_H
#define GPUSLICE_FORK_HOOKS_H

/* compute_outer_thread.c: the outer thread's queue and the outer loop's
 * locks (first: a run in progress may take the others' locks). The child
 * starts a thread of its own. */
void gs_outer_thread_fork_prepare(void);
void gs_outer_thread_fork_parent(void);
void gs_outer_thread_fork_child(void);
/* runtime.c: the set-up lock, the allocation table, the region slot. */
void gs_rt_fork_prepare(void);
void gs_rt_fork_parent(void);
void gs_rt_fork_child(void);
/* graph_memory_hooks.c: executable graphs and their charges. */
void gs_graph_fork_prepare(void);
void gs_graph_fork_parent(void);
void gs_graph_fork_child(void);
/* real_driver.c: the lock around resolving the real libraries (last: the
 * others' holders may resolve; a dlopen under way finishes first). */
void gs_real_fork_prepare(void);
void gs_real_fork_parent(void);
void gs_real_fork_child(void);
/* context_hooks.c: which devices' context overhead was charged. */
void gs_ctx_fork_child(void);
/* compute_limiter.c: the list of threads' states, which gone threads may hold. */
void gs_compute_fork_child(void);
/* compute_ledger.c: the ledger descriptors the child inherited, which
 * would keep the parent's slots and lock held while the child lives. */
void gs_compute_ledger_fork_child(void);
/* vmm_hooks.c: the mappings that keep released VMM handles charged. */
void gs_vmm_fork_child(void);
/* vmm_share.c: the export records this process holds (the parent's). */
void gs_vmm_share_fork_child(void);

#endif
