/* Fuzzes the admission webhook's decision (src/webhook/admission.c): the input
 * as a whole AdmissionReview body, and, when it is JSON, as the pod inside a
 * well-formed review. Invariants: HTTP 200 with an AdmissionReview echoing the
 * uid, or 400 with an error; a denial carries a message; the validating path
 * never patches; a patch is padded base64 of a JSON array. */
#include <jansson.h>
#include <string.h>

#include "admission.h"
#include "fuzz_target.h"

static int b64_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n % 4)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int pad = c == '=' && i >= n - 2;
        if (!pad &&
            !((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/'))
            return 0;
    }
    return 1;
}

static void check(const struct gs_wh_config *cfg, enum gs_wh_mode mode, const char *body, size_t len,
                  const char *want_uid)
{
    char *out = NULL;
    int st = gs_admission_review(cfg, mode, body, len, &out);
    FUZZ_CHECK(out != NULL);
    json_t *j = json_loads(out, 0, NULL);
    FUZZ_CHECK(j != NULL);
    if (st == 400) {
        FUZZ_CHECK(json_string_value(json_object_get(j, "error")) != NULL);
        FUZZ_CHECK(want_uid == NULL);
    } else {
        FUZZ_CHECK(st == 200);
        json_t *r = json_object_get(j, "response");
        const char *uid = json_string_value(json_object_get(r, "uid"));
        FUZZ_CHECK(uid && *uid);
        FUZZ_CHECK(!want_uid || strcmp(uid, want_uid) == 0);
        json_t *allowed = json_object_get(r, "allowed");
        FUZZ_CHECK(json_is_boolean(allowed));
        const char *patch = json_string_value(json_object_get(r, "patch"));
        if (!json_is_true(allowed)) {
            const char *msg = json_string_value(json_object_get(json_object_get(r, "status"), "message"));
            FUZZ_CHECK(msg && *msg);
            FUZZ_CHECK(!patch);
        }
        if (patch) {
            FUZZ_CHECK(mode == GS_WH_MUTATE);
            FUZZ_CHECK(b64_ok(patch));
            FUZZ_CHECK(strcmp(json_string_value(json_object_get(r, "patchType")), "JSONPatch") == 0);
        }
    }
    json_decref(j);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const writers[] = GS_WH_DEFAULT_WRITERS;
    static const struct gs_wh_config cfg = { GS_WH_DEFAULT_SCHEDULER, GS_WH_DEFAULT_CORES, writers,
                                             sizeof writers / sizeof writers[0] };
    check(&cfg, GS_WH_MUTATE, (const char *)data, size, NULL);
    check(&cfg, GS_WH_VALIDATE, (const char *)data, size, NULL);
    json_t *pod = json_loadb((const char *)data, size, 0, NULL);
    if (!pod)
        return 0;
    json_t *rev = json_pack("{s:s,s:s,s:{s:s,s:{s:s,s:s,s:s},s:s,s:o}}", "apiVersion", "admission.k8s.io/v1", "kind",
                            "AdmissionReview", "request", "uid", "0f3c-fuzz", "kind", "group", "", "version", "v1",
                            "kind", "Pod", "operation", "CREATE", "object", pod);
    char *body = rev ? json_dumps(rev, JSON_COMPACT) : NULL;
    if (body) {
        check(&cfg, GS_WH_MUTATE, body, strlen(body), "0f3c-fuzz");
        check(&cfg, GS_WH_VALIDATE, body, strlen(body), "0f3c-fuzz");
    }
    free(body);
    json_decref(rev);
    return 0;
}
