/*
 * Device-plugin handlers. Pod identity (docs/device-plugin.md): kubelet's
 * Allocate carries only replica device IDs, so Allocate answers only what
 * follows from the IDs (each names its GPU): the device, the interposer
 * mounts and a state directory keyed by the ID set. The limits are decided
 * at PreStartContainer (pre_start_required), when kubelet's pod-resources
 * API tells which pod/container holds exactly these IDs: the agent reads
 * THAT pod's gpuslice.io/assignment and writes limits.conf atomically.
 * No node lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_state.h"
#include "annotation.h"
#include "container_edits.h"
#include "deviceplugin_v1beta1.pb-c.h"
#include "placement.h"
#include "plugin.h"
#include "pod_record.h"
#include "podres.h"

unsigned gs_plugin_generation(void *ud)
{
    struct gs_plugin *p = ud;
    pthread_mutex_lock(&p->inv->lock);
    unsigned g = p->inv->generation;
    pthread_mutex_unlock(&p->inv->lock);
    return g;
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *b = malloc(*len ? *len : 1);
    if (b)
        protobuf_c_message_pack(m, b);
    return b;
}

int gs_plugin_list(void *ud, uint8_t **out, size_t *outlen)
{
    struct gs_plugin *p = ud;
    pthread_mutex_lock(&p->inv->lock);
    size_t n = (size_t)p->inv->ngpus * (size_t)p->replicas;
    V1beta1__Device *devs = calloc(n ? n : 1, sizeof *devs);
    V1beta1__Device **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    V1beta1__TopologyInfo *topo = calloc((size_t)p->inv->ngpus + 1, sizeof *topo);
    V1beta1__NUMANode *numa = calloc((size_t)p->inv->ngpus + 1, sizeof *numa);
    V1beta1__NUMANode **numap = calloc((size_t)p->inv->ngpus + 1, sizeof *numap);
    char(*ids)[GS_REPLICA_ID_MAX] = calloc(n ? n : 1, GS_REPLICA_ID_MAX);
    int rc = -1;
    if (!devs || !ptrs || !topo || !numa || !numap || !ids)
        goto out;
    size_t k = 0;
    for (int g = 0; g < p->inv->ngpus; g++) {
        const struct gs_nvml_gpu *gpu = &p->inv->gpus[g];
        v1beta1__topology_info__init(&topo[g]);
        v1beta1__numanode__init(&numa[g]);
        if (gpu->numa >= 0) {
            numa[g].id = gpu->numa;
            numap[g] = &numa[g];
            topo[g].n_nodes = 1;
            topo[g].nodes = &numap[g];
        }
        for (int r = 0; r < p->replicas; r++, k++) {
            v1beta1__device__init(&devs[k]);
            snprintf(ids[k], GS_REPLICA_ID_MAX, "%s::%d", gpu->uuid, r);
            devs[k].id = ids[k];
            devs[k].health = gpu->healthy ? "Healthy" : "Unhealthy";
            if (gpu->numa >= 0)
                devs[k].topology = &topo[g];
            ptrs[k] = &devs[k];
        }
    }
    V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    resp.n_devices = n;
    resp.devices = ptrs;
    *out = pack(&resp.base, outlen);
    rc = *out ? 0 : -1;
out:
    pthread_mutex_unlock(&p->inv->lock);
    free(devs);
    free(ptrs);
    free(topo);
    free(numa);
    free(numap);
    free(ids);
    return rc;
}

void gs_plugin_view(struct gs_plugin *p, struct gs_node_view *v)
{
    memset(v, 0, sizeof *v);
    v->node = p->node;
    v->power_exp = p->power_exp[0] ? p->power_exp : NULL;
    v->share_yield_us = p->share_yield_us[0] ? p->share_yield_us : NULL;
    v->replicas = p->replicas;
    pthread_mutex_lock(&p->inv->lock);
    for (int g = 0; g < p->inv->ngpus && g < GS_ASSIGN_MAX_GPUS; g++) {
        snprintf(v->gpus[g].uuid, sizeof v->gpus[g].uuid, "%s", p->inv->gpus[g].uuid);
        v->gpus[g].index = p->inv->gpus[g].index;
        v->gpus[g].mem_total_mib = (int64_t)(p->inv->gpus[g].mem_total >> 20);
        v->gpus[g].healthy = p->inv->gpus[g].healthy;
        v->ngpus = g + 1;
    }
    pthread_mutex_unlock(&p->inv->lock);
}

/* gs_match_pods over the pod cache as it is now. */
static void match_cached(struct gs_plugin *p, const struct gs_node_view *v, char *const *ids, size_t n,
                         struct gs_match *m)
{
    struct gs_pod *pods = NULL;
    int np = gs_podcache_copy(p->pods, &pods);
    gs_match_pods(v, pods, np, ids, n, m);
    gs_podcache_free_copy(pods, np);
}

struct resp_buf {
    V1beta1__ContainerAllocateResponse r;
    V1beta1__ContainerAllocateResponse__EnvsEntry env[GS_EDITS_MAX_ENV];
    V1beta1__ContainerAllocateResponse__EnvsEntry *envp[GS_EDITS_MAX_ENV];
    V1beta1__ContainerAllocateResponse__AnnotationsEntry ann[2];
    V1beta1__ContainerAllocateResponse__AnnotationsEntry *annp[2];
    V1beta1__Mount mnt[GS_EDITS_MAX_MOUNTS];
    V1beta1__Mount *mntp[GS_EDITS_MAX_MOUNTS];
    V1beta1__CDIDevice cdi[GS_ASSIGN_MAX_GPUS];
    V1beta1__CDIDevice *cdip[GS_ASSIGN_MAX_GPUS];
    struct gs_container_edits e;
    struct gs_alloc_dirs dirs;
    char cdi_names[GS_ASSIGN_MAX_GPUS][128];
};

/* The answer's envs and mounts, pointing into b->e. */
static void answer_edits(struct resp_buf *b)
{
    for (int i = 0; i < b->e.nenv; i++) {
        v1beta1__container_allocate_response__envs_entry__init(&b->env[i]);
        b->env[i].key = b->e.env[i][0];
        b->env[i].value = b->e.env[i][1];
        b->envp[i] = &b->env[i];
    }
    b->r.n_envs = (size_t)b->e.nenv;
    for (int i = 0; i < b->e.nmounts; i++) {
        v1beta1__mount__init(&b->mnt[i]);
        b->mnt[i].host_path = b->e.m[i].host;
        b->mnt[i].container_path = b->e.m[i].cont;
        b->mnt[i].read_only = b->e.m[i].ro;
        b->mntp[i] = &b->mnt[i];
    }
    b->r.n_mounts = (size_t)b->e.nmounts;
}

/* One container's answer. It depends only on the device IDs (each names
 * its GPU), never on which pod they are for: the limits are late-bound,
 * written into limits.conf at PreStartContainer once kubelet can tell
 * which pod holds the devices. Until then GPUSLICE_CONFIG names a file
 * that may not exist (or is a previous owner's, which kubelet never
 * starts a container with: PreStartContainer must succeed first), and the
 * interposer refuses the GPU on a missing file: it fails closed. */
static int build_response(struct gs_plugin *p, const struct gs_node_view *v, char *const *ids, size_t n, const int *gpu,
                          const int *order, struct resp_buf *b, char *msg, size_t msglen)
{
    memset(b, 0, sizeof *b);
    v1beta1__container_allocate_response__init(&b->r);
    b->r.envs = b->envp;
    b->r.mounts = b->mntp;
    b->r.annotations = b->annp;
    b->r.cdi_devices = b->cdip;
    const char *uuids[GS_ASSIGN_MAX_GPUS];
    for (size_t j = 0; j < n; j++) {
        uuids[j] = v->gpus[gpu[order[j]]].uuid;
        if (p->cdi) {
            v1beta1__cdidevice__init(&b->cdi[j]);
            snprintf(b->cdi_names[j], sizeof b->cdi_names[j], "nvidia.com/gpu=%s", uuids[j]);
            b->cdi[j].name = b->cdi_names[j];
            b->cdip[j] = &b->cdi[j];
            b->r.n_cdi_devices++;
        }
    }
    int code = gs_agent_alloc_dirs(p->state_root, ids, n, &b->dirs, msg, msglen);
    if (code)
        return code;
    struct gs_edits_in in = { .state_root = p->state_root,
                              .lib_host = p->lib_host,
                              .lib_container = p->lib_container,
                              .preload_host = p->preload_host,
                              .dirs = &b->dirs,
                              .uuids = uuids,
                              .n = n,
                              .visible_env = !p->cdi };
    code = gs_container_edits(&in, &b->e, msg, msglen);
    if (code)
        return code;
    answer_edits(b);
    v1beta1__container_allocate_response__annotations_entry__init(&b->ann[0]);
    b->ann[0].key = "gpuslice.io/state-key";
    b->ann[0].value = b->dirs.key;
    b->annp[0] = &b->ann[0];
    b->r.n_annotations = 1;
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static int do_allocate(struct gs_plugin *p, const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen, char *msg,
                       size_t msglen)
{
    V1beta1__AllocateRequest *req = v1beta1__allocate_request__unpack(NULL, inlen, in);
    if (!req) {
        snprintf(msg, msglen, "Allocate: cannot decode the AllocateRequest (%zu bytes)", inlen);
        return GS_ST_INVALID;
    }
    int code = 0;
    size_t nc = req->n_container_requests;
    struct resp_buf *bufs = calloc(nc ? nc : 1, sizeof *bufs);
    V1beta1__ContainerAllocateResponse **rp = calloc(nc ? nc : 1, sizeof *rp);
    if (!bufs || !rp) {
        code = GS_ST_INTERNAL;
        snprintf(msg, msglen, "Allocate: out of memory");
        goto out;
    }
    if (nc == 0) {
        code = GS_ST_INVALID;
        snprintf(msg, msglen, "Allocate: no container requests");
        goto out;
    }
    if (!p->pods) {
        code = GS_ST_FAILED_PRECONDITION;
        snprintf(msg, msglen,
                 "Allocate: the agent has no API server connection, so it cannot "
                 "know whether any pod was scheduled to these devices; refusing");
        goto out;
    }
    for (size_t c = 0; c < nc && code == 0; c++) {
        char **ids = req->container_requests[c]->devices_ids;
        size_t n = req->container_requests[c]->n_devices_ids;
        char idtxt[2048], what[2100];
        int gpu[GS_ASSIGN_MAX_GPUS], order[GS_ASSIGN_MAX_GPUS];
        if (n > GS_ASSIGN_MAX_GPUS) {
            code = GS_ST_INVALID;
            snprintf(msg, msglen, "Allocate: container %zu asks for %zu devices (1..%d)", c, n, GS_ASSIGN_MAX_GPUS);
            break;
        }
        gs_ids_text(ids, n, idtxt, sizeof idtxt);
        snprintf(what, sizeof what, "Allocate [%s]", idtxt);
        struct gs_node_view v;
        gs_plugin_view(p, &v);
        code = gs_ids_check(&v, what, ids, n, gpu, order, msg, msglen);
        if (code)
            break;
        /* Fail early for a pod nobody scheduled here: some live pod on this
         * node must have an assignment on exactly these GPUs. Which pod it
         * is does not matter yet (PreStartContainer decides, knowing). */
        struct gs_match m;
        match_cached(p, &v, ids, n, &m);
        if (m.ngpu_matches == 0) { /* the watch may lag a fresh binding */
            gs_podcache_relist(p->pods);
            match_cached(p, &v, ids, n, &m);
        }
        if (m.ngpu_matches == 0) {
            code = GS_ST_FAILED_PRECONDITION;
            snprintf(msg, msglen,
                     "Allocate [%s]: no live pod on node %s has a %s on these "
                     "GPUs; was it scheduled by the gpuslice extender? Refusing "
                     "rather than guessing%s",
                     idtxt, p->node, GS_ANN_ASSIGNMENT, m.bad);
        } else if (m.nmatches > 1) {
            code = GS_ST_FAILED_PRECONDITION;
            snprintf(msg, msglen,
                     "Allocate [%s]: %d pods claim these devices (%s); the "
                     "assignments conflict, refusing",
                     idtxt, m.nmatches, m.names);
        }
        if (code == 0)
            code = build_response(p, &v, ids, n, gpu, order, &bufs[c], msg, msglen);
        if (code == 0) {
            rp[c] = &bufs[c].r;
            if (p->test_allocate_delay_ms > 0)
                sleep_ms(p->test_allocate_delay_ms);
            kube_log(KUBE_LOG_INFO, "Allocate [%s] -> state %s (limits at PreStartContainer)", idtxt, bufs[c].dirs.key);
        }
    }
    if (code == 0) {
        V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
        resp.n_container_responses = nc;
        resp.container_responses = rp;
        *out = pack(&resp.base, outlen);
        if (!*out)
            code = GS_ST_INTERNAL;
    }
out:
    free(bufs);
    free(rp);
    v1beta1__allocate_request__free_unpacked(req, NULL);
    return code;
}

/* ---- PreStartContainer: the pod is known now ---- */

/* Finds the live pod ns/name in the cache (re-listing once on a miss). */
static int find_cached(struct gs_plugin *p, const struct gs_holder *h, struct gs_pod *out)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        struct gs_pod *pods = NULL;
        int np = gs_podcache_copy(p->pods, &pods), found = -1;
        for (int i = 0; i < np && found < 0; i++)
            if (!pods[i].terminal && strcmp(pods[i].ns, h->ns) == 0 && strcmp(pods[i].name, h->pod) == 0)
                found = i;
        if (found >= 0) {
            *out = pods[found];
            memset(&pods[found], 0, sizeof pods[found]); /* strings now owned by out */
        }
        gs_podcache_free_copy(pods, np);
        if (found >= 0)
            return 0;
        if (attempt == 0)
            gs_podcache_relist(p->pods);
    }
    return -1;
}

/* What PreStartContainer learns, step by step, about one container. */
struct prestart {
    char **ids;
    size_t n;
    char idtxt[2048], what[2100];
    int gpu[GS_ASSIGN_MAX_GPUS], order[GS_ASSIGN_MAX_GPUS];
    struct gs_node_view v;
    struct gs_holder h;
    struct gs_pod pod;
    int have_pod;
    struct gs_assignment a;   /* the pod's assignment as annotated */
    struct gs_assignment eff; /* ... on the GPUs it really holds */
    char as[1200];            /* a's replicas, for messages */
    int recorded;             /* the pod's allocated record names these IDs */
    int locked;               /* p->lock held until the end */
    struct gs_alloc_dirs d;
};

/* The IDs are devices of this node, and the pod cache is there to ask. */
static int prestart_check_ids(struct gs_plugin *p, struct prestart *s, char *msg, size_t msglen)
{
    if (s->n <= GS_ASSIGN_MAX_GPUS)
        gs_ids_text(s->ids, s->n, s->idtxt, sizeof s->idtxt);
    snprintf(s->what, sizeof s->what, "PreStartContainer [%s]", s->idtxt);
    gs_plugin_view(p, &s->v);
    int code = gs_ids_check(&s->v, s->what, s->ids, s->n, s->gpu, s->order, msg, msglen);
    if (code)
        return code;
    if (!p->pods) {
        snprintf(msg, msglen,
                 "%s: the agent has no API server connection, so it cannot read "
                 "the pod's limits; refusing",
                 s->what);
        return GS_ST_FAILED_PRECONDITION;
    }
    return 0;
}

/* Which container kubelet says holds the IDs, and its live pod. */
static int prestart_find_pod(struct gs_plugin *p, struct prestart *s, char *msg, size_t msglen)
{
    int code = gs_podres_find_holder(p->podres_socket, p->resource, s->what, s->ids, s->n, &s->h, msg, msglen);
    if (code)
        return code;
    if (find_cached(p, &s->h, &s->pod) != 0) {
        snprintf(msg, msglen,
                 "%s: kubelet says pod %s/%s (container %s) holds these devices, "
                 "but no live pod of that name is bound to node %s",
                 s->what, s->h.ns, s->h.pod, s->h.container, p->node);
        return GS_ST_FAILED_PRECONDITION;
    }
    s->have_pod = 1;
    return 0;
}

/* The pod's assignment: present, well-formed, and signed by the extender
 * for this pod on this node (the pod's owner can edit its annotations,
 * not forge the signature). */
static int prestart_read_assignment(struct gs_plugin *p, struct prestart *s, char *msg, size_t msglen)
{
    const struct gs_pod *pod = &s->pod;
    char err[256];
    if (!pod->assignment) {
        snprintf(msg, msglen,
                 "%s: pod %s/%s has no %s; was it scheduled by the gpuslice "
                 "extender? Not starting it without limits",
                 s->what, s->h.ns, s->h.pod, GS_ANN_ASSIGNMENT);
        return GS_ST_FAILED_PRECONDITION;
    }
    if (strlen(pod->assignment) >= GS_PIN_MAX) {
        snprintf(msg, msglen, "%s: pod %s/%s: its %s is %zu bytes long (at most %d)", s->what, s->h.ns, s->h.pod,
                 GS_ANN_ASSIGNMENT, strlen(pod->assignment), GS_PIN_MAX - 1);
        return GS_ST_FAILED_PRECONDITION;
    }
    if (gs_assignment_parse(pod->assignment, strlen(pod->assignment), &s->a, err, sizeof err) != 0) {
        snprintf(msg, msglen, "%s: pod %s/%s: %s", s->what, s->h.ns, s->h.pod, err);
        return GS_ST_FAILED_PRECONDITION;
    }
    const char *bad_sig = NULL;
    if (p->sigkey && gs_sig_verify(p->sigkey, pod->uid, p->node, pod->assignment, pod->signature, &bad_sig) != 0) {
        snprintf(msg, msglen,
                 "%s: pod %s/%s: the signature of its %s: %s; only an "
                 "assignment the gpuslice extender signed for this pod on node %s is accepted "
                 "(%s)",
                 s->what, s->h.ns, s->h.pod, GS_ANN_ASSIGNMENT, bad_sig, p->node, GS_ANN_ASSIGNMENT_SIG);
        kube_log(KUBE_LOG_ERROR, "%s", msg);
        return GS_ST_FAILED_PRECONDITION;
    }
    for (int i = 0; i < s->a.ngpus; i++) {
        size_t l = strlen(s->as);
        snprintf(s->as + l, sizeof s->as - l, "%s%s", i ? "," : "", s->a.gpus[i].replica);
    }
    return 0;
}

/* kubelet gave the pod replicas of GPUs its scheduling decision did not
 * count (admitted out of the order the hint guessed). Accepted only if it
 * fits there on this node's own books; the check, the allocated record
 * (which makes the next check and the extender count the pod where it
 * really is) and the limits are one step under the agent's own mutex, so
 * two such swaps cannot both take the last room. In-process only: nothing
 * to leak. */
static int prestart_fit_elsewhere(struct gs_plugin *p, struct prestart *s, char *msg, size_t msglen)
{
    pthread_mutex_lock(&p->lock);
    s->locked = 1;
    char why[1000];
    struct gs_pod *pods = NULL;
    int np = gs_podcache_copy(p->pods, &pods);
    int fits = gs_fits_on_held(&s->v, pods, np, &s->pod, &s->eff, why, sizeof why);
    gs_podcache_free_copy(pods, np);
    const char *node = s->a.node[0] ? s->a.node : p->node;
    if (!fits) {
        snprintf(msg, msglen,
                 "%s: pod %s/%s holds these devices, but its %s is for other "
                 "GPUs (%s on node %s) and %s; refusing rather than overcommitting the GPU "
                 "(nothing written; delete the pod to reschedule it)",
                 s->what, s->h.ns, s->h.pod, GS_ANN_ASSIGNMENT, s->as, node, why);
        return GS_ST_FAILED_PRECONDITION;
    }
    if (gs_record_allocated(p->kc, p->pods, p->node, &s->pod, s->ids, s->n) != 0) {
        snprintf(msg, msglen,
                 "%s: pod %s/%s holds replicas of other GPUs than its %s "
                 "(%s) and fits there, but recording %s failed (see the agent's log); "
                 "refusing until it can be recorded, so that every reader counts the pod "
                 "where it really is",
                 s->what, s->h.ns, s->h.pod, GS_ANN_ASSIGNMENT, s->as, GS_ANN_ALLOCATED);
        return GS_ST_FAILED_PRECONDITION;
    }
    s->recorded = 1;
    kube_log(KUBE_LOG_INFO,
             "%s: pod %s/%s holds replicas of other GPUs than its assignment (%s); it "
             "fits there, accepted with its own limits",
             s->what, s->h.ns, s->h.pod, s->as);
    return 0;
}

/* Whether the pod may start on the devices it holds (gs_held_verdict_of),
 * and its limits there in s->eff. */
static int prestart_judge(struct gs_plugin *p, struct prestart *s, char *msg, size_t msglen)
{
    char why[256];
    switch (gs_held_verdict_of(&s->v, &s->pod, &s->a, s->ids, s->n, &s->eff, &s->recorded, why, sizeof why)) {
    case GS_HELD_REFUSE:
        snprintf(msg, msglen,
                 "%s: pod %s/%s holds these devices, but its %s does not match "
                 "them (%s on node %s: %s); refusing",
                 s->what, s->h.ns, s->h.pod, GS_ANN_ASSIGNMENT, s->as, s->a.node[0] ? s->a.node : p->node, why);
        return GS_ST_FAILED_PRECONDITION;
    case GS_HELD_ON_OTHER_GPUS: return prestart_fit_elsewhere(p, s, msg, msglen);
    case GS_HELD_AS_ASSIGNED: break;
    }
    /* held on other GPUs than assigned, and the pod's allocated record says
     * so: a restart only where the agent's own pin says so, since the pod's
     * owner can write that record (one naming a full GPU's replicas started
     * a refused pod there with no fit check) */
    if (s->recorded && !gs_assignment_same_gpus(&s->a, s->ids, s->n) &&
        !gs_agent_pinned_to(p->state_root, s->ids, s->n, s->pod.uid, s->h.container)) {
        s->recorded = 0;
        return prestart_fit_elsewhere(p, s, msg, msglen);
    }
    if (!gs_assignment_same_ids(&s->a, s->ids, s->n))
        kube_log(KUBE_LOG_INFO,
                 "%s: pod %s/%s holds other replicas than its assignment names (kubelet "
                 "admitted pods out of the hinted order); its limits follow the pod",
                 s->what, s->h.ns, s->h.pod);
    return 0;
}

/* msg, the reason a step failed, prefixed with the request and the pod. */
static int pod_failed(const struct prestart *s, const char *doing, char *msg, size_t msglen)
{
    char why[600];
    snprintf(why, sizeof why, "%s", msg);
    snprintf(msg, msglen, "%s: pod %s/%s: %s%s", s->what, s->h.ns, s->h.pod, doing, why);
    return GS_ST_INTERNAL;
}

/* The state directory and limits.conf: a container restart keeps the
 * assignment it was first started with (a pod's owner can edit its
 * annotations, not the agent's record); first start or restart, a fresh
 * state directory, whatever the previous owner or run left in it, and a
 * region the container's processes can open whatever uid they run as. */
static int prestart_write_files(struct gs_plugin *p, struct prestart *s, char *msg, size_t msglen)
{
    struct gs_alloc_dirs *d = &s->d;
    int code = gs_agent_alloc_dirs(p->state_root, s->ids, s->n, d, msg, msglen);
    if (code)
        return code;
    int same_owner = 0;
    if (gs_agent_pin_check(d, s->pod.uid, s->h.container, s->pod.assignment, &same_owner) != 0) {
        snprintf(msg, msglen,
                 "%s: pod %s/%s container %s: its %s changed since the agent "
                 "accepted it at the container's first start (%s/assignment); refusing the "
                 "changed one (delete the pod to reschedule it)",
                 s->what, s->h.ns, s->h.pod, s->h.container, GS_ANN_ASSIGNMENT, d->limits_dir);
        kube_log(KUBE_LOG_ERROR, "%s", msg);
        return GS_ST_FAILED_PRECONDITION;
    }
    struct gs_region_owner ro;
    gs_region_owner_of(&s->pod, s->h.container, &ro);
    if (gs_agent_state_reset(p->state_root, d, &ro, msg, msglen) != 0) {
        return pod_failed(s, "cannot prepare its state: ", msg, msglen);
    }
    kube_log(KUBE_LOG_INFO, "%s: %s state %s for %s/%s/%s; region uid %u gid %u mode %04o (%s)", s->what,
             same_owner ? "restart, fresh" : "new owner,", d->state_dir, s->h.ns, s->h.pod, s->h.container, ro.uid,
             ro.gid, ro.mode, ro.why);
    char text[4096];
    gs_limits_text(&s->v, &s->h, s->pod.uid, &s->eff, s->gpu, s->order, s->n, text, sizeof text);
    if (gs_agent_write_limits(d, text, s->pod.uid, s->h.container, s->pod.assignment) != 0) {
        snprintf(msg, msglen, "%s: cannot write %s/limits.conf: %s", s->what, d->limits_dir, strerror(errno));
        return GS_ST_INTERNAL;
    }
    /* The container's entry in the roster of each of its GPUs, now that its
     * region is made: the weight its neighbours count it with. */
    for (size_t j = 0; j < s->n; j++) {
        const char *uuid = s->v.gpus[s->gpu[s->order[j]]].uuid;
        struct gs_roster_entry limits = gs_roster_entry_of(&s->eff, uuid);
        if (gs_agent_roster_put(p->state_root, uuid, d->key, &limits, msg, msglen) != 0) {
            return pod_failed(s, "", msg, msglen);
        }
    }
    return 0;
}

static int do_prestart(struct gs_plugin *p, const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen, char *msg,
                       size_t msglen)
{
    V1beta1__PreStartContainerRequest *req = v1beta1__pre_start_container_request__unpack(NULL, inlen, in);
    if (!req) {
        snprintf(msg, msglen, "PreStartContainer: cannot decode the request (%zu bytes)", inlen);
        return GS_ST_INVALID;
    }
    struct prestart *s = calloc(1, sizeof *s);
    if (!s) {
        v1beta1__pre_start_container_request__free_unpacked(req, NULL);
        snprintf(msg, msglen, "PreStartContainer: out of memory");
        return GS_ST_INTERNAL;
    }
    s->ids = req->devices_ids;
    s->n = req->n_devices_ids;
    int code = prestart_check_ids(p, s, msg, msglen);
    if (!code)
        code = prestart_find_pod(p, s, msg, msglen);
    if (!code)
        code = prestart_read_assignment(p, s, msg, msglen);
    if (!code)
        code = prestart_judge(p, s, msg, msglen);
    if (!code)
        code = prestart_write_files(p, s, msg, msglen);
    if (!code) {
        /* Record the allocation on the pod (once; a container restart calls
         * PreStartContainer again with the same devices). */
        if (!s->recorded)
            gs_record_allocated(p->kc, p->pods, p->node, &s->pod, s->ids, s->n);
        kube_log(KUBE_LOG_INFO, "%s -> %s/%s/%s: %s/limits.conf", s->what, s->h.ns, s->h.pod, s->h.container,
                 s->d.limits_dir);
        V1beta1__PreStartContainerResponse o = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
        *out = pack(&o.base, outlen);
        if (!*out)
            code = GS_ST_INTERNAL;
    }
    if (s->locked)
        pthread_mutex_unlock(&p->lock);
    if (s->have_pod) {
        free(s->pod.assignment);
        free(s->pod.allocated);
        free(s->pod.signature);
    }
    free(s);
    v1beta1__pre_start_container_request__free_unpacked(req, NULL);
    return code;
}

/* Preferred allocation, a hint (PreStartContainer decides the limits once
 * the pod is known): the replica set of the first-bound pending pod whose
 * exact replicas are available; else, replicas of the GPUs of the
 * first-bound pending pod whose GPUs all have one free (a replica number is
 * only a token for one share of its GPU). kubelet admits pods in about
 * that order (placement.c, bound_order); when it does not, PreStartContainer re-checks
 * the fit on the GPUs really held. */
/* Copies the pods and lists the candidates for a preferred allocation. */
static int load_candidates(struct gs_plugin *p, struct gs_pod **pods, int *npods, struct gs_assignment **as, int **cand,
                           int *ncand)
{
    struct gs_node_view v;
    gs_plugin_view(p, &v);
    *npods = p->pods ? gs_podcache_copy(p->pods, pods) : 0;
    *as = calloc((size_t)(*npods ? *npods : 1), sizeof **as);
    *cand = calloc((size_t)(*npods ? *npods : 1), sizeof **cand);
    *ncand = 0;
    if (!*as || !*cand)
        return -1;
    gs_prefer_candidates(&v, *pods, *npods, *as, *cand, ncand);
    return 0;
}

static int do_preferred(struct gs_plugin *p, const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen, char *msg,
                        size_t msglen)
{
    V1beta1__PreferredAllocationRequest *req = v1beta1__preferred_allocation_request__unpack(NULL, inlen, in);
    if (!req) {
        snprintf(msg, msglen, "GetPreferredAllocation: cannot decode the request (%zu bytes)", inlen);
        return GS_ST_INVALID;
    }
    size_t nc = req->n_container_requests;
    V1beta1__ContainerPreferredAllocationResponse *rs = calloc(nc ? nc : 1, sizeof *rs);
    V1beta1__ContainerPreferredAllocationResponse **rsp = calloc(nc ? nc : 1, sizeof *rsp);
    char ***chosen = calloc(nc ? nc : 1, sizeof *chosen);
    struct gs_pod *pods = NULL;
    struct gs_assignment *as = NULL;
    int *cand = NULL;
    int npods = 0, ncand = 0, relisted = 0;
    int code = 0;
    if (!rs || !rsp || !chosen || load_candidates(p, &pods, &npods, &as, &cand, &ncand) != 0) {
        code = GS_ST_INTERNAL;
        goto out;
    }
    for (size_t c = 0; c < nc; c++) {
        const V1beta1__ContainerPreferredAllocationRequest *cr = req->container_requests[c];
        v1beta1__container_preferred_allocation_response__init(&rs[c]);
        rsp[c] = &rs[c];
        int size = cr->allocation_size;
        if (size <= 0 || size > GS_ASSIGN_MAX_GPUS || (size_t)size > cr->n_available_deviceids) {
            continue; /* nothing sensible to prefer: kubelet picks */
        }
        chosen[c] = calloc((size_t)size, sizeof(char *));
        if (!chosen[c]) {
            code = GS_ST_INTERNAL;
            goto out;
        }
        int k = gs_prefer(pods, npods, as, cand, ncand, cr->available_deviceids, cr->n_available_deviceids,
                          cr->must_include_deviceids, cr->n_must_include_deviceids, size, chosen[c]);
        if (k == 0 && !relisted && p->pods) {
            /* No pod fits: the watch may lag a fresh binding; list once. */
            relisted = 1;
            free(chosen[c]);
            chosen[c] = NULL;
            gs_podcache_free_copy(pods, npods);
            free(as);
            free(cand);
            gs_podcache_relist(p->pods);
            if (load_candidates(p, &pods, &npods, &as, &cand, &ncand) != 0) {
                code = GS_ST_INTERNAL;
                goto out;
            }
            c--;
            continue;
        }
        if (k == 0) {
            /* No pod fits: must-include first, then the first available. */
            for (size_t j = 0; j < cr->n_must_include_deviceids && k < size; j++)
                chosen[c][k++] = cr->must_include_deviceids[j];
            for (size_t j = 0; j < cr->n_available_deviceids && k < size; j++)
                if (!gs_ids_contain(cr->available_deviceids[j], chosen[c], (size_t)k))
                    chosen[c][k++] = cr->available_deviceids[j];
        }
        rs[c].n_deviceids = (size_t)k;
        rs[c].deviceids = chosen[c];
    }
    V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
    resp.n_container_responses = nc;
    resp.container_responses = rsp;
    *out = pack(&resp.base, outlen);
    if (!*out)
        code = GS_ST_INTERNAL;
out:
    if (code)
        snprintf(msg, msglen, "GetPreferredAllocation: out of memory");
    for (size_t c = 0; chosen && c < nc; c++)
        free(chosen[c]);
    free(chosen);
    free(rs);
    free(rsp);
    free(as);
    free(cand);
    gs_podcache_free_copy(pods, npods);
    v1beta1__preferred_allocation_request__free_unpacked(req, NULL);
    return code;
}

int gs_plugin_unary(void *ud, const char *method, const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen,
                    char *msg, size_t msglen)
{
    struct gs_plugin *p = ud;
    if (strcmp(method, "/v1beta1.DevicePlugin/Allocate") == 0)
        return do_allocate(p, in, inlen, out, outlen, msg, msglen);
    if (strcmp(method, "/v1beta1.DevicePlugin/GetPreferredAllocation") == 0)
        return do_preferred(p, in, inlen, out, outlen, msg, msglen);
    if (strcmp(method, "/v1beta1.DevicePlugin/PreStartContainer") == 0)
        return do_prestart(p, in, inlen, out, outlen, msg, msglen);
    if (strcmp(method, "/v1beta1.DevicePlugin/GetDevicePluginOptions") == 0) {
        V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
        o.pre_start_required = 1; /* the limits are written there */
        o.get_preferred_allocation_available = 1;
        *out = pack(&o.base, outlen);
        return *out ? 0 : GS_ST_INTERNAL;
    }
    snprintf(msg, msglen, "unknown method %s", method);
    return GS_ST_UNIMPLEMENTED;
}
