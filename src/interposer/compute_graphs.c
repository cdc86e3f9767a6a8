/*
 * Which graphs hold a collective (compute_graphs.h): one small table of
 * handles, graphs and executable graphs alike. Full, the oldest entry goes:
 * a graph forgotten is charged as any graph, spin included, as before this
 * table existed.
 */
#include "compute_graphs.h"

#include <pthread.h>
#include <stdint.h>

#define MARKED 256

enum kind { KIND_NONE, KIND_GRAPH, KIND_EXEC };
struct marked {
    const void *handle;
    enum kind kind;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct marked g_marked[MARKED];
static unsigned g_next;
static int g_any; /* atomic: a launch looks further only once anything is marked */

static int find(const void *h, enum kind k)
{
    for (int i = 0; i < MARKED; i++)
        if (g_marked[i].kind == k && g_marked[i].handle == h)
            return i;
    return -1;
}

static void mark(const void *h, enum kind k)
{
    if (!h)
        return;
    pthread_mutex_lock(&g_lock);
    if (find(h, k) < 0) {
        g_marked[g_next++ % MARKED] = (struct marked){ h, k };
        __atomic_store_n(&g_any, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_lock);
}

void gs_compute_graph_holds_collective(CUgraph g)
{
    mark(g, KIND_GRAPH);
}

void gs_compute_graph_instantiated(CUresult rc, const CUgraphExec *exec, CUgraph g)
{
    if (rc != CUDA_SUCCESS || !exec || !__atomic_load_n(&g_any, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&g_lock);
    int held = find(g, KIND_GRAPH) >= 0;
    pthread_mutex_unlock(&g_lock);
    if (held)
        mark(*exec, KIND_EXEC);
}

void gs_compute_graph_exec_destroyed(CUgraphExec exec)
{
    if (!__atomic_load_n(&g_any, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&g_lock);
    int i = find(exec, KIND_EXEC);
    if (i >= 0)
        g_marked[i] = (struct marked){ NULL, KIND_NONE };
    pthread_mutex_unlock(&g_lock);
}

int gs_compute_graph_exec_collective(CUgraphExec exec)
{
    if (!__atomic_load_n(&g_any, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&g_lock);
    int held = find(exec, KIND_EXEC) >= 0;
    pthread_mutex_unlock(&g_lock);
    return held;
}
