/*
 * Graphs with memory nodes, modelled on the driver's rules (CUDA programming
 * guide, "Graph memory nodes"; driver API reference, cuGraphAddMemAllocNode):
 * - an allocation node gets its address when it is made; no memory yet;
 * - a graph with memory nodes has at most one executable graph at a time;
 * - launching it backs each allocation with physical memory (charged to the
 *   process) unless still backed from an earlier launch: the memory stays
 *   with the graph for its next launches, also after a free node, a
 *   cuMemFree/cuMemFreeAsync of the address or the executable graph's
 *   destruction, until cuDeviceGraphMemTrim gives back what no live
 *   allocation uses;
 * - an allocation the graph does not free stays live after the launch until
 *   cuMemFree/cuMemFreeAsync; launching again while it is live fails, and
 *   cuMemGetAddressRange resolves it while it is live;
 * - a graph moved into a parent as a child graph node (cuGraphAddNode,
 *   ownership MOVE; CUDA 12.9) keeps its memory nodes, which the parent's
 *   launches back; it is no longer instantiated or destroyed on its own.
 * Graphs and nodes are process-local, guarded by the state lock; the
 * physical memory is a SIM_KIND_GRAPH_PHYS allocation in the shared state.
 * The sim's other graphs (capture, gpusliceSimGraphCreate) have no nodes here.
 */
#include <string.h>

#include "sim_cuda.h"

#define GM_GRAPHS 32
#define GM_NODES 16

struct gm_node {
    CUgraphNodeType type;
    uint64_t dptr;
    uint64_t bytes;
    int dev;
    int freed_in_graph; /* alloc: a free node of this graph frees it */
    int live;           /* alloc: launched and not freed yet */
    uint64_t phys;      /* alloc: id of its GRAPH_PHYS backing, 0 if none */
    int child;          /* graph: the slot of the child graph moved into it */
};

struct gm_graph {
    int in_use;
    int destroyed; /* the graph is gone; its nodes remain while they hold memory */
    int has_exec;
    int moved; /* a child graph node's now: its parent owns it */
    int n;
    struct gm_node nodes[GM_NODES];
};

/* An executable graph is its graph's slot, seen through another address. */
static struct gm_graph graphs[GM_GRAPHS];
static char execs[GM_GRAPHS];

static struct gm_graph *graph_of(CUgraph g)
{
    uintptr_t p = (uintptr_t)g, b = (uintptr_t)graphs;
    if (p < b || p >= b + sizeof graphs || (p - b) % sizeof graphs[0])
        return NULL;
    struct gm_graph *gr = (struct gm_graph *)(void *)g;
    return gr->in_use && !gr->destroyed ? gr : NULL;
}

/* The child graphs a launch of g goes into, nested at most this deep. */
#define GM_NEST 4

/* Calls fn on every allocation node of g and of the children moved into it;
 * stops at the first non-zero answer and returns it. */
static int each_alloc(struct gm_graph *g, int depth, int (*fn)(struct gm_node *, void *), void *arg)
{
    for (int i = 0; i < g->n; i++) {
        struct gm_node *n = &g->nodes[i];
        int r = n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ? fn(n, arg)
                : n->type == CU_GRAPH_NODE_TYPE_GRAPH && depth < GM_NEST
                    ? each_alloc(&graphs[n->child], depth + 1, fn, arg)
                    : 0;
        if (r)
            return r;
    }
    return 0;
}

static struct gm_graph *exec_graph(CUgraphExec e)
{
    uintptr_t p = (uintptr_t)e, b = (uintptr_t)execs;
    if (p < b || p >= b + sizeof execs)
        return NULL;
    struct gm_graph *gr = &graphs[p - b];
    return gr->in_use && gr->has_exec ? gr : NULL;
}

static struct gm_node *node_of(CUgraphNode n)
{
    uintptr_t p = (uintptr_t)n, b = (uintptr_t)graphs;
    if (p < b || p >= b + sizeof graphs)
        return NULL;
    size_t gi = (p - b) / sizeof graphs[0];
    uintptr_t nb = (uintptr_t)graphs[gi].nodes;
    if (p < nb || (p - nb) % sizeof(struct gm_node) || (p - nb) / sizeof(struct gm_node) >= (size_t)graphs[gi].n)
        return NULL;
    return (struct gm_node *)(void *)n;
}

/* A graph slot is free again once destroyed, unexecuted and holding nothing. */
static void maybe_recycle(struct gm_graph *g)
{
    if (!g->destroyed || g->has_exec)
        return;
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].phys || g->nodes[i].live)
            return;
    memset(g, 0, sizeof *g);
}

static struct gm_node *live_alloc_at(uint64_t ptr, int containing)
{
    for (int g = 0; g < GM_GRAPHS; g++)
        for (int i = 0; graphs[g].in_use && i < graphs[g].n; i++) {
            struct gm_node *n = &graphs[g].nodes[i];
            if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && n->live &&
                (containing ? ptr >= n->dptr && ptr - n->dptr < n->bytes : ptr == n->dptr))
                return n;
        }
    return NULL;
}

int sim_graph_mem_free(struct sim_call *c, uint64_t ptr)
{
    (void)c;
    struct gm_node *n = live_alloc_at(ptr, 0);
    if (!n)
        return 0;
    n->live = 0; /* the memory stays backed, for the graph's next launch */
    for (int g = 0; g < GM_GRAPHS; g++)
        maybe_recycle(&graphs[g]);
    return 1;
}

int sim_graph_mem_range(struct sim_call *c, uint64_t ptr, uint64_t *base, uint64_t *size)
{
    (void)c;
    const struct gm_node *n = live_alloc_at(ptr, 1);
    if (!n)
        return 0;
    *base = n->dptr;
    *size = n->bytes;
    return 1;
}

int sim_graph_mem_owns(CUgraph g)
{
    return graph_of(g) != NULL;
}

SIM_API cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    if (!phGraph || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    for (int g = 0; g < GM_GRAPHS; g++)
        if (!graphs[g].in_use) {
            graphs[g] = (struct gm_graph){ .in_use = 1 };
            *phGraph = (CUgraph)(void *)&graphs[g];
            rc = CUDA_SUCCESS;
            break;
        }
    sim_leave(&c);
    return rc;
}

static CUresult add_node(struct gm_graph *g, struct gm_node n, CUgraphNode *out)
{
    if (g->has_exec || g->n >= GM_NODES)
        return CUDA_ERROR_INVALID_VALUE;
    g->nodes[g->n] = n;
    *out = (CUgraphNode)(void *)&g->nodes[g->n++];
    return CUDA_SUCCESS;
}

SIM_API cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                               size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    (void)dependencies;
    (void)numDependencies;
    if (!phGraphNode || !nodeParams || nodeParams->bytesize == 0 ||
        nodeParams->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        nodeParams->poolProps.handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
        nodeParams->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct gm_graph *g = graph_of(hGraph);
    int dev = sim_dev_phys(nodeParams->poolProps.location.id);
    struct sim_alloc *va = NULL;
    if (!g || dev < 0) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        /* The address is the node's for its lifetime: a reservation, no memory. */
        uint64_t span = sim_round_up(nodeParams->bytesize, SIM_GRANULE);
        rc = sim_alloc_new(&c, -1, dev, SIM_KIND_VA_RESERVE, span, 0, 0, &va);
        if (rc == CUDA_SUCCESS) {
            struct gm_node n = {
                .type = CU_GRAPH_NODE_TYPE_MEM_ALLOC, .dptr = va->va, .bytes = nodeParams->bytesize, .dev = dev
            };
            rc = add_node(g, n, phGraphNode);
            if (rc == CUDA_SUCCESS)
                nodeParams->dptr = va->va;
            else
                sim_alloc_drop(c.st, va);
        }
    }
    sim_leave(&c);
    return rc;
}

SIM_API cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                              size_t numDependencies, CUdeviceptr dptr)
{
    (void)dependencies;
    (void)numDependencies;
    if (!phGraphNode)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct gm_graph *g = graph_of(hGraph);
    struct gm_node *alloc = NULL;
    for (int i = 0; g && i < g->n; i++)
        if (g->nodes[i].type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && g->nodes[i].dptr == dptr)
            alloc = &g->nodes[i];
    /* Only an allocation of this graph, and only once (the sim's subset). */
    if (!alloc || alloc->freed_in_graph) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        rc = add_node(g, (struct gm_node){ .type = CU_GRAPH_NODE_TYPE_MEM_FREE, .dptr = dptr }, phGraphNode);
        if (rc == CUDA_SUCCESS)
            alloc->freed_in_graph = 1;
    }
    sim_leave(&c);
    return rc;
}

/* Whether inner is outer or is nested in it. */
static int holds(const struct gm_graph *outer, const struct gm_graph *inner, int depth)
{
    if (outer == inner)
        return 1;
    for (int i = 0; i < outer->n && depth < GM_NEST; i++)
        if (outer->nodes[i].type == CU_GRAPH_NODE_TYPE_GRAPH && holds(&graphs[outer->nodes[i].child], inner, depth + 1))
            return 1;
    return 0;
}

/* The sim's subset of the tagged-union API: a child graph moved into its
 * parent, memory nodes and all (CUDA 12.9), and a host node, which the
 * sim's graphs never run. */
SIM_API cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                       size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    (void)dependencies;
    (void)numDependencies;
    if (!phGraphNode || !nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    int host = nodeParams->type == CU_GRAPH_NODE_TYPE_HOST;
    if (!host && (nodeParams->type != CU_GRAPH_NODE_TYPE_GRAPH ||
                  nodeParams->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE))
        return CUDA_ERROR_NOT_SUPPORTED;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct gm_graph *parent = graph_of(hGraph), *child = host ? NULL : graph_of(nodeParams->graph.graph);
    if (host) {
        rc = parent ? add_node(parent, (struct gm_node){ .type = CU_GRAPH_NODE_TYPE_HOST }, phGraphNode)
                    : CUDA_ERROR_INVALID_VALUE;
    } else if (!parent || !child || child->moved || child->has_exec || holds(child, parent, 0)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        rc = add_node(parent, (struct gm_node){ .type = CU_GRAPH_NODE_TYPE_GRAPH, .child = (int)(child - graphs) },
                      phGraphNode);
        if (rc == CUDA_SUCCESS)
            child->moved = 1;
    }
    sim_leave(&c);
    return rc;
}

/* A copy of node hNode, read under the state lock, if it is of that type. */
static CUresult read_node(CUgraphNode hNode, CUgraphNodeType type, struct gm_node *out)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    const struct gm_node *n = node_of(hNode);
    if (n && n->type == type)
        *out = *n;
    else
        rc = CUDA_ERROR_INVALID_VALUE;
    sim_leave(&c);
    return rc;
}

SIM_API cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)
{
    struct gm_node n;
    CUresult rc = phGraph ? read_node(hNode, CU_GRAPH_NODE_TYPE_GRAPH, &n) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *phGraph = (CUgraph)(void *)&graphs[n.child];
    return rc;
}

SIM_API cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    if (!hGraph || !numNodes)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct gm_graph *g = graph_of(hGraph);
    size_t n = g ? (size_t)g->n : 0; /* the sim's other graphs have no nodes to show */
    for (size_t i = 0; nodes && i < *numNodes; i++)
        nodes[i] = i < n ? (CUgraphNode)(void *)&g->nodes[i] : NULL;
    *numNodes = n;
    sim_leave(&c);
    return CUDA_SUCCESS;
}

SIM_API cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    if (!type)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    const struct gm_node *n = node_of(hNode);
    if (n)
        *type = n->type;
    sim_leave(&c);
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    struct gm_node n;
    CUresult rc = params_out ? read_node(hNode, CU_GRAPH_NODE_TYPE_MEM_ALLOC, &n) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        memset(params_out, 0, sizeof *params_out);
        params_out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        params_out->poolProps.location =
            (CUmemLocation){ .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = sim_dev_ordinal(n.dev) };
        params_out->bytesize = n.bytes;
        params_out->dptr = n.dptr;
    }
    return rc;
}

SIM_API cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
    struct gm_node n;
    CUresult rc = dptr_out ? read_node(hNode, CU_GRAPH_NODE_TYPE_MEM_FREE, &n) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *dptr_out = n.dptr;
    return rc;
}

CUresult sim_graph_mem_instantiate(CUgraphExec *out, CUgraph hGraph)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct gm_graph *g = graph_of(hGraph);
    if (!g || g->has_exec || g->moved) { /* one executable graph at a time, of a graph of its own */
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        g->has_exec = 1;
        *out = (CUgraphExec)(void *)&execs[g - graphs];
    }
    sim_leave(&c);
    return rc;
}

/* The older instantiation ABIs: the sim has no diagnostics to report. */
SIM_API cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                           size_t bufferSize)
{
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = 0;
    return cuGraphInstantiateWithFlags(phGraphExec, hGraph, 0);
}

SIM_API cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                              size_t bufferSize)
{
    return cuGraphInstantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

static int still_live(struct gm_node *n, void *arg)
{
    (void)arg;
    return n->live;
}

/* Backs n with physical memory unless it still is: a CUresult. */
static int back(struct gm_node *n, void *arg)
{
    struct sim_alloc *phys = NULL;
    if (n->phys)
        return CUDA_SUCCESS;
    CUresult rc = sim_alloc_new(arg, -1, n->dev, SIM_KIND_GRAPH_PHYS, n->bytes, 0, 0, &phys);
    if (rc == CUDA_SUCCESS) {
        phys->va = n->dptr;
        n->phys = phys->id;
    }
    return (int)rc;
}

static int make_live(struct gm_node *n, void *arg)
{
    (void)arg;
    n->live = !n->freed_in_graph;
    return 0;
}

int sim_graph_mem_launch(CUgraphExec e, CUresult *rc)
{
    struct sim_call c;
    if (sim_enter(&c) != CUDA_SUCCESS)
        return 0;
    struct gm_graph *g = exec_graph(e);
    if (!g) {
        sim_leave(&c);
        return 0;
    }
    *rc = each_alloc(g, 0, still_live, NULL) ? CUDA_ERROR_INVALID_VALUE /* last launch's not freed yet */
                                             : (CUresult)each_alloc(g, 0, back, &c);
    if (*rc == CUDA_SUCCESS)
        each_alloc(g, 0, make_live, NULL);
    sim_leave(&c);
    return 1;
}

SIM_API cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct gm_graph *g = exec_graph(hGraphExec);
    if (g) { /* the memory stays in the pool; live allocations stay live */
        g->has_exec = 0;
        maybe_recycle(g);
    }
    /* The sim's other executable graphs own nothing to destroy. */
    sim_leave(&c);
    return hGraphExec ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* g and the children moved into it. */
static void destroy_graph(struct gm_graph *g, int depth)
{
    g->destroyed = 1;
    for (int i = 0; i < g->n && depth < GM_NEST; i++)
        if (g->nodes[i].type == CU_GRAPH_NODE_TYPE_GRAPH)
            destroy_graph(&graphs[g->nodes[i].child], depth + 1);
    maybe_recycle(g);
}

SIM_API cuGraphDestroy(CUgraph hGraph)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct gm_graph *g = graph_of(hGraph);
    if (g && g->moved) { /* its parent owns it now */
        sim_leave(&c);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (g) /* an executable graph of it lives on; so does live memory */
        destroy_graph(g, 0);
    sim_leave(&c);
    return hGraph ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API cuDeviceGraphMemTrim(CUdevice device)
{
    struct sim_call c;
    CUresult rc = sim_enter(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    device = sim_dev_phys(device);
    if (device < 0) {
        sim_leave(&c);
        return CUDA_ERROR_INVALID_DEVICE;
    }
    /* Launches finish at once in the sim: no memory is in use by a running
     * graph, so all that no live allocation holds goes back. */
    for (int g = 0; g < GM_GRAPHS; g++) {
        for (int i = 0; graphs[g].in_use && i < graphs[g].n; i++) {
            struct gm_node *n = &graphs[g].nodes[i];
            if (n->phys && !n->live && n->dev == device) {
                struct sim_alloc *phys = sim_alloc_by_id(c.st, n->phys);
                if (phys)
                    sim_alloc_drop(c.st, phys);
                n->phys = 0;
            }
        }
        if (graphs[g].in_use)
            maybe_recycle(&graphs[g]);
    }
    sim_leave(&c);
    return CUDA_SUCCESS;
}
