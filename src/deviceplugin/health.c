/*
 * GPU health from NVML XID events. Critical XIDs mark a GPU unhealthy (it
 * leaves ListAndWatch as "Unhealthy"); benign ones, which an application
 * causes by itself (13 graphics engine exception, 31 memory page fault,
 * 43 GPU stopped processing, 45 preemptive cleanup, 68 video processor
 * exception, by default), are only logged. A GPU comes back after
 * recovery_s seconds without a critical XID, once NVML answers for it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inventory.h"
#include "kube_client.h"
#include "nvml_fns.h"

struct health_ctx {
    struct gs_inventory *inv;
    struct gs_health_opts opts;
    volatile int *stop;
    void *set;
};

static int ignored(const struct gs_health_opts *o, unsigned long long xid)
{
    for (int i = 0; i < o->nignore; i++)
        if (o->ignore[i] == xid)
            return 1;
    return 0;
}

static void recover(struct health_ctx *h)
{
    time_t now = time(NULL);
    struct gs_inventory *inv = h->inv;
    pthread_mutex_lock(&inv->lock);
    for (int i = 0; i < inv->ngpus; i++) {
        struct gs_nvml_gpu *g = &inv->gpus[i];
        struct gs_nvml_memory m;
        if (g->healthy || now - g->last_bad < h->opts.recovery_s || !g->handle ||
            g_nvml.nvmlDeviceGetMemoryInfo(g->handle, &m) != 0)
            continue;
        g->healthy = 1;
        inv->generation++;
        kube_log(KUBE_LOG_INFO, "GPU %s: healthy again (no critical XID for %d s)", g->uuid, h->opts.recovery_s);
    }
    pthread_mutex_unlock(&inv->lock);
}

static void *health_main(void *arg)
{
    struct health_ctx *h = arg;
    struct gs_inventory *inv = h->inv;
    while (!*h->stop) {
        struct gs_nvml_event ev;
        memset(&ev, 0, sizeof ev);
        int rc = h->set ? g_nvml.nvmlEventSetWait_v2(h->set, &ev, 200) : GS_NVML_ERROR_TIMEOUT;
        if (!h->set) {
            struct timespec ts = { 0, 200000000L };
            nanosleep(&ts, NULL);
        }
        if (rc == 0 && (ev.type & GS_NVML_EVENT_XID)) {
            pthread_mutex_lock(&inv->lock);
            for (int i = 0; i < inv->ngpus; i++) {
                struct gs_nvml_gpu *g = &inv->gpus[i];
                if (g->handle != ev.device)
                    continue;
                if (ignored(&h->opts, ev.data)) {
                    kube_log(KUBE_LOG_INFO, "GPU %s: XID %llu (application error; health unchanged)", g->uuid, ev.data);
                    break;
                }
                g->last_xid = ev.data;
                g->last_bad = time(NULL);
                if (g->healthy) {
                    g->healthy = 0;
                    inv->generation++;
                }
                kube_log(KUBE_LOG_WARN, "GPU %s: critical XID %llu: marked unhealthy", g->uuid, ev.data);
                break;
            }
            pthread_mutex_unlock(&inv->lock);
        } else if (rc != 0 && rc != GS_NVML_ERROR_TIMEOUT) {
            kube_log(KUBE_LOG_WARN, "nvmlEventSetWait_v2: %s",
                     g_nvml.nvmlErrorString ? g_nvml.nvmlErrorString(rc) : "error");
            struct timespec ts = { 0, 200000000L };
            nanosleep(&ts, NULL);
        }
        recover(h);
    }
    if (h->set)
        g_nvml.nvmlEventSetFree(h->set);
    free(h);
    return NULL;
}

int gs_health_start(struct gs_inventory *inv, const struct gs_health_opts *opts, volatile int *stop, pthread_t *thread)
{
    struct health_ctx *h = calloc(1, sizeof *h);
    if (!h)
        return -1;
    h->inv = inv;
    h->opts = *opts;
    h->stop = stop;
    if (inv->ngpus > 0 && g_nvml.nvmlEventSetCreate && g_nvml.nvmlDeviceRegisterEvents && g_nvml.nvmlEventSetWait_v2 &&
        g_nvml.nvmlEventSetCreate(&h->set) == 0) {
        int registered = 0;
        for (int i = 0; i < inv->ngpus; i++)
            if (g_nvml.nvmlDeviceRegisterEvents(inv->gpus[i].handle, GS_NVML_EVENT_XID, h->set) == 0)
                registered++;
            else
                kube_log(KUBE_LOG_WARN, "GPU %s: XID events not supported; health from NVML queries only",
                         inv->gpus[i].uuid);
        if (!registered) {
            g_nvml.nvmlEventSetFree(h->set);
            h->set = NULL;
        }
    } else if (inv->ngpus > 0) {
        kube_log(KUBE_LOG_WARN, "NVML events unavailable; XID health checks off");
    }
    if (pthread_create(thread, NULL, health_main, h) != 0) {
        if (h->set)
            g_nvml.nvmlEventSetFree(h->set);
        free(h);
        return -1;
    }
    return 0;
}
