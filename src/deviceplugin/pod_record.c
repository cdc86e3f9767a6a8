/* See pod_record.h. */
#include "pod_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "annotation.h"

/* Records the allocation on the pod: a merge patch conditional on the
 * resourceVersion we matched, re-checked and retried on 409. */
int gs_record_allocated(struct kube_client *kc, struct gs_podcache *pc, const char *node,
                        const struct gs_pod *pod, char *const *ids, size_t n)
{
    int rc = -1;
    json_t *reps = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(reps, json_string(ids[i]));
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *val = json_pack("{s:i,s:s,s:o,s:s}", "v", GS_ANN_VERSION, "node", node,
                            "replicas", reps, "time", ts);
    char *text = json_dumps(val, JSON_COMPACT);
    json_decref(val);
    char path[512], rv[32];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", pod->ns, pod->name);
    snprintf(rv, sizeof rv, "%s", pod->rv);
    for (int attempt = 0; attempt < 5 && text; attempt++) {
        json_t *patch = json_pack("{s:{s:s,s:{s:s}}}", "metadata", "resourceVersion", rv,
                                  "annotations", GS_ANN_ALLOCATED, text);
        json_t *res = NULL;
        char err[512];
        int st = kube_merge_patch(kc, path, patch, &res, err, sizeof err);
        json_decref(patch);
        if (st >= 200 && st < 300) {
            gs_podcache_upsert_json(pc, res);
            json_decref(res);
            rc = 0;
            break;
        }
        if (st != 409) {
            kube_log(0, "pod %s/%s: cannot record %s: %s", pod->ns, pod->name, GS_ANN_ALLOCATED,
                     err);
            break;
        }
        /* Conflict: someone changed the pod. Re-read it and make sure it
         * still carries the assignment we matched before writing again. */
        json_t *cur = NULL;
        if (kube_get_json(kc, path, &cur, err, sizeof err) != 200) {
            kube_log(1, "pod %s/%s: re-read after 409 failed: %s", pod->ns, pod->name, err);
            json_decref(cur);
            continue; /* the next attempt conflicts again and re-reads */
        }
        json_t *md = json_object_get(cur, "metadata");
        const char *as = json_string_value(
            json_object_get(json_object_get(md, "annotations"), GS_ANN_ASSIGNMENT));
        if (!as || !pod->assignment || strcmp(as, pod->assignment) != 0) {
            kube_log(0, "pod %s/%s: assignment changed during PreStartContainer; not recording",
                     pod->ns, pod->name);
            json_decref(cur);
            break;
        }
        snprintf(rv, sizeof rv, "%s",
                 json_string_value(json_object_get(md, "resourceVersion"))
                     ? json_string_value(json_object_get(md, "resourceVersion"))
                     : "");
        kube_log(2, "pod %s/%s: 409 conflict recording the allocation; retrying", pod->ns,
                 pod->name);
        json_decref(cur);
    }
    free(text);
    return rc;
}
