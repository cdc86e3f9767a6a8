/* See pod_record.h. */
#include "pod_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "annotation.h"

struct record {
    const struct gs_pod *pod;
    const char *text; /* the allocated annotation's value */
};

/* The first write uses the version the pod was matched at; after a
 * conflict, only a pod that still carries the assignment we matched. */
static json_t *allocated_annotation(json_t *cur, int attempt, void *ud, char rv[KUBE_RV_MAX], char *why, size_t whylen)
{
    const struct record *r = ud;
    if (attempt == 0) {
        snprintf(rv, 64, "%s", r->pod->rv);
    } else {
        const char *as = json_string_value(
            json_object_get(json_object_get(json_object_get(cur, "metadata"), "annotations"), GS_ANN_ASSIGNMENT));
        if (!as || !r->pod->assignment || strcmp(as, r->pod->assignment) != 0) {
            snprintf(why, whylen, "assignment changed during PreStartContainer; not recording");
            return NULL;
        }
        kube_log(KUBE_LOG_INFO, "pod %s/%s: 409 conflict recording the allocation; retrying", r->pod->ns, r->pod->name);
    }
    return json_pack("{s:s}", GS_ANN_ALLOCATED, r->text);
}

int gs_record_allocated(struct kube_client *kc, struct gs_podcache *pc, const char *node, const struct gs_pod *pod,
                        char *const *ids, size_t n)
{
    json_t *reps = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(reps, json_string(ids[i]));
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *val = json_pack("{s:i,s:s,s:o,s:s}", "v", GS_ANN_VERSION, "node", node, "replicas", reps, "time", ts);
    char *text = json_dumps(val, JSON_COMPACT);
    json_decref(val);
    if (!text)
        return -1;
    char path[512], err[512];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", pod->ns, pod->name);
    struct record r = { pod, text };
    json_t *res = NULL;
    int st = kube_annotate_retry(kc, path, NULL, 5, allocated_annotation, &r, &res, err, sizeof err);
    free(text);
    if (st >= 200 && st < 300) {
        gs_podcache_upsert_json(pc, res);
        json_decref(res);
        return 0;
    }
    kube_log(KUBE_LOG_ERROR, "pod %s/%s: cannot record %s: %s", pod->ns, pod->name, GS_ANN_ALLOCATED, err);
    return -1;
}
