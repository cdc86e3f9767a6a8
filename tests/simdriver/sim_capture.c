/* Stream capture in the simulated driver: see sim_capture.h. */
#include "sim_capture.h"

#include <pthread.h>

#define MAX_CAPTURES 64

enum { MODE_GLOBAL = 0, MODE_THREAD_LOCAL = 1, MODE_RELAXED = 2 };

struct capture {
    CUstream s; /* NULL: free slot */
    int status; /* 1 active, 2 invalidated */
    int mode;
    pthread_t thread;
    struct sim_graph_body body;
};

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct capture caps[MAX_CAPTURES];

static struct capture *find(CUstream s)
{
    if (!s)
        return NULL;
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (caps[i].s == s)
            return &caps[i];
    return NULL;
}

int sim_capture_status(CUstream s)
{
    pthread_mutex_lock(&cap_lock);
    const struct capture *c = find(s);
    int st = c ? c->status : 0;
    pthread_mutex_unlock(&cap_lock);
    return st;
}

/* Records a launch in body: kernel work joins the open part; a collective
 * closes it. */
static void record(struct sim_graph_body *b, uint64_t ns, const struct sim_graph_part *coll)
{
    if (b->n == 0)
        b->n = 1;
    struct sim_graph_part *p = &b->part[b->n - 1];
    if (!coll || b->n == SIM_GRAPH_PARTS) {
        p->ns += ns;
        return;
    }
    p->coll_ns = ns;
    p->ranks = coll->ranks;
    p->group = coll->group;
    b->n++;
}

int sim_capture_launch(CUstream s, uint64_t ns, const struct sim_graph_part *coll, CUresult *rc)
{
    pthread_mutex_lock(&cap_lock);
    struct capture *c = find(s);
    if (c) {
        *rc = c->status == 1 ? CUDA_SUCCESS : SIM_ERR_CAPTURE_INVALIDATED;
        if (c->status == 1)
            record(&c->body, ns, coll);
    }
    pthread_mutex_unlock(&cap_lock);
    return c != NULL;
}

void sim_capture_invalidate(CUstream s)
{
    pthread_mutex_lock(&cap_lock);
    struct capture *c = find(s);
    if (c)
        c->status = 2;
    pthread_mutex_unlock(&cap_lock);
}

CUresult sim_capture_unsafe(CUstream s)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&cap_lock);
    struct capture *c = find(s);
    if (c) {
        c->status = 2;
        rc = SIM_ERR_CAPTURE_UNSUPPORTED;
    }
    pthread_t self = pthread_self();
    for (int i = 0; i < MAX_CAPTURES; i++) {
        struct capture *o = &caps[i];
        if (!o->s || o->status != 1)
            continue;
        if (o->mode == MODE_GLOBAL || (o->mode == MODE_THREAD_LOCAL && pthread_equal(o->thread, self))) {
            o->status = 2;
            rc = SIM_ERR_CAPTURE_UNSUPPORTED;
        }
    }
    pthread_mutex_unlock(&cap_lock);
    return rc;
}

static CUresult begin(CUstream s, int mode)
{
    if (!sim_initialized_state())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (mode < MODE_GLOBAL || mode > MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    /* the legacy and per-thread default streams cannot be captured here */
    if (s == NULL || s == (CUstream)(uintptr_t)1 || s == (CUstream)(uintptr_t)2)
        return SIM_ERR_CAPTURE_UNSUPPORTED;
    if (!sim_stream_valid(s))
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&cap_lock);
    if (find(s)) {
        rc = SIM_ERR_ILLEGAL_STATE;
    } else {
        for (int i = 0; i < MAX_CAPTURES; i++)
            if (!caps[i].s) {
                caps[i] = (struct capture){ .s = s, .status = 1, .mode = mode, .thread = pthread_self() };
                rc = CUDA_SUCCESS;
                break;
            }
    }
    pthread_mutex_unlock(&cap_lock);
    return rc;
}

SIM_API cuStreamBeginCapture(CUstream hStream)
{
    return begin(hStream, MODE_GLOBAL);
}

SIM_API cuStreamBeginCapture_ptsz(CUstream hStream)
{
    return begin(hStream, MODE_GLOBAL);
}

SIM_API cuStreamBeginCapture_v2(CUstream hStream, int mode)
{
    return begin(hStream, mode);
}

SIM_API cuStreamBeginCapture_v2_ptsz(CUstream hStream, int mode)
{
    return begin(hStream, mode);
}

static CUresult end(CUstream s, CUgraph *g)
{
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    *g = NULL;
    pthread_mutex_lock(&cap_lock);
    struct capture *c = find(s);
    struct capture done = c ? *c : (struct capture){ 0 };
    if (c)
        *c = (struct capture){ 0 };
    pthread_mutex_unlock(&cap_lock);
    if (!done.s)
        return SIM_ERR_ILLEGAL_STATE;
    if (done.status != 1)
        return SIM_ERR_CAPTURE_INVALIDATED;
    CUgraphExec e = NULL;
    CUresult rc = sim_graph_of_body(&e, &done.body);
    if (rc == CUDA_SUCCESS)
        *g = (CUgraph)(void *)e;
    return rc;
}

SIM_API cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return end(hStream, phGraph);
}

SIM_API cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return end(hStream, phGraph);
}

static CUresult is_capturing(CUstream s, int *status)
{
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_stream_valid(s))
        return CUDA_ERROR_INVALID_HANDLE;
    *status = sim_capture_status(s);
    return CUDA_SUCCESS;
}

SIM_API cuStreamIsCapturing(CUstream hStream, int *captureStatus)
{
    return is_capturing(hStream, captureStatus);
}

SIM_API cuStreamIsCapturing_ptsz(CUstream hStream, int *captureStatus)
{
    return is_capturing(hStream, captureStatus);
}

SIM_API cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    (void)flags;
    if (!phGraphExec || !hGraph)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_graph_mem_owns(hGraph))
        return sim_graph_mem_instantiate(phGraphExec, hGraph);
    *phGraphExec = (CUgraphExec)(void *)hGraph;
    return CUDA_SUCCESS;
}

/* The sim keeps no graph topology: capturing "to" a graph is a capture. */
SIM_API cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const void *dependencies,
                                    const void *dependencyData, size_t numDependencies, int mode)
{
    (void)dependencies;
    (void)dependencyData;
    (void)numDependencies;
    if (!hGraph)
        return CUDA_ERROR_INVALID_VALUE;
    return begin(hStream, mode);
}

SIM_API cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const void *dependencies,
                                         const void *dependencyData, size_t numDependencies, int mode)
{
    return cuStreamBeginCaptureToGraph(hStream, hGraph, dependencies, dependencyData, numDependencies, mode);
}
