/* The interposer's one fork handler: each module's locks are taken before
 * fork() (in table order; every lock here is either taken alone or in this
 * order elsewhere) and released, or the module reset, after it. */
#include "fork_hooks.h"

#include <pthread.h>
#include <stddef.h>

static const struct {
    void (*prepare)(void);
    void (*parent)(void);
    void (*child)(void);
} handlers[] = {
    { gs_outer_thread_fork_prepare, gs_outer_thread_fork_parent, gs_outer_thread_fork_child },
    { gs_rt_fork_prepare, gs_rt_fork_parent, gs_rt_fork_child },
    { gs_graph_fork_prepare, gs_graph_fork_parent, gs_graph_fork_child },
    { gs_real_fork_prepare, gs_real_fork_parent, gs_real_fork_child },
    { NULL, NULL, gs_ctx_fork_child },
    { NULL, NULL, gs_compute_fork_child },
    { NULL, NULL, gs_compute_ledger_fork_child },
    { NULL, NULL, gs_vmm_fork_child },
    { NULL, NULL, gs_vmm_share_fork_child },
};
#define NHANDLERS (sizeof handlers / sizeof handlers[0])

static void prepare(void)
{
    for (size_t i = 0; i < NHANDLERS; i++)
        if (handlers[i].prepare)
            handlers[i].prepare();
}

static void parent(void)
{
    for (size_t i = NHANDLERS; i-- > 0;)
        if (handlers[i].parent)
            handlers[i].parent();
}

static void child(void)
{
    for (size_t i = NHANDLERS; i-- > 0;)
        if (handlers[i].child)
            handlers[i].child();
}

__attribute__((constructor)) static void fork_hooks_init(void)
{
    pthread_atfork(prepare, parent, child);
}
