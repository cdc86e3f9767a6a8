/*
 * Open stream captures of the process, and the handshake between a capture
 * beginning and a thread that synchronises (compute_capture.h).
 */
#include "compute_capture.h"
#include "compute_graphs.h"
#include "real_driver.h"

#include <pthread.h>
#include <time.h>

/* Open stream captures of the process: the streams Begin*Capture succeeded
 * on and EndCapture has not yet ended (untracked beyond MAX_CAPTURES: counted
 * only), plus captures about to begin. While any is open the limiter stays
 * out of the way. A thread that synchronises or queries (closing a window)
 * holds cap_busy; a capture begins only once no thread holds it, and a
 * thread takes it only while no capture is open (both sides announce
 * themselves first, seq_cst, so at least one sees the other). */
#define MAX_CAPTURES 32
#define CAPTURE_INVALIDATED 901
struct open_capture {
    CUstream s;
    int collective; /* a collective was launched while it was open */
};
static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct open_capture cap[MAX_CAPTURES];
static int cap_tracked, cap_untracked;
static int cap_open; /* open + beginning captures; atomic */
static int cap_busy; /* threads inside a drain or event query; atomic */

int gs_compute_capturing(void)
{
    return __atomic_load_n(&cap_open, __ATOMIC_SEQ_CST);
}

/* Takes cap_busy unless a capture is open (returns 0 then). */
int gs_compute_sync_enter(void)
{
    __atomic_add_fetch(&cap_busy, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&cap_open, __ATOMIC_SEQ_CST) == 0)
        return 1;
    __atomic_sub_fetch(&cap_busy, 1, __ATOMIC_SEQ_CST);
    return 0;
}

void gs_compute_sync_leave(void)
{
    __atomic_sub_fetch(&cap_busy, 1, __ATOMIC_SEQ_CST);
}

void gs_compute_capture_prepare(void)
{
    __atomic_add_fetch(&cap_open, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&cap_busy, __ATOMIC_SEQ_CST) != 0) {
        struct timespec ts = { 0, 20000 };
        nanosleep(&ts, NULL);
    }
}

void gs_compute_capture_begun(CUstream s, CUresult rc)
{
    pthread_mutex_lock(&cap_lock);
    int i = 0;
    while (i < cap_tracked && cap[i].s != s)
        i++;
    int keep = rc == CUDA_SUCCESS && i == cap_tracked; /* a new open capture keeps prepare's count */
    if (keep) {
        if (cap_tracked < MAX_CAPTURES)
            cap[cap_tracked++] = (struct open_capture){ .s = s };
        else
            cap_untracked++;
    }
    pthread_mutex_unlock(&cap_lock);
    if (!keep)
        __atomic_sub_fetch(&cap_open, 1, __ATOMIC_SEQ_CST);
}

void gs_compute_capture_saw_collective(void)
{
    pthread_mutex_lock(&cap_lock);
    for (int i = 0; i < cap_tracked; i++)
        cap[i].collective = 1;
    pthread_mutex_unlock(&cap_lock);
}

void gs_compute_capture_ended(CUstream s, CUresult rc, void *graph)
{
    /* Ended unless the stream says it is still capturing (EndCapture from
     * the wrong thread, say); without cuStreamIsCapturing, by the result. */
    gs_pfn_cuStreamIsCapturing is = GS_REAL_CU(cuStreamIsCapturing);
    int status = 0;
    int ended =
        is && is(s, &status) == CUDA_SUCCESS ? status == 0 : rc == CUDA_SUCCESS || (int)rc == CAPTURE_INVALIDATED;
    if (!ended)
        return;
    pthread_mutex_lock(&cap_lock);
    int i = 0, gone = 1, collective = 0;
    while (i < cap_tracked && cap[i].s != s)
        i++;
    if (i < cap_tracked) {
        collective = cap[i].collective;
        cap[i] = cap[--cap_tracked];
    } else if (cap_untracked > 0)
        cap_untracked--;
    else
        gone = 0; /* never seen begin: nothing to count down */
    pthread_mutex_unlock(&cap_lock);
    if (collective && rc == CUDA_SUCCESS && graph)
        gs_compute_graph_holds_collective((CUgraph)graph);
    if (gone)
        __atomic_sub_fetch(&cap_open, 1, __ATOMIC_SEQ_CST);
}

/* (The legacy stream cannot be asked while another stream captures: that
 * counts as capturing.) */
int gs_compute_stream_capturing(CUstream s)
{
    gs_pfn_cuStreamIsCapturing is = GS_REAL_CU(cuStreamIsCapturing);
    int status = 0;
    if (!is)
        return 0;
    return is(s, &status) != CUDA_SUCCESS || status != 0;
}
