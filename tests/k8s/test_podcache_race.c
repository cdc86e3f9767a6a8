/* The node agent's pod cache (src/deviceplugin/podcache.c) when a re-list
 * on an RPC thread (Allocate's or PreStartContainer's miss) races the watch
 * thread: the API client is replaced by scripted answers, so each order of
 * events is played exactly, not hoped for. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube_client.h"
#include "podcache.h"
#include "check.h"

/* ---- the scripted API server ---- */

static pthread_mutex_t script_mu = PTHREAD_MUTEX_INITIALIZER;
static json_t *next_list;      /* the next list's answer */
static kube_watch_cb watch_cb; /* the running watch's callback ... */
static void *watch_ud;         /* ... and its state */
static json_t *during_list;    /* an event the watch delivers while a list is on its way */
static volatile int watch_running;

static json_t *pod(const char *name, const char *rv, const char *allocated)
{
    json_t *ann = json_pack("{s:s}", "gpuslice.io/assignment", "0:50%");
    if (allocated)
        json_object_set_new(ann, "gpuslice.io/allocated", json_string(allocated));
    return json_pack("{s:{s:s,s:s,s:s,s:s,s:o},s:{s:s},s:{}}", "metadata", "namespace", "default", "name", name, "uid",
                     name, "resourceVersion", rv, "annotations", ann, "spec", "nodeName", "n1", "status");
}

static json_t *list_of(const char *rv, json_t *a, json_t *b)
{
    json_t *items = json_array();
    if (a)
        json_array_append_new(items, a);
    if (b)
        json_array_append_new(items, b);
    return json_pack("{s:{s:s},s:o}", "metadata", "resourceVersion", rv, "items", items);
}

int kube_get_json(struct kube_client *kc, const char *path, json_t **out, char *err, size_t errlen)
{
    (void)kc;
    (void)path;
    pthread_mutex_lock(&script_mu);
    json_t *answer = next_list ? json_incref(next_list) : list_of("1", NULL, NULL);
    json_t *event = during_list;
    during_list = NULL;
    kube_watch_cb cb = watch_cb;
    void *ud = watch_ud;
    pthread_mutex_unlock(&script_mu);
    if (event && cb) { /* the list's snapshot is taken; the watch goes on */
        cb(json_string_value(json_object_get(event, "type")), json_object_get(event, "object"), ud);
        json_decref(event);
    }
    snprintf(err, errlen, "ok");
    *out = answer;
    return 200;
}

int kube_watch(struct kube_client *kc, const char *path, kube_watch_cb cb, void *ud, volatile int *stop, char *err,
               size_t errlen)
{
    (void)kc;
    (void)path;
    (void)err;
    (void)errlen;
    pthread_mutex_lock(&script_mu);
    watch_cb = cb;
    watch_ud = ud;
    pthread_mutex_unlock(&script_mu);
    watch_running = 1;
    while (!*stop)
        usleep(1000);
    return 0;
}

char *kube_urlencode(const char *s)
{
    return strdup(s);
}

/* ---- helpers ---- */

static void set_list(json_t *l)
{
    pthread_mutex_lock(&script_mu);
    json_decref(next_list);
    next_list = l;
    pthread_mutex_unlock(&script_mu);
}

static void set_event_during_list(const char *type, json_t *object)
{
    pthread_mutex_lock(&script_mu);
    during_list = json_pack("{s:s,s:o}", "type", type, "object", object);
    pthread_mutex_unlock(&script_mu);
}

/* The cached pod name's gpuslice.io/allocated ("" when none), or NULL when
 * the cache lacks it. */
static char *cached(struct gs_podcache *pc, const char *name)
{
    struct gs_pod *pods;
    int n = gs_podcache_copy(pc, &pods);
    char *found = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(pods[i].name, name) == 0)
            found = strdup(pods[i].allocated ? pods[i].allocated : "");
    gs_podcache_free_copy(pods, n);
    return found;
}

int main(void)
{
    static volatile int stop;
    static struct gs_podcache pc;
    set_list(list_of("98", pod("a", "90", NULL), pod("b", "95", NULL)));
    CHECK(gs_podcache_start(&pc, NULL, "n1", &stop) == 0);
    for (int i = 0; i < 5000 && !watch_running; i++)
        usleep(1000);
    CHECK(watch_running);
    char *a = cached(&pc, "a");
    CHECK(a != NULL);
    free(a);

    /* Pod a is deleted (rv 105) while an RPC's list, snapshot at rv 100,
     * is on its way: the list must not bring a back. */
    set_list(list_of("100", pod("a", "90", NULL), pod("b", "95", NULL)));
    set_event_during_list("DELETED", pod("a", "105", NULL));
    CHECK(gs_podcache_relist(&pc) == 0);
    a = cached(&pc, "a");
    CHECK(a == NULL);
    free(a);
    char *b = cached(&pc, "b");
    CHECK(b != NULL);
    free(b);

    /* The agent pins b by a patch (the answer, rv 120, goes into the
     * cache); a list snapshot at rv 110 must not take the pin away. */
    json_t *pinned = pod("b", "120", "GPU-x");
    gs_podcache_upsert_json(&pc, pinned);
    json_decref(pinned);
    set_list(list_of("110", pod("b", "95", NULL), pod("c", "108", NULL)));
    CHECK(gs_podcache_relist(&pc) == 0);
    b = cached(&pc, "b");
    CHECK(b && strcmp(b, "GPU-x") == 0);
    free(b);
    char *c = cached(&pc, "c");
    CHECK(c != NULL); /* what the list has and the cache lacked is taken */
    free(c);

    /* A newer list is the truth: what it lacks goes. */
    set_list(list_of("130", pod("b", "125", "GPU-x"), NULL));
    CHECK(gs_podcache_relist(&pc) == 0);
    c = cached(&pc, "c");
    CHECK(c == NULL);
    free(c);

    stop = 1;
    gs_podcache_join(&pc);
    set_list(NULL);
    return check_result("podcache race");
}
