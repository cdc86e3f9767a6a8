/* List + watch of the node's pods (see podcache.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "annotation.h"
#include "assign_sig.h"
#include "podcache.h"

static void pod_clear(struct gs_pod *p)
{
    free(p->assignment);
    free(p->allocated);
    free(p->signature);
    memset(p, 0, sizeof *p);
}

/* A uid/gid field of a securityContext: a non-negative integer that fits
 * an id, else unset (the API server validates these; a bad value is not
 * trusted as an owner). */
static long long id_field(json_t *sc, const char *key)
{
    json_t *v = json_object_get(sc, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0x7fffffff)
        return GS_ID_UNSET;
    return (long long)json_integer_value(v);
}

static void security_from_json(json_t *spec, struct gs_pod *p)
{
    json_t *sc = json_object_get(spec, "securityContext");
    p->run_as_user = id_field(sc, "runAsUser");
    p->run_as_group = id_field(sc, "runAsGroup");
    p->fs_group = id_field(sc, "fsGroup");
    p->host_users_false = json_is_false(json_object_get(spec, "hostUsers"));
    static const char *const lists[] = { "initContainers", "containers" };
    int n = 0, overflow = 0;
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
        json_t *arr = json_object_get(spec, lists[l]);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            json_t *c = json_array_get(arr, i);
            const char *name = json_string_value(json_object_get(c, "name"));
            if (!name || strlen(name) >= sizeof p->containers[0].name)
                continue;
            if (n == GS_POD_MAX_CONTAINERS) {
                overflow = 1;
                break;
            }
            struct gs_pod_container *pc = &p->containers[n++];
            snprintf(pc->name, sizeof pc->name, "%s", name);
            json_t *csc = json_object_get(c, "securityContext");
            pc->run_as_user = id_field(csc, "runAsUser");
            pc->run_as_group = id_field(csc, "runAsGroup");
        }
    }
    p->ncontainers = overflow ? -1 : n; /* unknown: the caller falls back */
}

/* Fills p from a Pod object; returns -1 when it lacks an identity. */
static int pod_from_json(json_t *o, struct gs_pod *p)
{
    memset(p, 0, sizeof *p);
    json_t *md = json_object_get(o, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    const char *uid = json_string_value(json_object_get(md, "uid"));
    const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
    const char *created = json_string_value(json_object_get(md, "creationTimestamp"));
    if (!ns || !name || !uid || !*uid || strlen(uid) >= sizeof p->uid)
        return -1;
    snprintf(p->ns, sizeof p->ns, "%s", ns);
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->uid, sizeof p->uid, "%s", uid);
    snprintf(p->rv, sizeof p->rv, "%s", rv ? rv : "");
    snprintf(p->created, sizeof p->created, "%s", created ? created : "");
    const char *phase = json_string_value(json_object_get(json_object_get(o, "status"), "phase"));
    p->terminal = (phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0)) ||
                  json_object_get(md, "deletionTimestamp") != NULL;
    json_t *ann = json_object_get(md, "annotations");
    const char *a = json_string_value(json_object_get(ann, GS_ANN_ASSIGNMENT));
    const char *b = json_string_value(json_object_get(ann, GS_ANN_ALLOCATED));
    p->assignment = a ? strdup(a) : NULL;
    p->allocated = b ? strdup(b) : NULL;
    const char *sig = json_string_value(json_object_get(ann, GS_ANN_ASSIGNMENT_SIG));
    p->signature = sig ? strdup(sig) : NULL;
    security_from_json(json_object_get(o, "spec"), p);
    return 0;
}

/* A resourceVersion as a number, or 0 when it is not a plain decimal
 * (resourceVersions are opaque; etcd's are decimal counters). */
static unsigned long long rv_number(const char *rv)
{
    unsigned long long v = 0;
    if (!*rv || strlen(rv) > 19)
        return 0;
    for (; *rv; rv++) {
        if (*rv < '0' || *rv > '9')
            return 0;
        v = v * 10 + (unsigned long long)(*rv - '0');
    }
    return v;
}

static int cmp_rv(const void *x, const void *y)
{
    const struct gs_pod *a = x, *b = y;
    unsigned long long ra = rv_number(a->rv), rb = rv_number(b->rv);
    return (ra > rb) - (ra < rb);
}

static int find_uid(const struct gs_podcache *pc, const char *uid)
{
    for (int i = 0; i < pc->npods; i++)
        if (strcmp(pc->pods[i].uid, uid) == 0)
            return i;
    return -1;
}

/* Lock held. Takes ownership of p's strings. */
static void upsert_locked(struct gs_podcache *pc, struct gs_pod *p)
{
    int i = find_uid(pc, p->uid);
    if (i >= 0) {
        /* Never go back in time: a patch answer may race the watch. */
        if (pc->pods[i].rv[0] && p->rv[0] && strlen(p->rv) == strlen(pc->pods[i].rv) &&
            strcmp(p->rv, pc->pods[i].rv) < 0) {
            pod_clear(p);
            return;
        }
        p->bound_rv = pc->pods[i].bound_rv;
        p->bound_seq = pc->pods[i].bound_seq;
        pod_clear(&pc->pods[i]);
        pc->pods[i] = *p;
    } else {
        if (pc->npods == pc->cap) {
            int cap = pc->cap ? pc->cap * 2 : 64;
            struct gs_pod *np = realloc(pc->pods, (size_t)cap * sizeof *np);
            if (!np) {
                pod_clear(p);
                return;
            }
            pc->pods = np;
            pc->cap = cap;
        }
        if (!p->bound_seq) {
            p->bound_rv = rv_number(p->rv);
            p->bound_seq = ++pc->seq;
        }
        pc->pods[pc->npods++] = *p;
    }
    pc->version++;
}

/* Lock held. The watch has brought the cache up to rv. */
static void note_applied_locked(struct gs_podcache *pc, unsigned long long rv)
{
    if (rv > pc->applied_rv)
        pc->applied_rv = rv;
}

static void remove_locked(struct gs_podcache *pc, const char *uid)
{
    int i = find_uid(pc, uid);
    if (i < 0)
        return;
    pod_clear(&pc->pods[i]);
    pc->pods[i] = pc->pods[--pc->npods];
    pc->version++;
}

void gs_podcache_upsert_json(struct gs_podcache *pc, json_t *pod)
{
    struct gs_pod p;
    if (pod_from_json(pod, &p) != 0)
        return;
    pthread_mutex_lock(&pc->lock);
    upsert_locked(pc, &p);
    pthread_mutex_unlock(&pc->lock);
}

static char *pods_path(const struct gs_podcache *pc, const char *extra)
{
    char sel[300];
    snprintf(sel, sizeof sel, "spec.nodeName=%s", pc->node);
    char *enc = kube_urlencode(sel);
    if (!enc)
        return NULL;
    size_t n = strlen(enc) + strlen(extra) + 64;
    char *path = malloc(n);
    if (path)
        snprintf(path, n, "/api/v1/pods?fieldSelector=%s%s", enc, extra);
    free(enc);
    return path;
}

/* Lock held. Replaces the cache with the list's items, a list at
 * resourceVersion list_rv (0: not a decimal number). */
static void install_locked(struct gs_podcache *pc, json_t *items, unsigned long long list_rv)
{
    /* Pods already known keep when they were first seen bound; new ones
     * are numbered in resourceVersion order (a list is in key order). */
    struct gs_pod *old = pc->pods;
    int nold = pc->npods;
    pc->pods = NULL;
    pc->npods = pc->cap = 0;
    size_t nitems = json_array_size(items);
    struct gs_pod *fresh = calloc(nitems ? nitems : 1, sizeof *fresh);
    int nfresh = 0;
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        if (fresh && pod_from_json(it, &fresh[nfresh]) == 0)
            nfresh++;
    }
    for (int a = 0; a < nfresh; a++)
        for (int b = 0; b < nold; b++)
            if (strcmp(fresh[a].uid, old[b].uid) == 0) {
                fresh[a].bound_rv = old[b].bound_rv;
                fresh[a].bound_seq = old[b].bound_seq;
            }
    if (fresh)
        qsort(fresh, (size_t)nfresh, sizeof *fresh, cmp_rv);
    for (int a = 0; a < nfresh; a++)
        upsert_locked(pc, &fresh[a]);
    free(fresh);
    /* A pod written after the list's snapshot (a patch's answer) stays, in
     * its newer form: the list cannot know it. */
    for (int b = 0; b < nold; b++) {
        if (list_rv && rv_number(old[b].rv) > list_rv)
            upsert_locked(pc, &old[b]);
        else
            pod_clear(&old[b]);
    }
    free(old);
    if (list_rv)
        pc->applied_rv = list_rv;
    pc->version++;
    pc->synced = 1;
}

/* Lists; on success replaces the cache (unless the cache is as new already)
 * and copies the list's resourceVersion into rv. */
static int relist(struct gs_podcache *pc, char *rv, size_t rvlen)
{
    char err[512];
    char *path = pods_path(pc, "");
    if (!path)
        return -1;
    json_t *list = NULL;
    int st = kube_get_json(pc->kc, path, &list, err, sizeof err);
    free(path);
    if (st != 200 || !list) {
        kube_log(KUBE_LOG_WARN, "pod list failed: %s", err);
        json_decref(list);
        return -1;
    }
    json_t *items = json_object_get(list, "items");
    if (!json_is_array(items)) {
        kube_log(KUBE_LOG_WARN, "pod list: answer has no \"items\" array");
        json_decref(list);
        return -1;
    }
    const char *lrv = json_string_value(json_object_get(json_object_get(list, "metadata"), "resourceVersion"));
    unsigned long long list_rv = lrv ? rv_number(lrv) : 0;
    pthread_mutex_lock(&pc->lock);
    /* Another thread's list or the watch may have got further while this
     * list was on its way: installed, it would bring back pods deleted and
     * annotations changed since (an RPC's re-list on a miss races the watch
     * thread). */
    unsigned long long at = pc->applied_rv;
    int stale = list_rv && at >= list_rv;
    if (!stale)
        install_locked(pc, items, list_rv);
    pthread_mutex_unlock(&pc->lock);
    if (stale)
        kube_log(KUBE_LOG_INFO, "pod list at %s not installed: the cache is at %llu already", lrv, at);
    if (rv)
        snprintf(rv, rvlen, "%s", lrv ? lrv : "");
    json_decref(list);
    return 0;
}

int gs_podcache_relist(struct gs_podcache *pc)
{
    return relist(pc, NULL, 0);
}

struct watch_state {
    struct gs_podcache *pc;
    char rv[KUBE_RV_MAX];
    int expired;
    int events; /* in the current watch run */
};

static int on_event(const char *type, json_t *obj, void *ud)
{
    struct watch_state *w = ud;
    struct gs_podcache *pc = w->pc;
    if (strcmp(type, "ERROR") == 0) {
        json_t *code = json_object_get(obj, "code");
        kube_log(KUBE_LOG_INFO, "pod watch: server error %lld: %s", (long long)json_integer_value(code),
                 json_string_value(json_object_get(obj, "message")) ? json_string_value(json_object_get(obj, "message"))
                                                                    : "");
        w->expired = 1;
        return 1;
    }
    w->events++;
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (rv)
        snprintf(w->rv, sizeof w->rv, "%s", rv);
    unsigned long long event_rv = rv ? rv_number(rv) : 0;
    if (strcmp(type, "BOOKMARK") == 0) {
        pthread_mutex_lock(&pc->lock);
        note_applied_locked(pc, event_rv);
        pthread_mutex_unlock(&pc->lock);
        return 0;
    }
    struct gs_pod p;
    if (pod_from_json(obj, &p) != 0) {
        kube_log(KUBE_LOG_WARN, "pod watch: skipping an object without namespace/name/uid");
        return 0;
    }
    pthread_mutex_lock(&pc->lock);
    note_applied_locked(pc, event_rv);
    if (strcmp(type, "DELETED") == 0) {
        remove_locked(pc, p.uid);
        pod_clear(&p);
    } else {
        upsert_locked(pc, &p);
    }
    pthread_mutex_unlock(&pc->lock);
    return 0;
}

static void *cache_main(void *arg)
{
    struct gs_podcache *pc = arg;
    /* Re-lists and re-watches back off (with jitter) until a watch runs
     * healthily, so a failing API server is not flooded. */
    struct kube_backoff bo;
    kube_backoff_init(&bo, 200, 30000);
    struct watch_state w = { .pc = pc };
    while (!*pc->stop) {
        if (relist(pc, w.rv, sizeof w.rv) != 0) {
            kube_backoff_wait(&bo, pc->stop);
            continue;
        }
        while (!*pc->stop) {
            char extra[160], err[512];
            snprintf(extra, sizeof extra, "&watch=1&allowWatchBookmarks=true&timeoutSeconds=240&resourceVersion=%s",
                     w.rv);
            char *path = pods_path(pc, extra);
            if (!path)
                break;
            w.expired = 0;
            w.events = 0;
            long t0 = kube_monotonic_ms();
            int rc = kube_watch(pc->kc, path, on_event, &w, pc->stop, err, sizeof err);
            free(path);
            int healthy = KUBE_WATCH_HEALTHY(w.events, kube_monotonic_ms() - t0);
            if (healthy)
                kube_backoff_reset(&bo);
            if (rc != 0 && !w.expired)
                kube_log(KUBE_LOG_WARN, "pod watch: %s; listing again", err);
            if (!healthy)
                kube_backoff_wait(&bo, pc->stop);
            if (w.expired || rc != 0)
                break; /* 410 Gone and friends, or a failure: list again */
        }
    }
    return NULL;
}

int gs_podcache_start(struct gs_podcache *pc, struct kube_client *kc, const char *node, volatile int *stop)
{
    memset(pc, 0, sizeof *pc);
    pthread_mutex_init(&pc->lock, NULL);
    pc->kc = kc;
    pc->stop = stop;
    snprintf(pc->node, sizeof pc->node, "%s", node);
    return pthread_create(&pc->thread, NULL, cache_main, pc) == 0 ? 0 : -1;
}

void gs_podcache_join(struct gs_podcache *pc)
{
    pthread_join(pc->thread, NULL);
    for (int i = 0; i < pc->npods; i++)
        pod_clear(&pc->pods[i]);
    free(pc->pods);
    pc->pods = NULL;
    pc->npods = 0;
}

int gs_podcache_copy(struct gs_podcache *pc, struct gs_pod **out)
{
    pthread_mutex_lock(&pc->lock);
    int n = pc->npods;
    struct gs_pod *c = calloc((size_t)(n ? n : 1), sizeof *c);
    if (c) {
        for (int i = 0; i < n; i++) {
            c[i] = pc->pods[i];
            c[i].assignment = pc->pods[i].assignment ? strdup(pc->pods[i].assignment) : NULL;
            c[i].allocated = pc->pods[i].allocated ? strdup(pc->pods[i].allocated) : NULL;
            c[i].signature = pc->pods[i].signature ? strdup(pc->pods[i].signature) : NULL;
        }
    } else {
        n = 0;
    }
    pthread_mutex_unlock(&pc->lock);
    *out = c;
    return n;
}

void gs_podcache_free_copy(struct gs_pod *pods, int n)
{
    for (int i = 0; i < n; i++)
        pod_clear(&pods[i]);
    free(pods);
}
