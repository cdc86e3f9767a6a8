/* See kube_client.h (kube_annotate_retry). */
#include <stdio.h>
#include <string.h>

#include "kube_client.h"

int kube_annotate_retry(struct kube_client *kc, const char *path, json_t *cur, int attempts, kube_annotate_fn build,
                        void *ud, json_t **out, char *err, size_t errlen)
{
    json_t *obj = json_incref(cur);
    int st = KUBE_RETRY_CONFLICTS, stale = 0, built = 0;
    snprintf(err, errlen, "no attempt made");
    for (int attempt = 0; attempt < attempts; attempt++) {
        if (stale) {
            /* After a conflict: read the object as it is now (a failed read
             * costs an attempt; the next one reads again). */
            json_decref(obj);
            obj = NULL;
            int g = kube_get_json(kc, path, &obj, err, errlen);
            if (g != 200) {
                kube_log(KUBE_LOG_WARN, "kube: re-reading %s after a conflict: %s", path, err);
                st = KUBE_RETRY_REREAD;
                if (g >= 400 && g < 500)
                    break; /* gone or forbidden: reading again will not help */
                continue;
            }
        }
        char rv[KUBE_RV_MAX] = "";
        const char *orv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
        snprintf(rv, sizeof rv, "%s", orv ? orv : "");
        json_t *ann = build(obj, built++, ud, rv, err, errlen);
        if (!ann) {
            st = KUBE_RETRY_GAVE_UP;
            break;
        }
        json_t *patch = json_pack("{s:{s:s,s:o}}", "metadata", "resourceVersion", rv, "annotations", ann);
        json_t *res = NULL;
        int s = patch ? kube_merge_patch(kc, path, patch, &res, err, errlen) : -1;
        json_decref(patch);
        if (s != 409) {
            if (s >= 200 && s < 300 && out)
                *out = res;
            else
                json_decref(res);
            st = s;
            break;
        }
        json_decref(res);
        st = KUBE_RETRY_CONFLICTS;
        snprintf(err, errlen, "it kept changing (%d conflicts)", built);
        stale = 1;
    }
    json_decref(obj);
    return st;
}
