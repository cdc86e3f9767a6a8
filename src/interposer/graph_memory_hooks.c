/*
 * Graph memory nodes (cuGraphAddMemAllocNode, and the allocation nodes that
 * stream capture of cuMemAllocAsync makes). The driver gives an allocation
 * node its address when the node is made, but takes physical memory only
 * when an executable graph of it is launched or uploaded, and keeps it for
 * that graph's later launches. A graph with memory nodes has at most one
 * executable graph at a time and cannot be cloned (CUDA driver API
 * reference, cuGraphAddMemFreeNode), so the executable graph is the owner.
 * It can be nested since CUDA 12.9: a child graph moved into its parent
 * (cuGraphAddNode, ownership MOVE) keeps its memory nodes, which are the
 * parent's now, so a graph's nodes are read with its children's:
 *
 * - instantiation charges every allocation node of the graph before the real
 *   call, and refuses with CUDA_ERROR_OUT_OF_MEMORY past the limit (charging
 *   at instantiation rather than first launch is early, never late);
 * - cuGraphExecDestroy releases the nodes the graph frees itself, then trims
 *   the device's graph memory pool so that the cached memory really goes;
 * - a node the graph leaves unfreed can outlive the executable graph: if its
 *   memory is still live when the graph is destroyed, it stays charged until
 *   the program's cuMemFree/cuMemFreeAsync of it (gs_graph_mem_freed).
 *
 * See docs/memory.md.
 */
#include <pthread.h>
#include <stdlib.h>

#include "../core/accounting.h"
#include "charge.h"
#include "compute_graphs.h"
#include "compute_limiter.h"
#include "graph_memory.h"
#include "fork_hooks.h"
#include "log.h"
#include "real_driver.h"
#include "runtime.h"

struct graph_alloc {
    CUdeviceptr dptr;
    CUdevice ordinal;
    int dev; /* region device, -1: not device memory (not charged) */
    uint64_t bytes;
    int freed_in_graph; /* a free node of the same graph frees it */
    int charged_before; /* charged already by a captured cuMemAllocAsync */
};

/* The allocation nodes of each live executable graph that has any. */
struct exec_allocs {
    CUgraphExec exec;
    size_t n;
    struct graph_alloc *a;
    struct exec_allocs *next;
};

static struct exec_allocs *execs;

/* Allocations left live by a destroyed executable graph, charged until the
 * program frees them (gs_graph_mem_freed). */
struct orphan {
    CUdeviceptr dptr;
    CUdevice ordinal;
    struct gs_alloc_rec rec;
    struct orphan *next;
};
static struct orphan *orphans;
static int have_orphans; /* read without the lock on every free */
/* Guards both lists. */
static pthread_mutex_t execs_lock = PTHREAD_MUTEX_INITIALIZER;

void gs_graph_fork_prepare(void)
{
    pthread_mutex_lock(&execs_lock);
}

void gs_graph_fork_parent(void)
{
    pthread_mutex_unlock(&execs_lock);
}

/* A forked child has no graphs of its own (and no charges: gs_alloc_clear). */
void gs_graph_fork_child(void)
{
    while (execs) {
        struct exec_allocs *e = execs;
        execs = e->next;
        free(e->a);
        free(e);
    }
    while (orphans) {
        struct orphan *o = orphans;
        orphans = o->next;
        free(o);
    }
    have_orphans = 0;
    pthread_mutex_unlock(&execs_lock);
}

/* Child graphs nested deeper than this are not read (their memory nodes
 * then go uncharged until the launch meets the driver's own limits). */
#define MAX_NEST 8

/* Appends the nodes of g, and of the child graphs in it, to *nodes (*n of
 * *cap). 0, or -1 when out of host memory. */
static int add_nodes(CUgraph g, int depth, CUgraphNode **nodes, size_t *n, size_t *cap)
{
    gs_pfn_cuGraphGetNodes get_nodes = GS_REAL_CU(cuGraphGetNodes);
    gs_pfn_cuGraphNodeGetType get_type = GS_REAL_CU(cuGraphNodeGetType);
    gs_pfn_cuGraphChildGraphNodeGetGraph get_child = GS_REAL_CU(cuGraphChildGraphNodeGetGraph);
    size_t k = 0;
    if (!get_nodes || get_nodes(g, NULL, &k) != CUDA_SUCCESS || k == 0)
        return 0;
    if (*n + k > *cap) {
        size_t ncap = (*n + k) * 2;
        CUgraphNode *grown = realloc(*nodes, ncap * sizeof *grown);
        if (!grown)
            return -1;
        *nodes = grown;
        *cap = ncap;
    }
    size_t from = *n;
    if (get_nodes(g, *nodes + from, &k) != CUDA_SUCCESS)
        return 0;
    *n = from + k;
    for (size_t i = from; i < from + k && depth < MAX_NEST && get_type && get_child; i++) {
        CUgraphNodeType t;
        CUgraph child;
        if (get_type((*nodes)[i], &t) == CUDA_SUCCESS && t == CU_GRAPH_NODE_TYPE_GRAPH &&
            get_child((*nodes)[i], &child) == CUDA_SUCCESS && add_nodes(child, depth + 1, nodes, n, cap) != 0)
            return -1;
    }
    return 0;
}

/* The allocation nodes of g and its child graphs, with whether the graph
 * frees each one; notes a host, memory-operation or semaphore-wait node.
 * Returns the count (0 when it has none or cannot be read: the real call
 * then decides), or -1 when out of host memory. */
static long graph_allocs(CUgraph g, struct graph_alloc **out)
{
    *out = NULL;
    gs_pfn_cuGraphNodeGetType get_type = GS_REAL_CU(cuGraphNodeGetType);
    gs_pfn_cuGraphMemAllocNodeGetParams alloc_params = GS_REAL_CU(cuGraphMemAllocNodeGetParams);
    gs_pfn_cuGraphMemFreeNodeGetParams free_params = GS_REAL_CU(cuGraphMemFreeNodeGetParams);
    CUgraphNode *nodes = NULL;
    size_t n = 0, cap = 0;
    if (!get_type || !alloc_params || !free_params)
        return 0;
    if (add_nodes(g, 0, &nodes, &n, &cap) != 0) {
        free(nodes);
        return -1;
    }
    if (n == 0) {
        free(nodes);
        return 0;
    }
    struct graph_alloc *a = calloc(n, sizeof *a);
    if (!a) {
        free(nodes);
        return -1;
    }
    size_t na = 0;
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType t;
        CUDA_MEM_ALLOC_NODE_PARAMS p;
        if (get_type(nodes[i], &t) != CUDA_SUCCESS)
            continue;
        if (t == CU_GRAPH_NODE_TYPE_HOST || t == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP ||
            t == CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT)
            gs_compute_note_host_waits(); /* read here, on the one walk of the graph (host_wait_hooks.c) */
        if (t != CU_GRAPH_NODE_TYPE_MEM_ALLOC || alloc_params(nodes[i], &p) != CUDA_SUCCESS)
            continue;
        int on_device = p.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE;
        a[na++] = (struct graph_alloc){ .dptr = p.dptr,
                                        .ordinal = p.poolProps.location.id,
                                        .dev = on_device ? gs_rt_dev_of_ordinal(p.poolProps.location.id) : -1,
                                        .bytes = gs_charge_linear(p.bytesize) };
    }
    for (size_t i = 0; i < n && na; i++) {
        CUgraphNodeType t;
        CUdeviceptr freed;
        if (get_type(nodes[i], &t) != CUDA_SUCCESS || t != CU_GRAPH_NODE_TYPE_MEM_FREE ||
            free_params(nodes[i], &freed) != CUDA_SUCCESS)
            continue;
        for (size_t j = 0; j < na; j++)
            if (a[j].dptr == freed)
                a[j].freed_in_graph = 1;
    }
    free(nodes);
    if (!na)
        free(a);
    else
        *out = a;
    return (long)na;
}

/* Reserves what is not charged yet; on failure gives back what it took. */
static CUresult reserve_allocs(struct graph_alloc *a, size_t n, struct gs_charge *c)
{
    for (size_t i = 0; i < n; i++) {
        struct gs_alloc_rec rec;
        c[i].active = 0;
        a[i].charged_before = gs_alloc_get(GS_ALLOC_PTR, a[i].dptr, &rec) == 0;
        if (a[i].dev == -1 || a[i].charged_before) /* not on a device (one past the tables is refused) */
            continue;
        CUresult rc = gs_charge_reserve(&c[i], a[i].dev, a[i].bytes);
        if (rc != CUDA_SUCCESS) {
            while (i--)
                gs_charge_commit(&c[i], rc, GS_ALLOC_GRAPH, 0);
            return rc;
        }
    }
    return CUDA_SUCCESS;
}

/* After the real call: keep (under each node's address) or give back. */
static void commit_allocs(CUgraphExec exec, struct graph_alloc *a, size_t n, struct gs_charge *c, CUresult rc)
{
    for (size_t i = 0; i < n; i++) {
        gs_charge_commit(&c[i], rc, GS_ALLOC_GRAPH, a[i].dptr);
        /* A captured cuMemAllocAsync was charged at capture: the executable
         * graph owns that charge now, so that freeing the pointer outside
         * the graph no longer releases memory the graph takes again. */
        struct gs_alloc_rec rec;
        if (rc == CUDA_SUCCESS && a[i].charged_before && gs_alloc_take(GS_ALLOC_PTR, a[i].dptr, &rec) == 0)
            gs_alloc_put(GS_ALLOC_GRAPH, a[i].dptr, rec, NULL, NULL);
    }
    struct exec_allocs *e = rc == CUDA_SUCCESS ? malloc(sizeof *e) : NULL;
    if (!e) {
        /* Failed, or out of host memory: then the charges stay until the
         * process exits, which overcounts but never lets a graph go uncounted. */
        free(a);
        return;
    }
    *e = (struct exec_allocs){ .exec = exec, .n = n, .a = a };
    pthread_mutex_lock(&execs_lock);
    e->next = execs;
    execs = e;
    pthread_mutex_unlock(&execs_lock);
}

/* Charge g's allocation nodes, run `call` (which fills *phGraphExec), keep
 * or give back. */
#define CHARGED_INSTANTIATE(phGraphExec, g, call)                                                                      \
    do {                                                                                                               \
        if (gs_mode() == GS_MODE_PASSTHROUGH)                                                                          \
            return call;                                                                                               \
        struct graph_alloc *a_;                                                                                        \
        long n_ = graph_allocs((g), &a_);                                                                              \
        if (n_ < 0)                                                                                                    \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                                           \
        if (n_ == 0) {                                                                                                 \
            CUresult r_ = call;                                                                                        \
            gs_compute_graph_instantiated(r_, (phGraphExec), (g));                                                     \
            return r_;                                                                                                 \
        }                                                                                                              \
        struct gs_charge *c_ = calloc((size_t)n_, sizeof *c_);                                                         \
        CUresult rc_ = c_ ? reserve_allocs(a_, (size_t)n_, c_) : CUDA_ERROR_OUT_OF_MEMORY;                             \
        if (rc_ != CUDA_SUCCESS) {                                                                                     \
            gs_log(GS_LOG_INFO, "graph instantiation refused: its allocation nodes exceed the limit");                 \
            free(c_);                                                                                                  \
            free(a_);                                                                                                  \
            return rc_;                                                                                                \
        }                                                                                                              \
        rc_ = call;                                                                                                    \
        commit_allocs(rc_ == CUDA_SUCCESS ? *(phGraphExec) : NULL, a_, (size_t)n_, c_, rc_);                           \
        gs_compute_graph_instantiated(rc_, (phGraphExec), (g));                                                        \
        free(c_);                                                                                                      \
        return rc_;                                                                                                    \
    } while (0)

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                            size_t bufferSize)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuGraphInstantiate);
    CHARGED_INSTANTIATE(phGraphExec, hGraph, real(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                               size_t bufferSize)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuGraphInstantiate_v2);
    CHARGED_INSTANTIATE(phGraphExec, hGraph, real(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuGraphInstantiateWithFlags);
    CHARGED_INSTANTIATE(phGraphExec, hGraph, real(phGraphExec, hGraph, flags));
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuGraphInstantiateWithParams);
    CHARGED_INSTANTIATE(phGraphExec, hGraph, real(phGraphExec, hGraph, instantiateParams));
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuGraphInstantiateWithParams_ptsz);
    CHARGED_INSTANTIATE(phGraphExec, hGraph, real(phGraphExec, hGraph, instantiateParams));
}

static void trim_device(CUdevice ordinal)
{
    gs_pfn_cuDeviceGraphMemTrim trim = GS_REAL_CU(cuDeviceGraphMemTrim);
    if (trim)
        trim(ordinal);
}

static void keep_orphan(const struct graph_alloc *a, struct gs_alloc_rec rec)
{
    struct orphan *o = malloc(sizeof *o);
    if (!o) {
        /* Out of host memory: keep the charge under the graph's key, so
         * it stays until the process exits (overcounts, never under). */
        gs_alloc_put(GS_ALLOC_GRAPH, a->dptr, rec, NULL, NULL);
        return;
    }
    *o = (struct orphan){ .dptr = a->dptr, .ordinal = a->ordinal, .rec = rec };
    pthread_mutex_lock(&execs_lock);
    o->next = orphans;
    orphans = o;
    __atomic_store_n(&have_orphans, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&execs_lock);
}

void gs_graph_mem_freed(CUdeviceptr dptr)
{
    if (GS_LIKELY(!__atomic_load_n(&have_orphans, __ATOMIC_ACQUIRE)))
        return;
    pthread_mutex_lock(&execs_lock);
    struct orphan **pp = &orphans;
    while (*pp && (*pp)->dptr != dptr)
        pp = &(*pp)->next;
    struct orphan *o = *pp;
    if (o)
        *pp = o->next;
    __atomic_store_n(&have_orphans, orphans != NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&execs_lock);
    if (!o)
        return;
    struct gs_region *r = gs_rt_region();
    if (r)
        gs_region_release(r, o->rec.slot, o->rec.dev, o->rec.bytes);
    trim_device(o->ordinal); /* back to the GPU, not kept in the graph pool */
    free(o);
}

static struct exec_allocs *take_exec(CUgraphExec exec)
{
    pthread_mutex_lock(&execs_lock);
    struct exec_allocs **pp = &execs;
    while (*pp && (*pp)->exec != exec)
        pp = &(*pp)->next;
    struct exec_allocs *e = *pp;
    if (e)
        *pp = e->next;
    pthread_mutex_unlock(&execs_lock);
    return e;
}

static void put_exec(struct exec_allocs *e)
{
    pthread_mutex_lock(&execs_lock);
    e->next = execs;
    execs = e;
    pthread_mutex_unlock(&execs_lock);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuGraphExecDestroy);
    if (gs_mode() == GS_MODE_PASSTHROUGH)
        return real(hGraphExec);
    gs_compute_graph_exec_destroyed(hGraphExec);
    struct exec_allocs *e = take_exec(hGraphExec);
    CUresult rc = real(hGraphExec);
    if (!e)
        return rc;
    if (rc != CUDA_SUCCESS) {
        put_exec(e);
        return rc;
    }
    gs_pfn_cuMemGetAddressRange_v2 range = GS_REAL_CU(cuMemGetAddressRange_v2);
    for (size_t i = 0; i < e->n; i++) {
        const struct graph_alloc *a = &e->a[i];
        CUdeviceptr base;
        size_t size;
        struct gs_alloc_rec rec;
        if (!a->freed_in_graph && range && range(&base, &size, a->dptr) == CUDA_SUCCESS &&
            gs_alloc_take(GS_ALLOC_GRAPH, a->dptr, &rec) == 0) {
            keep_orphan(a, rec); /* still live past its graph: its free releases it */
            continue;
        }
        gs_charge_release(GS_ALLOC_GRAPH, a->dptr);
    }
    /* The pool keeps freed graph memory for reuse; give it back to the GPU,
     * since it is no longer counted. */
    for (size_t i = 0; i < e->n; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= e->a[j].ordinal == e->a[i].ordinal;
        if (!seen && e->a[i].dev >= 0)
            trim_device(e->a[i].ordinal);
    }
    free(e->a);
    free(e);
    return rc;
}
