/*
 * Device-plugin handlers. Pod identity (docs/device-plugin.md): kubelet's
 * Allocate carries only replica device IDs. The scheduler extender chose
 * those IDs and wrote them into the pod's gpuslice.io/assignment, so the
 * agent finds the one live pod on this node whose assignment names exactly
 * this ID set. No node lock: two pods never share a replica ID.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "annotation.h"
#include "deviceplugin_v1beta1.pb-c.h"
#include "plugin.h"

#define ST_INVALID 3
#define ST_FAILED_PRECONDITION 9
#define ST_UNIMPLEMENTED 12
#define ST_INTERNAL 13

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
    char (*ids)[GS_REPLICA_ID_MAX] = calloc(n ? n : 1, GS_REPLICA_ID_MAX);
    int rc = -1;
    if (!devs || !ptrs || !topo || !numa || !numap || !ids)
        goto out;
    size_t k = 0;
    for (int g = 0; g < p->inv->ngpus; g++) {
        const struct gs_gpu *gpu = &p->inv->gpus[g];
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

/* ---- matching ---- */
static int id_in(const char *id, char *const *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(set[i], id) == 0)
            return 1;
    return 0;
}

/* Whether assignment a names exactly the IDs in set. */
static int same_set(const struct gs_assignment *a, char *const *set, size_t n)
{
    if ((size_t)a->ngpus != n)
        return 0;
    for (int i = 0; i < a->ngpus; i++)
        if (!id_in(a->gpus[i].replica, set, n))
            return 0;
    return 1;
}

struct match {
    int npods;
    struct gs_pod *pods;
    int found; /* index in pods, -1 */
    int nmatches;
    struct gs_assignment a;
    char names[512]; /* the matching pods, for messages */
    char bad[700];   /* a malformed assignment on this node, for messages */
    int bad_mentions; /* ... whose text names one of the requested IDs */
};

static void find_pod(struct gs_plugin *p, char *const *ids, size_t n, struct match *m)
{
    m->npods = gs_podcache_copy(p->pods, &m->pods);
    m->found = -1;
    m->nmatches = 0;
    m->names[0] = '\0';
    m->bad[0] = '\0';
    m->bad_mentions = 0;
    for (int i = 0; i < m->npods; i++) {
        const struct gs_pod *pod = &m->pods[i];
        struct gs_assignment a;
        char err[256];
        if (pod->terminal || !pod->assignment)
            continue;
        if (gs_assignment_parse(pod->assignment, strlen(pod->assignment), &a, err, sizeof err)) {
            kube_log(3, "pod %s/%s: %s", pod->ns, pod->name, err);
            int mentions = 0;
            for (size_t k = 0; k < n; k++)
                mentions |= strstr(pod->assignment, ids[k]) != NULL;
            if (!m->bad[0] || (mentions && !m->bad_mentions)) {
                snprintf(m->bad, sizeof m->bad, "; pod %s/%s on this node has a malformed "
                         "annotation: %s", pod->ns, pod->name, err);
                m->bad_mentions = mentions;
            }
            continue;
        }
        if (!same_set(&a, ids, n))
            continue;
        if (a.node[0] && strcmp(a.node, p->node) != 0)
            continue;
        if (m->nmatches++ == 0) {
            m->found = i;
            m->a = a;
        }
        size_t l = strlen(m->names);
        snprintf(m->names + l, sizeof m->names - l, "%s%s/%s", l ? ", " : "", pod->ns,
                 pod->name);
    }
}

static void ids_text(char *const *ids, size_t n, char *out, size_t len)
{
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(out);
        snprintf(out + l, len - l, "%s%s", i ? "," : "", ids[i]);
    }
}

static int cmp_idx(const void *x, const void *y)
{
    const int *a = x, *b = y;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

/* Records the allocation on the pod: a merge patch conditional on the
 * resourceVersion we matched, re-checked and retried on 409. */
static void record_claim(struct gs_plugin *p, const struct gs_pod *pod, char *const *ids,
                         size_t n)
{
    json_t *reps = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(reps, json_string(ids[i]));
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *val = json_pack("{s:i,s:s,s:o,s:s}", "v", GS_ANN_VERSION, "node", p->node,
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
        int st = kube_merge_patch(p->kc, path, patch, &res, err, sizeof err);
        json_decref(patch);
        if (st >= 200 && st < 300) {
            gs_podcache_upsert_json(p->pods, res);
            json_decref(res);
            break;
        }
        if (st != 409) {
            kube_log(0, "pod %s/%s: cannot record %s: %s", pod->ns, pod->name, GS_ANN_ALLOCATED,
                     err);
            break;
        }
        /* Conflict: someone changed the pod. Re-read it and make sure it
         * still carries the same assignment before writing again. */
        json_t *cur = NULL;
        if (kube_get_json(p->kc, path, &cur, err, sizeof err) != 200) {
            kube_log(1, "pod %s/%s: re-read after 409 failed: %s", pod->ns, pod->name, err);
            json_decref(cur);
            continue; /* the next attempt conflicts again and re-reads */
        }
        json_t *md = json_object_get(cur, "metadata");
        const char *as = json_string_value(
            json_object_get(json_object_get(md, "annotations"), GS_ANN_ASSIGNMENT));
        struct gs_assignment a;
        if (!as || gs_assignment_parse(as, strlen(as), &a, err, sizeof err) != 0 ||
            !same_set(&a, ids, n)) {
            kube_log(0, "pod %s/%s: assignment changed during Allocate; not recording",
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
}

static int mkdirs(const char *path, mode_t mode)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *s = tmp + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(tmp, mode) != 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return mkdir(tmp, mode) != 0 && errno != EEXIST ? -1 : 0;
}

#define MAX_KV 48
struct resp_buf {
    V1beta1__ContainerAllocateResponse r;
    V1beta1__ContainerAllocateResponse__EnvsEntry env[MAX_KV];
    V1beta1__ContainerAllocateResponse__EnvsEntry *envp[MAX_KV];
    V1beta1__ContainerAllocateResponse__AnnotationsEntry ann[2];
    V1beta1__ContainerAllocateResponse__AnnotationsEntry *annp[2];
    V1beta1__Mount mnt[3];
    V1beta1__Mount *mntp[3];
    V1beta1__CDIDevice cdi[GS_ASSIGN_MAX_GPUS];
    V1beta1__CDIDevice *cdip[GS_ASSIGN_MAX_GPUS];
    char strs[MAX_KV][2][512];
    char state_dir[600];
    char ann_val[600];
    char cdi_names[GS_ASSIGN_MAX_GPUS][128];
};

static void add_env(struct resp_buf *b, const char *k, const char *v)
{
    size_t i = b->r.n_envs;
    if (i >= MAX_KV)
        return;
    v1beta1__container_allocate_response__envs_entry__init(&b->env[i]);
    snprintf(b->strs[i][0], sizeof b->strs[i][0], "%s", k);
    snprintf(b->strs[i][1], sizeof b->strs[i][1], "%s", v);
    b->env[i].key = b->strs[i][0];
    b->env[i].value = b->strs[i][1];
    b->envp[i] = &b->env[i];
    b->r.n_envs++;
}

static void add_mount(struct resp_buf *b, char *host, char *cont, int ro)
{
    size_t i = b->r.n_mounts;
    v1beta1__mount__init(&b->mnt[i]);
    b->mnt[i].host_path = host;
    b->mnt[i].container_path = cont;
    b->mnt[i].read_only = ro;
    b->mntp[i] = &b->mnt[i];
    b->r.n_mounts++;
}

/* Builds one container's answer for pod with assignment a. */
static int build_response(struct gs_plugin *p, const struct gs_pod *pod,
                          const struct gs_assignment *a, struct resp_buf *b, char *msg,
                          size_t msglen)
{
    memset(b, 0, sizeof *b);
    v1beta1__container_allocate_response__init(&b->r);
    b->r.envs = b->envp;
    b->r.mounts = b->mntp;
    b->r.annotations = b->annp;
    b->r.cdi_devices = b->cdip;
    /* Order the GPUs by NVML index (PCI bus order) and make CUDA number them
     * the same way, so that limit <i> lands on CUDA device <i>. */
    int order[GS_ASSIGN_MAX_GPUS][2];
    pthread_mutex_lock(&p->inv->lock);
    for (int i = 0; i < a->ngpus; i++) {
        int g = gs_inventory_find(p->inv, a->gpus[i].uuid);
        if (g < 0) {
            pthread_mutex_unlock(&p->inv->lock);
            snprintf(msg, msglen, "pod %s/%s: assigned GPU %s is not on node %s", pod->ns,
                     pod->name, a->gpus[i].uuid, p->node);
            return ST_FAILED_PRECONDITION;
        }
        order[i][0] = (int)p->inv->gpus[g].index;
        order[i][1] = i;
    }
    pthread_mutex_unlock(&p->inv->lock);
    qsort(order, (size_t)a->ngpus, sizeof order[0], cmp_idx);
    char visible[GS_ASSIGN_MAX_GPUS * GS_UUID_MAX] = "";
    char key[64], val[64];
    for (int j = 0; j < a->ngpus; j++) {
        const struct gs_assign_gpu *g = &a->gpus[order[j][1]];
        size_t l = strlen(visible);
        snprintf(visible + l, sizeof visible - l, "%s%s", j ? "," : "", g->uuid);
        snprintf(key, sizeof key, "GPUSLICE_MEMORY_LIMIT_%d", j);
        snprintf(val, sizeof val, "%lluMi", (unsigned long long)g->memory_mib);
        add_env(b, key, val);
        if (g->cores > 0) {
            snprintf(key, sizeof key, "GPUSLICE_CORES_%d", j);
            snprintf(val, sizeof val, "%u", g->cores);
            add_env(b, key, val);
        }
        if (p->cdi) {
            v1beta1__cdidevice__init(&b->cdi[j]);
            snprintf(b->cdi_names[j], sizeof b->cdi_names[j], "nvidia.com/gpu=%s", g->uuid);
            b->cdi[j].name = b->cdi_names[j];
            b->cdip[j] = &b->cdi[j];
            b->r.n_cdi_devices++;
        }
    }
    if (!p->cdi)
        add_env(b, "NVIDIA_VISIBLE_DEVICES", visible);
    add_env(b, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    if (a->share_mode)
        add_env(b, "GPUSLICE_COMPUTE_MODE", "share");
    add_env(b, "GPUSLICE_REGION", "/var/run/gpuslice/region");
    char label[128];
    snprintf(label, sizeof label, "%.60s/%.60s", pod->ns, pod->name);
    add_env(b, "GPUSLICE_CONTAINER", label);
    /* Per-pod state directory (the uid is unique; never another pod's). */
    snprintf(b->state_dir, sizeof b->state_dir, "%s/%s", p->state_root, pod->uid);
    if (strchr(pod->uid, '/') || strstr(pod->uid, "..") || mkdirs(b->state_dir, 0755) != 0) {
        snprintf(msg, msglen, "pod %s/%s: cannot create state directory %s: %s", pod->ns,
                 pod->name, b->state_dir, strerror(errno));
        return ST_INTERNAL;
    }
    add_mount(b, p->lib_host, p->lib_container, 1);
    add_mount(b, p->preload_host, "/etc/ld.so.preload", 1);
    add_mount(b, b->state_dir, "/var/run/gpuslice", 0);
    v1beta1__container_allocate_response__annotations_entry__init(&b->ann[0]);
    snprintf(b->ann_val, sizeof b->ann_val, "%s/%s/%s", pod->ns, pod->name, pod->uid);
    b->ann[0].key = "gpuslice.io/pod";
    b->ann[0].value = b->ann_val;
    b->annp[0] = &b->ann[0];
    b->r.n_annotations = 1;
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int do_allocate(struct gs_plugin *p, const uint8_t *in, size_t inlen, uint8_t **out,
                       size_t *outlen, char *msg, size_t msglen)
{
    V1beta1__AllocateRequest *req = v1beta1__allocate_request__unpack(NULL, inlen, in);
    if (!req) {
        snprintf(msg, msglen, "Allocate: cannot decode the AllocateRequest (%zu bytes)", inlen);
        return ST_INVALID;
    }
    int code = 0;
    size_t nc = req->n_container_requests;
    struct resp_buf *bufs = calloc(nc ? nc : 1, sizeof *bufs);
    V1beta1__ContainerAllocateResponse **rp = calloc(nc ? nc : 1, sizeof *rp);
    if (!bufs || !rp) {
        code = ST_INTERNAL;
        snprintf(msg, msglen, "Allocate: out of memory");
        goto out;
    }
    if (nc == 0) {
        code = ST_INVALID;
        snprintf(msg, msglen, "Allocate: no container requests");
        goto out;
    }
    if (!p->pods) {
        code = ST_FAILED_PRECONDITION;
        snprintf(msg, msglen, "Allocate: the agent has no API server connection, so it cannot "
                              "know which pod this is; refusing rather than guessing");
        goto out;
    }
    for (size_t c = 0; c < nc && code == 0; c++) {
        char **ids = req->container_requests[c]->devices_ids;
        size_t n = req->container_requests[c]->n_devices_ids;
        char idtxt[2048];
        ids_text(ids, n, idtxt, sizeof idtxt);
        if (n == 0 || n > GS_ASSIGN_MAX_GPUS) {
            code = ST_INVALID;
            snprintf(msg, msglen, "Allocate: container %zu asks for %zu devices (1..%d)", c, n,
                     GS_ASSIGN_MAX_GPUS);
            break;
        }
        struct match m;
        find_pod(p, ids, n, &m);
        if (m.nmatches == 0) { /* the watch may lag a fresh binding */
            gs_podcache_free_copy(m.pods, m.npods);
            gs_podcache_relist(p->pods);
            find_pod(p, ids, n, &m);
        }
        if (m.nmatches == 1) {
            const struct gs_pod *pod = &m.pods[m.found];
            /* Idempotent: a retried Allocate (kubelet or agent restarted
             * midway) for the same IDs gets the same answer. A pod already
             * allocated other IDs is refused. */
            if (pod->allocated) {
                char prev[GS_ASSIGN_MAX_GPUS][GS_REPLICA_ID_MAX], err[256];
                int k = gs_allocated_parse(pod->allocated, strlen(pod->allocated), prev,
                                           GS_ASSIGN_MAX_GPUS, err, sizeof err);
                int same = k == (int)n;
                for (int i = 0; same && i < k; i++)
                    same = id_in(prev[i], ids, n);
                if (k > 0 && !same) {
                    code = ST_FAILED_PRECONDITION;
                    snprintf(msg, msglen, "Allocate [%s]: pod %s/%s was already allocated "
                                          "other devices (%s)", idtxt, pod->ns, pod->name,
                             pod->allocated);
                }
            }
            if (code == 0)
                code = build_response(p, pod, &m.a, &bufs[c], msg, msglen);
            if (code == 0) {
                rp[c] = &bufs[c].r;
                if (p->test_allocate_delay_ms > 0)
                    sleep_ms(p->test_allocate_delay_ms);
                if (!pod->allocated)
                    record_claim(p, pod, ids, n);
                kube_log(2, "Allocate [%s] -> pod %s/%s (%d GPU%s)", idtxt, pod->ns, pod->name,
                         m.a.ngpus, m.a.ngpus > 1 ? "s" : "");
            }
        } else if (m.nmatches == 0) {
            code = ST_FAILED_PRECONDITION;
            snprintf(msg, msglen, "Allocate [%s]: no live pod on node %s has a %s naming exactly "
                                  "these devices; was it scheduled by the gpuslice extender? "
                                  "Refusing rather than guessing%s", idtxt, p->node,
                     GS_ANN_ASSIGNMENT, m.bad);
        } else {
            code = ST_FAILED_PRECONDITION;
            snprintf(msg, msglen, "Allocate [%s]: %d pods claim these devices (%s); the "
                                  "assignments conflict, refusing", idtxt, m.nmatches, m.names);
        }
        gs_podcache_free_copy(m.pods, m.npods);
    }
    if (code == 0) {
        V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
        resp.n_container_responses = nc;
        resp.container_responses = rp;
        *out = pack(&resp.base, outlen);
        if (!*out)
            code = ST_INTERNAL;
    }
out:
    free(bufs);
    free(rp);
    v1beta1__allocate_request__free_unpacked(req, NULL);
    return code;
}

/* Preferred allocation: the replica set of the oldest pending pod whose
 * assignment fits the request; kubelet admits pods oldest first too. */
static int do_preferred(struct gs_plugin *p, const uint8_t *in, size_t inlen, uint8_t **out,
                        size_t *outlen, char *msg, size_t msglen)
{
    V1beta1__PreferredAllocationRequest *req =
        v1beta1__preferred_allocation_request__unpack(NULL, inlen, in);
    if (!req) {
        snprintf(msg, msglen, "GetPreferredAllocation: cannot decode the request (%zu bytes)",
                 inlen);
        return ST_INVALID;
    }
    size_t nc = req->n_container_requests;
    V1beta1__ContainerPreferredAllocationResponse *rs = calloc(nc ? nc : 1, sizeof *rs);
    V1beta1__ContainerPreferredAllocationResponse **rsp = calloc(nc ? nc : 1, sizeof *rsp);
    char ***chosen = calloc(nc ? nc : 1, sizeof *chosen);
    struct gs_pod *pods = NULL;
    int npods = p->pods ? gs_podcache_copy(p->pods, &pods) : 0;
    int code = 0;
    if (!rs || !rsp || !chosen) {
        code = ST_INTERNAL;
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
            code = ST_INTERNAL;
            goto out;
        }
        int best = -1;
        struct gs_assignment best_a;
        for (int i = 0; i < npods; i++) {
            struct gs_assignment a;
            char err[256];
            if (pods[i].terminal || pods[i].allocated || !pods[i].assignment ||
                gs_assignment_parse(pods[i].assignment, strlen(pods[i].assignment), &a, err,
                                    sizeof err) != 0 ||
                a.ngpus != size || (a.node[0] && strcmp(a.node, p->node) != 0))
                continue;
            int ok = 1;
            for (int g = 0; ok && g < a.ngpus; g++)
                ok = id_in(a.gpus[g].replica, cr->available_deviceids, cr->n_available_deviceids);
            for (size_t k = 0; ok && k < cr->n_must_include_deviceids; k++) {
                int in_a = 0;
                for (int g = 0; g < a.ngpus; g++)
                    in_a |= strcmp(a.gpus[g].replica, cr->must_include_deviceids[k]) == 0;
                ok = in_a;
            }
            if (ok && (best < 0 || strcmp(pods[i].created, pods[best].created) < 0 ||
                       (strcmp(pods[i].created, pods[best].created) == 0 &&
                        strcmp(pods[i].name, pods[best].name) < 0))) {
                best = i;
                best_a = a;
            }
        }
        int k = 0;
        if (best >= 0) {
            for (int g = 0; g < best_a.ngpus; g++)
                for (size_t j = 0; j < cr->n_available_deviceids; j++)
                    if (strcmp(cr->available_deviceids[j], best_a.gpus[g].replica) == 0)
                        chosen[c][k++] = cr->available_deviceids[j];
        } else {
            /* No pod fits: must-include first, then the first available. */
            for (size_t j = 0; j < cr->n_must_include_deviceids && k < size; j++)
                chosen[c][k++] = cr->must_include_deviceids[j];
            for (size_t j = 0; j < cr->n_available_deviceids && k < size; j++)
                if (!id_in(cr->available_deviceids[j], chosen[c], (size_t)k))
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
        code = ST_INTERNAL;
out:
    if (code)
        snprintf(msg, msglen, "GetPreferredAllocation: out of memory");
    for (size_t c = 0; chosen && c < nc; c++)
        free(chosen[c]);
    free(chosen);
    free(rs);
    free(rsp);
    gs_podcache_free_copy(pods, npods);
    v1beta1__preferred_allocation_request__free_unpacked(req, NULL);
    return code;
}

int gs_plugin_unary(void *ud, const char *method, const uint8_t *in, size_t inlen,
                    uint8_t **out, size_t *outlen, char *msg, size_t msglen)
{
    struct gs_plugin *p = ud;
    if (strcmp(method, "/v1beta1.DevicePlugin/Allocate") == 0)
        return do_allocate(p, in, inlen, out, outlen, msg, msglen);
    if (strcmp(method, "/v1beta1.DevicePlugin/GetPreferredAllocation") == 0)
        return do_preferred(p, in, inlen, out, outlen, msg, msglen);
    if (strcmp(method, "/v1beta1.DevicePlugin/GetDevicePluginOptions") == 0) {
        V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
        o.pre_start_required = 0;
        o.get_preferred_allocation_available = 1;
        *out = pack(&o.base, outlen);
        return *out ? 0 : ST_INTERNAL;
    }
    if (strcmp(method, "/v1beta1.DevicePlugin/PreStartContainer") == 0) {
        V1beta1__PreStartContainerRequest *r =
            v1beta1__pre_start_container_request__unpack(NULL, inlen, in);
        if (!r) {
            snprintf(msg, msglen, "PreStartContainer: cannot decode the request");
            return ST_INVALID;
        }
        v1beta1__pre_start_container_request__free_unpacked(r, NULL);
        V1beta1__PreStartContainerResponse o = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
        *out = pack(&o.base, outlen);
        return *out ? 0 : ST_INTERNAL;
    }
    snprintf(msg, msglen, "unknown method %s", method);
    return ST_UNIMPLEMENTED;
}
