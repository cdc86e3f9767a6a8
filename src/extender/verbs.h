/* The kube-scheduler extender v1 verbs on parsed JSON (no HTTP, no API
 * calls), so they can be tested and benchmarked directly.
 *
 * Field names are those of k8s.io/kube-scheduler/extender/v1, which carry no
 * json tags and so serialise as the Go field names:
 *   ExtenderArgs         {"Pod": v1.Pod, "Nodes": v1.NodeList|null, "NodeNames": [string]|null}
 *   ExtenderFilterResult {"Nodes", "NodeNames", "FailedNodes": {node: reason},
 *                         "FailedAndUnresolvableNodes": {node: reason}, "Error": string}
 *   HostPriorityList     [{"Host": string, "Score": int64}]   (0..MaxExtenderPriority=10)
 *   ExtenderBindingArgs  {"PodName", "PodNamespace", "PodUID", "Node"}
 *   ExtenderBindingResult{"Error": string}
 */
#ifndef GPUSLICE_EXT_VERBS_H
#define GPUSLICE_EXT_VERBS_H

#include <jansson.h>

#include "state.h"

#define EXT_MAX_PRIORITY 10

/* Both take st->mu themselves. args may be any JSON; the result is always
 * a well-formed answer (filter: Error set on bad input). *bad is set when
 * the input was malformed (the HTTP layer answers 400 then). */
json_t *ext_filter(struct ext_state *st, json_t *args, int *bad);
json_t *ext_prioritize(struct ext_state *st, json_t *args, int *bad);

/* The HTTP layer's fast path for filter (prioritize = 0) or prioritize (1):
 * the request body as text in, the answer as text (malloc'd) in *out. It
 * takes only the shape kube-scheduler sends with nodeCacheCapable: true
 * ({"Pod", "Nodes": null, "NodeNames"}, plain names) and returns -1 for
 * anything else, which the caller then gives to ext_filter/ext_prioritize.
 * Returns 0 when answered; *bad as above, *failed when the answer is an
 * error (for the metrics). The answer equals the general path's. */
int ext_verb_text(struct ext_state *st, int prioritize, const char *body, size_t len, char **out, int *bad,
                  int *failed);

/* Shared by filter/prioritize: the candidate names (borrowed from args) and
 * whether they came as full Node objects. Returns count or -1 with err. */
int ext_candidates(json_t *args, const char ***names, int *as_objects, char *err, size_t errlen);

#endif
