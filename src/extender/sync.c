/* List+watch of nodes and pods into the usage cache. A full re-list replaces
 * the whole cache (so a restart and a 410 both rebuild from the API server's
 * truth); a watch that merely times out resumes from its last version.
 * Re-watches and re-lists back off (with jitter) until a watch runs
 * healthily, so a failing API server is not flooded. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ext.h"

struct watch_arg {
    struct ext_ctx *x;
    int node; /* 1 nodes, 0 pods */
    char rv[32];
    volatile int *stop;
    int failed;
    time_t last_gc;
    int events;  /* in the current watch run */
    int healthy; /* some run of this session was healthy */
};

static int on_event(const char *type, json_t *obj, void *ud)
{
    struct watch_arg *w = ud;
    if (strcmp(type, "ERROR") == 0) {
        w->failed = 1; /* 410 Gone and friends: re-list */
        return 1;
    }
    w->events++;
    if (strcmp(type, "BOOKMARK") != 0) {
        time_t now = time(NULL);
        pthread_mutex_lock(&w->x->st.mu);
        if (w->node)
            ext_state_node_event(&w->x->st, type, obj, now);
        else
            ext_state_pod_event(&w->x->st, type, obj, now);
        if (now - w->last_gc >= 10) {
            ext_state_gc(&w->x->st, now);
            w->last_gc = now;
        }
        pthread_mutex_unlock(&w->x->st.mu);
    }
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (rv)
        snprintf(w->rv, sizeof w->rv, "%s", rv);
    return 0;
}

static void *watch_thread(void *p)
{
    struct watch_arg *w = p;
    struct kube_backoff bo;
    kube_backoff_init(&bo, 200, 30000);
    while (!*w->stop && !w->x->stop) {
        char path[160], err[256];
        snprintf(path, sizeof path, "/api/v1/%s?watch=1&allowWatchBookmarks=true&timeoutSeconds=60&resourceVersion=%s",
                 w->node ? "nodes" : "pods", w->rv);
        w->events = 0;
        long t0 = kube_monotonic_ms();
        int rc = kube_watch(w->x->kc, path, on_event, w, w->stop, err, sizeof err);
        if (w->failed || rc != 0) {
            kube_log(KUBE_LOG_WARN, "watch %s ended (%s); re-listing", w->node ? "nodes" : "pods",
                     w->failed ? "expired" : err);
            w->failed = 1;
            *w->stop = 1;
        } else if (KUBE_WATCH_HEALTHY(w->events, kube_monotonic_ms() - t0)) {
            w->healthy = 1;
            kube_backoff_reset(&bo);
        } else {
            kube_backoff_wait(&bo, w->stop);
        }
    }
    return NULL;
}

/* Objects a page of a list asks for: a cluster's pods run to 5-15 KB each
 * with their managed fields, and one unpaged list of some thousands passed
 * the client's 64 MiB bound for good (the extender never became ready). */
#define LIST_PAGE 500

/* Lists one kind at path, page by page, into *out ({"items": [...]}) and
 * its resourceVersion (the first page's: the list's snapshot) into rv. */
static int list(struct ext_ctx *x, const char *path, json_t **out, char *rv, size_t rvlen)
{
    char err[256];
    json_t *all = json_array();
    char *cont = NULL; /* the continue token, URL-escaped */
    int rc = all ? 0 : -1;
    for (int page = 0; rc == 0; page++) {
        char *url = NULL;
        json_t *one = NULL;
        if (asprintf(&url, "%s?limit=%d%s%s", path, LIST_PAGE, cont ? "&continue=" : "", cont ? cont : "") < 0) {
            rc = -1;
            break;
        }
        int s = kube_get_json(x->kc, url, &one, err, sizeof err);
        free(url);
        if (s != 200) {
            kube_log(KUBE_LOG_ERROR, "list %s (page %d): %s", path, page + 1,
                     s == -2 ? "answer is not JSON"
                     : s < 0 ? err
                             : "failed");
            json_decref(one);
            rc = -1;
            break;
        }
        json_t *meta = json_object_get(one, "metadata");
        if (page == 0) {
            const char *v = json_string_value(json_object_get(meta, "resourceVersion"));
            snprintf(rv, rvlen, "%s", v ? v : "0");
        }
        json_t *items = json_object_get(one, "items");
        if (json_is_array(items) && json_array_extend(all, items) != 0)
            rc = -1;
        const char *next = json_string_value(json_object_get(meta, "continue"));
        int last = !next || !*next;
        curl_free(cont);
        cont = last ? NULL : curl_easy_escape(NULL, next, 0);
        json_decref(one); /* next is its: not read below */
        if (last)
            break;
        if (!cont)
            rc = -1;
    }
    curl_free(cont);
    if (rc == 0 && !(*out = json_pack("{s:o}", "items", all)))
        rc = -1;
    else if (rc != 0)
        json_decref(all);
    return rc;
}

static int relist(struct ext_ctx *x, char *nrv, char *prv)
{
    json_t *nodes = NULL, *pods = NULL;
    if (list(x, "/api/v1/nodes", &nodes, nrv, 32) != 0 || list(x, "/api/v1/pods", &pods, prv, 32) != 0) {
        json_decref(nodes);
        return -1;
    }
    time_t now = time(NULL);
    pthread_mutex_lock(&x->st.mu);
    ext_state_clear(&x->st);
    json_t *items = json_object_get(nodes, "items");
    for (size_t i = 0; i < json_array_size(items); i++)
        ext_state_node_event(&x->st, "ADDED", json_array_get(items, i), now);
    items = json_object_get(pods, "items");
    json_t *present = json_object();
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *pod = json_array_get(items, i);
        const char *uid = json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid"));
        if (uid)
            json_object_set_new(present, uid, json_true());
        ext_state_pod_event(&x->st, "ADDED", pod, now);
    }
    ext_state_forget_missing(&x->st, present, now);
    json_decref(present);
    /* Node claims were applied before the pods: apply them again so that
     * claims of assigned or gone pods stop counting twice. */
    items = json_object_get(nodes, "items");
    for (size_t i = 0; i < json_array_size(items); i++)
        ext_state_node_event(&x->st, "MODIFIED", json_array_get(items, i), now);
    pthread_mutex_unlock(&x->st.mu);
    kube_log(KUBE_LOG_INFO, "cache rebuilt: %zu nodes, %zu pods", json_array_size(json_object_get(nodes, "items")),
             json_array_size(json_object_get(pods, "items")));
    json_decref(nodes);
    json_decref(pods);
    return 0;
}

static void *sync_main(void *p)
{
    struct ext_ctx *x = p;
    struct kube_backoff bo;
    kube_backoff_init(&bo, 200, 30000);
    while (!x->stop) {
        char nrv[32], prv[32];
        if (relist(x, nrv, prv) != 0) {
            kube_backoff_wait(&bo, &x->stop);
            continue;
        }
        x->ready = 1;
        volatile int stop = 0;
        struct watch_arg wn = { x, 1, "", &stop, 0, 0, 0, 0 }, wp = { x, 0, "", &stop, 0, 0, 0, 0 };
        snprintf(wn.rv, sizeof wn.rv, "%s", nrv);
        snprintf(wp.rv, sizeof wp.rv, "%s", prv);
        pthread_t tn, tp;
        if (pthread_create(&tn, NULL, watch_thread, &wn) != 0)
            continue;
        if (pthread_create(&tp, NULL, watch_thread, &wp) != 0) {
            stop = 1;
            pthread_join(tn, NULL);
            continue;
        }
        while (!stop && !x->stop)
            usleep(100 * 1000);
        stop = 1;
        pthread_join(tn, NULL);
        pthread_join(tp, NULL);
        if (wn.healthy || wp.healthy)
            kube_backoff_reset(&bo);
        else
            kube_backoff_wait(&bo, &x->stop);
    }
    return NULL;
}

int ext_sync_start(struct ext_ctx *x)
{
    if (pthread_create(&x->sync_thread, NULL, sync_main, x) != 0)
        return -1;
    x->sync_started = 1;
    return 0;
}

void ext_sync_stop(struct ext_ctx *x)
{
    x->stop = 1;
    if (x->sync_started)
        pthread_join(x->sync_thread, NULL);
    x->sync_started = 0;
}
