/* See podres.h. */
#include "podres.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_server.h"
#include "podresources_v1.pb-c.h"

/* Asks kubelet's pod-resources API which container holds exactly ids (of
 * our resource). Returns 0 with h filled, else a status with msg. */
int gs_podres_find_holder(const char *socket, const char *resource, const char *what, char *const *ids, size_t n,
                          struct gs_holder *h, char *msg, size_t msglen)
{
    V1__ListPodResourcesRequest rq = V1__LIST_POD_RESOURCES_REQUEST__INIT;
    size_t rqlen = protobuf_c_message_get_packed_size(&rq.base);
    uint8_t *rqb = malloc(rqlen ? rqlen : 1);
    uint8_t *ans = NULL;
    size_t anslen = 0;
    char err[600] = "";
    if (!rqb) {
        snprintf(msg, msglen, "%s: out of memory", what);
        return GS_ST_INTERNAL;
    }
    protobuf_c_message_pack(&rq.base, rqb);
    int st = gs_rpc_call(socket, "/v1.PodResourcesLister/List", rqb, rqlen, &ans, &anslen, 5000, err, sizeof err);
    free(rqb);
    if (st != 0 || !ans) {
        free(ans);
        snprintf(msg, msglen,
                 "%s: cannot ask kubelet which pod holds these devices "
                 "(pod-resources API at %s: %s); not starting the container without its "
                 "limits",
                 what, socket, err[0] ? err : "no answer");
        return GS_ST_FAILED_PRECONDITION;
    }
    V1__ListPodResourcesResponse *r = v1__list_pod_resources_response__unpack(NULL, anslen, ans);
    free(ans);
    if (!r) {
        snprintf(msg, msglen,
                 "%s: kubelet's pod-resources answer (%zu bytes) does not decode "
                 "as a ListPodResourcesResponse; not starting the container without its limits",
                 what, anslen);
        return GS_ST_FAILED_PRECONDITION;
    }
    int nholders = 0, partial = 0, malformed = 0;
    char names[512] = "", part[400] = "";
    for (size_t i = 0; i < r->n_pod_resources; i++) {
        const V1__PodResources *pr = r->pod_resources[i];
        for (size_t c = 0; c < pr->n_containers; c++) {
            const V1__ContainerResources *cr = pr->containers[c];
            size_t held = 0, inset = 0;
            for (size_t d = 0; d < cr->n_devices; d++) {
                const V1__ContainerDevices *cd = cr->devices[d];
                if (!cd->resource_name || strcmp(cd->resource_name, resource) != 0)
                    continue;
                for (size_t k = 0; k < cd->n_device_ids; k++) {
                    held++;
                    inset += cd->device_ids[k] && gs_ids_contain(cd->device_ids[k], ids, n);
                }
            }
            if (inset == 0)
                continue;
            int named =
                gs_k8s_name_ok(pr->namespace_, 63) && gs_k8s_name_ok(pr->name, 253) && gs_k8s_name_ok(cr->name, 253);
            if (!named) {
                malformed++;
                continue;
            }
            if (held != n || inset != n) {
                partial++;
                snprintf(part, sizeof part,
                         "; container %.63s/%.120s/%.60s holds %zu of them "
                         "among %zu devices",
                         pr->namespace_, pr->name, cr->name, inset, held);
                continue;
            }
            if (nholders++ == 0) {
                snprintf(h->ns, sizeof h->ns, "%s", pr->namespace_);
                snprintf(h->pod, sizeof h->pod, "%s", pr->name);
                snprintf(h->container, sizeof h->container, "%s", cr->name);
            }
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s%.63s/%.120s/%.60s", l ? ", " : "", pr->namespace_, pr->name,
                     cr->name);
        }
    }
    size_t npods = r->n_pod_resources;
    v1__list_pod_resources_response__free_unpacked(r, NULL);
    if (nholders == 1 && !partial && !malformed)
        return 0;
    if (nholders > 1)
        snprintf(msg, msglen,
                 "%s: kubelet reports %d containers holding these devices (%s); "
                 "refusing",
                 what, nholders, names);
    else if (malformed)
        snprintf(msg, msglen,
                 "%s: kubelet's pod-resources answer names these devices for a "
                 "container with a missing or malformed namespace/pod/container name; refusing",
                 what);
    else if (partial)
        snprintf(msg, msglen,
                 "%s: kubelet's pod-resources answer disagrees with the request%s; "
                 "refusing",
                 what, part);
    else
        snprintf(msg, msglen,
                 "%s: no container on this node holds these devices according to "
                 "kubelet's pod-resources API (%zu pods listed); refusing, nothing written",
                 what, npods);
    return GS_ST_FAILED_PRECONDITION;
}
