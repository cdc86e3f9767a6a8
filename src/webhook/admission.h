/* The admission webhook's decision, without I/O: an AdmissionReview v1 body in,
 * an AdmissionReview v1 answer out. Used by gpuslice-webhook and the fuzzer. */
#ifndef GPUSLICE_ADMISSION_H
#define GPUSLICE_ADMISSION_H

#include <stddef.h>

#define GS_WH_DEFAULT_SCHEDULER "gpuslice-scheduler"
#define GS_WH_DEFAULT_CORES 10
/* gpuslice's own service accounts, as the API server names them in userInfo.username:
 * the extender writes gpuslice.io/assignment, the node agent gpuslice.io/allocated. */
#define GS_WH_DEFAULT_WRITERS                                                                                          \
    {                                                                                                                  \
        "system:serviceaccount:gpuslice-system:gpuslice-extender", "system:serviceaccount:kube-system:gpuslice-node"   \
    }

struct gs_wh_config {
    const char *scheduler_name;            /* set on GPU pods that name no scheduler or the default one */
    int default_cores;                     /* gpu-cores filled in when memory is given without cores;
                                   0 = leave it absent (no compute limit) */
    const char *const *annotation_writers; /* usernames that may write gpuslice.io/ annotations */
    size_t n_annotation_writers;
};

enum gs_wh_mode { GS_WH_MUTATE, GS_WH_VALIDATE };

/* Reviews one AdmissionReview body: CREATE of pods (validated, mutated, tenant policy:
 * tenant_policy.h), UPDATE of pods (gpuslice.io/ annotations) and of their
 * ephemeralcontainers subresource (environment). (len bytes, need not be NUL-terminated).
 * Returns the HTTP status: 200 with an AdmissionReview in *out, or 400 with
 * {"error": "..."} in *out when the body is not an AdmissionReview v1 with a
 * request.uid (no answer the API server could match can be made then).
 * *out is malloc'd (NULL only when out of memory). */
int gs_admission_review(const struct gs_wh_config *cfg, enum gs_wh_mode mode, const char *body, size_t len, char **out);

/* Standard base64 (RFC 4648, padded). malloc'd, NUL-terminated. */
char *gs_base64(const unsigned char *data, size_t len);

/* JSON Pointer escaping of one reference token (RFC 6901: ~ -> ~0, / -> ~1). */
void gs_json_pointer_escape(const char *in, char *out, size_t outlen);

#endif
