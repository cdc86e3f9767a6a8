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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "annotation.h"
#include "deviceplugin_v1beta1.pb-c.h"
#include "grpc_server.h"
#include "fit.h"
#include "plugin.h"
#include "podresources_v1.pb-c.h"
#include "statedir.h"

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

/* Whether assignment a is on exactly the GPUs of the IDs in set (one ID per
 * GPU). A replica number is only a token for one share of its GPU: which
 * token a container holds does not matter, which GPUs it is on does. */
static int same_gpus(const struct gs_assignment *a, char *const *set, size_t n)
{
    if ((size_t)a->ngpus != n)
        return 0;
    for (size_t k = 0; k < n; k++) {
        char uuid[GS_UUID_MAX];
        int found = 0;
        if (gs_replica_split(set[k], uuid, sizeof uuid, NULL) != 0)
            return 0;
        for (int i = 0; i < a->ngpus; i++)
            found |= strcmp(a->gpus[i].uuid, uuid) == 0;
        if (!found)
            return 0;
    }
    return 1;
}

struct match {
    int npods;
    struct gs_pod *pods;
    int ngpu_matches;  /* live pods whose assignment is on exactly these GPUs */
    int nmatches;      /* ... and names exactly these IDs */
    char names[512];   /* the exact matches, for messages */
    char bad[700];     /* a malformed assignment on this node, for messages */
    int bad_mentions;  /* ... whose text names one of the requested IDs */
};

static void find_pods(struct gs_plugin *p, char *const *ids, size_t n, struct match *m)
{
    m->npods = gs_podcache_copy(p->pods, &m->pods);
    m->ngpu_matches = 0;
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
        if (a.node[0] && strcmp(a.node, p->node) != 0)
            continue;
        if (!same_gpus(&a, ids, n))
            continue;
        m->ngpu_matches++;
        if (!same_set(&a, ids, n))
            continue;
        m->nmatches++;
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

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Checks a device-ID set: 1..16 IDs "<uuid>::<k>", k < replicas, each on a
 * GPU of this node, at most one per GPU. Fills gpu[i] (inventory index of
 * ids[i]) and order (positions of ids sorted by NVML index). */
static int check_ids(struct gs_plugin *p, const char *what, char *const *ids, size_t n,
                     int *gpu, int *order, char *msg, size_t msglen)
{
    if (n == 0 || n > GS_ASSIGN_MAX_GPUS) {
        snprintf(msg, msglen, "%s: %zu devices requested (1..%d)", what, n, GS_ASSIGN_MAX_GPUS);
        return ST_INVALID;
    }
    int idx[GS_ASSIGN_MAX_GPUS][2];
    for (size_t i = 0; i < n; i++) {
        char uuid[GS_UUID_MAX];
        unsigned k = 0;
        if (!ids[i] || gs_replica_split(ids[i], uuid, sizeof uuid, &k) != 0) {
            snprintf(msg, msglen, "%s: '%.140s' is not a gpuslice device ID (<GPU uuid>::<n>)",
                     what, ids[i] ? ids[i] : "(null)");
            return ST_INVALID;
        }
        pthread_mutex_lock(&p->inv->lock);
        int g = gs_inventory_find(p->inv, uuid);
        int index = g >= 0 ? (int)p->inv->gpus[g].index : -1;
        pthread_mutex_unlock(&p->inv->lock);
        if (g < 0 || k >= (unsigned)p->replicas) {
            snprintf(msg, msglen, "%s: device %.140s is not a device of node %s", what, ids[i],
                     p->node);
            return ST_FAILED_PRECONDITION;
        }
        for (size_t j = 0; j < i; j++)
            if (gpu[j] == g) {
                snprintf(msg, msglen, "%s: devices %.140s and %.140s are on the same GPU; a "
                         "container gets at most one share of each GPU", what, ids[j], ids[i]);
                return ST_INVALID;
            }
        gpu[i] = g;
        idx[i][0] = index;
        idx[i][1] = (int)i;
    }
    qsort(idx, n, sizeof idx[0], cmp_idx);
    for (size_t i = 0; i < n; i++)
        order[i] = idx[i][1];
    return 0;
}

/* The state key of a device-ID set: "a-" + FNV-1a 64 of the sorted IDs.
 * Kubelet never gives one device to two live containers, so two live
 * allocations never share a key; a collision is detected through the
 * ids file (alloc_dirs). */
static void alloc_key(char *const *ids, size_t n, char *out, size_t outlen)
{
    const char *sorted[GS_ASSIGN_MAX_GPUS] = {0};
    for (size_t i = 0; i < n; i++)
        sorted[i] = ids[i];
    qsort(sorted, n, sizeof sorted[0], cmp_str);
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        for (const char *c = sorted[i]; *c; c++) {
            h ^= (unsigned char)*c;
            h *= 1099511628211ULL;
        }
        h ^= '\n';
        h *= 1099511628211ULL;
    }
    snprintf(out, outlen, "a-%016llx", (unsigned long long)h);
}

/* Records the allocation on the pod: a merge patch conditional on the
 * resourceVersion we matched, re-checked and retried on 409. */
static int record_claim(struct gs_plugin *p, const struct gs_pod *pod, char *const *ids,
                        size_t n)
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
        if (kube_get_json(p->kc, path, &cur, err, sizeof err) != 200) {
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

/* Writes text to dir/name atomically: a temporary file in dir, fsync,
 * rename. Readers see the old file or the new one, never a part. */
static int write_atomic(const char *dir, const char *name, const char *text)
{
    char tmp[1200], dst[1200];
    snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, name);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return -1;
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    int ok = off == len && fchmod(fd, 0644) == 0 && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, dst) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e ? e : EIO;
        return -1;
    }
    return 0;
}

/* Reads a small file into buf; returns its length or -1. */
static long read_small(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t r = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[r] = '\0';
    return (long)r;
}

/* The directories of an allocation: <state-root>/<key> (the region,
 * read-write in the container) and <state-root>/.limits/<key> (limits.conf,
 * read-only in the container; the tenant cannot edit its own limits). The
 * ids file there guards against a key collision. */
static int alloc_dirs(struct gs_plugin *p, char *const *ids, size_t n, char *key, size_t keylen,
                      char *state_dir, size_t sdlen, char *limits_dir, size_t ldlen, char *msg,
                      size_t msglen)
{
    alloc_key(ids, n, key, keylen);
    if (gs_statedir_agent_region_dir(state_dir, sdlen, p->state_root, key) != 0 ||
        gs_statedir_agent_limits_dir(limits_dir, ldlen, p->state_root, key) != 0) {
        snprintf(msg, msglen, "state root %s is too long", p->state_root);
        return ST_INTERNAL;
    }
    if (mkdirs(state_dir, 0755) != 0 || mkdirs(limits_dir, 0755) != 0) {
        snprintf(msg, msglen, "cannot create state directory %s: %s", state_dir,
                 strerror(errno));
        return ST_INTERNAL;
    }
    char want[GS_ASSIGN_MAX_GPUS * (GS_REPLICA_ID_MAX + 1) + 1] = "";
    const char *sorted[GS_ASSIGN_MAX_GPUS] = {0};
    for (size_t i = 0; i < n; i++)
        sorted[i] = ids[i];
    qsort(sorted, n, sizeof sorted[0], cmp_str);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(want);
        snprintf(want + l, sizeof want - l, "%s\n", sorted[i]);
    }
    char have[sizeof want + 8], path[1200];
    snprintf(path, sizeof path, "%s/ids", limits_dir);
    long r = read_small(path, have, sizeof have);
    if (r >= 0 && strcmp(have, want) != 0) {
        snprintf(msg, msglen, "state key %s collides with another device set (%s); refusing",
                 key, path);
        return ST_INTERNAL;
    }
    if (r < 0 && write_atomic(limits_dir, "ids", want) != 0) {
        snprintf(msg, msglen, "cannot write %s: %s", path, strerror(errno));
        return ST_INTERNAL;
    }
    return 0;
}

#define MAX_KV 16
struct resp_buf {
    V1beta1__ContainerAllocateResponse r;
    V1beta1__ContainerAllocateResponse__EnvsEntry env[MAX_KV];
    V1beta1__ContainerAllocateResponse__EnvsEntry *envp[MAX_KV];
    V1beta1__ContainerAllocateResponse__AnnotationsEntry ann[2];
    V1beta1__ContainerAllocateResponse__AnnotationsEntry *annp[2];
    V1beta1__Mount mnt[4];
    V1beta1__Mount *mntp[4];
    V1beta1__CDIDevice cdi[GS_ASSIGN_MAX_GPUS];
    V1beta1__CDIDevice *cdip[GS_ASSIGN_MAX_GPUS];
    char strs[MAX_KV][2][GS_ASSIGN_MAX_GPUS * GS_UUID_MAX];
    char state_dir[600];
    char limits_dir[620];
    char key[32];
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

/* One container's answer. It depends only on the device IDs (each names
 * its GPU), never on which pod they are for: the limits are late-bound,
 * written into limits.conf at PreStartContainer once kubelet can tell
 * which pod holds the devices. Until then GPUSLICE_CONFIG names a file
 * that may not exist (or is a previous owner's, which kubelet never
 * starts a container with: PreStartContainer must succeed first), and the
 * interposer refuses the GPU on a missing file: it fails closed. */
static int build_response(struct gs_plugin *p, char *const *ids, size_t n, const int *gpu,
                          const int *order, struct resp_buf *b, char *msg, size_t msglen)
{
    memset(b, 0, sizeof *b);
    v1beta1__container_allocate_response__init(&b->r);
    b->r.envs = b->envp;
    b->r.mounts = b->mntp;
    b->r.annotations = b->annp;
    b->r.cdi_devices = b->cdip;
    char visible[GS_ASSIGN_MAX_GPUS * GS_UUID_MAX] = "";
    for (size_t j = 0; j < n; j++) {
        char uuid[GS_UUID_MAX];
        pthread_mutex_lock(&p->inv->lock);
        snprintf(uuid, sizeof uuid, "%s", p->inv->gpus[gpu[order[j]]].uuid);
        pthread_mutex_unlock(&p->inv->lock);
        size_t l = strlen(visible);
        snprintf(visible + l, sizeof visible - l, "%s%s", j ? "," : "", uuid);
        if (p->cdi) {
            v1beta1__cdidevice__init(&b->cdi[j]);
            snprintf(b->cdi_names[j], sizeof b->cdi_names[j], "nvidia.com/gpu=%s", uuid);
            b->cdi[j].name = b->cdi_names[j];
            b->cdip[j] = &b->cdi[j];
            b->r.n_cdi_devices++;
        }
    }
    if (!p->cdi)
        add_env(b, "NVIDIA_VISIBLE_DEVICES", visible);
    add_env(b, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    add_env(b, "GPUSLICE_REGION", GS_STATEDIR_CONTAINER_REGION);
    add_env(b, "GPUSLICE_CONFIG", GS_STATEDIR_CONTAINER_CONFIG);
    int code = alloc_dirs(p, ids, n, b->key, sizeof b->key, b->state_dir, sizeof b->state_dir,
                          b->limits_dir, sizeof b->limits_dir, msg, msglen);
    if (code)
        return code;
    add_mount(b, p->lib_host, p->lib_container, 1);
    add_mount(b, p->preload_host, "/etc/ld.so.preload", 1);
    add_mount(b, b->state_dir, GS_STATEDIR_CONTAINER, 0);
    add_mount(b, b->limits_dir, GS_STATEDIR_CONTAINER_LIMITS, 1);
    v1beta1__container_allocate_response__annotations_entry__init(&b->ann[0]);
    b->ann[0].key = "gpuslice.io/state-key";
    b->ann[0].value = b->key;
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
                              "know whether any pod was scheduled to these devices; refusing");
        goto out;
    }
    for (size_t c = 0; c < nc && code == 0; c++) {
        char **ids = req->container_requests[c]->devices_ids;
        size_t n = req->container_requests[c]->n_devices_ids;
        char idtxt[2048], what[2100];
        int gpu[GS_ASSIGN_MAX_GPUS], order[GS_ASSIGN_MAX_GPUS];
        if (n > GS_ASSIGN_MAX_GPUS) {
            code = ST_INVALID;
            snprintf(msg, msglen, "Allocate: container %zu asks for %zu devices (1..%d)", c, n,
                     GS_ASSIGN_MAX_GPUS);
            break;
        }
        ids_text(ids, n, idtxt, sizeof idtxt);
        snprintf(what, sizeof what, "Allocate [%s]", idtxt);
        code = check_ids(p, what, ids, n, gpu, order, msg, msglen);
        if (code)
            break;
        /* Fail early for a pod nobody scheduled here: some live pod on this
         * node must have an assignment on exactly these GPUs. Which pod it
         * is does not matter yet (PreStartContainer decides, knowing). */
        struct match m;
        find_pods(p, ids, n, &m);
        if (m.ngpu_matches == 0) { /* the watch may lag a fresh binding */
            gs_podcache_free_copy(m.pods, m.npods);
            gs_podcache_relist(p->pods);
            find_pods(p, ids, n, &m);
        }
        if (m.ngpu_matches == 0) {
            code = ST_FAILED_PRECONDITION;
            snprintf(msg, msglen, "Allocate [%s]: no live pod on node %s has a %s on these "
                                  "GPUs; was it scheduled by the gpuslice extender? Refusing "
                                  "rather than guessing%s", idtxt, p->node, GS_ANN_ASSIGNMENT,
                     m.bad);
        } else if (m.nmatches > 1) {
            code = ST_FAILED_PRECONDITION;
            snprintf(msg, msglen, "Allocate [%s]: %d pods claim these devices (%s); the "
                                  "assignments conflict, refusing", idtxt, m.nmatches, m.names);
        }
        gs_podcache_free_copy(m.pods, m.npods);
        if (code == 0)
            code = build_response(p, ids, n, gpu, order, &bufs[c], msg, msglen);
        if (code == 0) {
            rp[c] = &bufs[c].r;
            if (p->test_allocate_delay_ms > 0)
                sleep_ms(p->test_allocate_delay_ms);
            kube_log(2, "Allocate [%s] -> state %s (limits at PreStartContainer)", idtxt,
                     bufs[c].key);
        }
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

/* ---- PreStartContainer: the pod is known now ---- */

/* A Kubernetes name as kubelet reports it: 1..253 of [A-Za-z0-9._-].
 * Anything else (a newline would inject a line into limits.conf) is a
 * malformed answer. */
static int k8s_name_ok(const char *s, size_t max)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

struct holder {
    char ns[64], pod[254], container[254];
};

/* Asks kubelet's pod-resources API which container holds exactly ids (of
 * our resource). Returns 0 with h filled, else a status with msg. */
static int find_holder(struct gs_plugin *p, const char *what, char *const *ids, size_t n,
                       struct holder *h, char *msg, size_t msglen)
{
    V1__ListPodResourcesRequest rq = V1__LIST_POD_RESOURCES_REQUEST__INIT;
    size_t rqlen = 0;
    uint8_t *rqb = pack(&rq.base, &rqlen);
    uint8_t *ans = NULL;
    size_t anslen = 0;
    char err[600] = "";
    if (!rqb) {
        snprintf(msg, msglen, "%s: out of memory", what);
        return ST_INTERNAL;
    }
    int st = gs_rpc_call(p->podres_socket, "/v1.PodResourcesLister/List", rqb, rqlen, &ans,
                         &anslen, 5000, err, sizeof err);
    free(rqb);
    if (st != 0 || !ans) {
        free(ans);
        snprintf(msg, msglen, "%s: cannot ask kubelet which pod holds these devices "
                 "(pod-resources API at %s: %s); not starting the container without its "
                 "limits", what, p->podres_socket, err[0] ? err : "no answer");
        return ST_FAILED_PRECONDITION;
    }
    V1__ListPodResourcesResponse *r = v1__list_pod_resources_response__unpack(NULL, anslen, ans);
    free(ans);
    if (!r) {
        snprintf(msg, msglen, "%s: kubelet's pod-resources answer (%zu bytes) does not decode "
                 "as a ListPodResourcesResponse; not starting the container without its limits",
                 what, anslen);
        return ST_FAILED_PRECONDITION;
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
                if (!cd->resource_name || strcmp(cd->resource_name, p->resource) != 0)
                    continue;
                for (size_t k = 0; k < cd->n_device_ids; k++) {
                    held++;
                    inset += cd->device_ids[k] && id_in(cd->device_ids[k], ids, n);
                }
            }
            if (inset == 0)
                continue;
            int named = k8s_name_ok(pr->namespace_, 63) && k8s_name_ok(pr->name, 253) &&
                        k8s_name_ok(cr->name, 253);
            if (!named) {
                malformed++;
                continue;
            }
            if (held != n || inset != n) {
                partial++;
                snprintf(part, sizeof part, "; container %.63s/%.120s/%.60s holds %zu of them "
                         "among %zu devices", pr->namespace_, pr->name, cr->name, inset, held);
                continue;
            }
            if (nholders++ == 0) {
                snprintf(h->ns, sizeof h->ns, "%s", pr->namespace_);
                snprintf(h->pod, sizeof h->pod, "%s", pr->name);
                snprintf(h->container, sizeof h->container, "%s", cr->name);
            }
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s%.63s/%.120s/%.60s", l ? ", " : "",
                     pr->namespace_, pr->name, cr->name);
        }
    }
    size_t npods = r->n_pod_resources;
    v1__list_pod_resources_response__free_unpacked(r, NULL);
    if (nholders == 1 && !partial && !malformed)
        return 0;
    if (nholders > 1)
        snprintf(msg, msglen, "%s: kubelet reports %d containers holding these devices (%s); "
                 "refusing", what, nholders, names);
    else if (malformed)
        snprintf(msg, msglen, "%s: kubelet's pod-resources answer names these devices for a "
                 "container with a missing or malformed namespace/pod/container name; refusing",
                 what);
    else if (partial)
        snprintf(msg, msglen, "%s: kubelet's pod-resources answer disagrees with the request%s; "
                 "refusing", what, part);
    else
        snprintf(msg, msglen, "%s: no container on this node holds these devices according to "
                 "kubelet's pod-resources API (%zu pods listed); refusing, nothing written",
                 what, npods);
    return ST_FAILED_PRECONDITION;
}

/* Finds the live pod ns/name in the cache (re-listing once on a miss). */
static int find_cached(struct gs_plugin *p, const struct holder *h, struct gs_pod *out)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        struct gs_pod *pods = NULL;
        int np = gs_podcache_copy(p->pods, &pods), found = -1;
        for (int i = 0; i < np && found < 0; i++)
            if (!pods[i].terminal && strcmp(pods[i].ns, h->ns) == 0 &&
                strcmp(pods[i].name, h->pod) == 0)
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

/* The limits file of one container: KEY=VALUE lines in docs/configuration.md's
 * format, GPU j = j-th GPU in NVML (PCI bus) order, as NVIDIA_VISIBLE_DEVICES. */
static void limits_text(struct gs_plugin *p, const struct holder *h, const struct gs_pod *pod,
                        const struct gs_assignment *a, const int *gpu, const int *order,
                        size_t n, char *out, size_t len)
{
    char label[600];
    snprintf(label, sizeof label, "%s/%s/%s", h->ns, h->pod, h->container);
    if (strlen(label) >= 128) /* the interposer's label limit */
        snprintf(label, sizeof label, "%.30s/%.60s/%.30s", h->ns, h->pod, h->container);
    int l = snprintf(out, len, "# gpuslice-node-agent, PreStartContainer: pod uid %s\n"
                     "GPUSLICE_CONTAINER=%s\nGPUSLICE_COMPUTE_MODE=%s\n", pod->uid, label,
                     a->share_mode ? "share" : "cap");
    for (size_t j = 0; j < n && l > 0 && (size_t)l < len; j++) {
        char uuid[GS_UUID_MAX];
        pthread_mutex_lock(&p->inv->lock);
        snprintf(uuid, sizeof uuid, "%s", p->inv->gpus[gpu[order[j]]].uuid);
        pthread_mutex_unlock(&p->inv->lock);
        for (int i = 0; i < a->ngpus; i++) {
            if (strcmp(a->gpus[i].uuid, uuid) != 0)
                continue;
            l += snprintf(out + l, len - (size_t)l, "GPUSLICE_MEMORY_LIMIT_%zu=%lluMi\n", j,
                          (unsigned long long)a->gpus[i].memory_mib);
            if (a->gpus[i].cores > 0 && (size_t)l < len)
                l += snprintf(out + l, len - (size_t)l, "GPUSLICE_CORES_%zu=%u\n", j,
                              a->gpus[i].cores);
        }
    }
}

/* What pod q uses on this node: its allocated record mapped through its
 * assignment (the GPUs it really holds) when present and consistent, else
 * its assignment (a pod not started yet). 0, or -1 when q does not count. */
static int pod_usage(const struct gs_plugin *p, const struct gs_pod *q, struct gs_assignment *u)
{
    struct gs_assignment a;
    char err[256];
    if (q->terminal || !q->assignment ||
        gs_assignment_parse(q->assignment, strlen(q->assignment), &a, err, sizeof err) != 0 ||
        (a.node[0] && strcmp(a.node, p->node) != 0))
        return -1;
    *u = a;
    if (q->allocated) {
        char held[GS_ASSIGN_MAX_GPUS][GS_REPLICA_ID_MAX];
        int k = gs_allocated_parse(q->allocated, strlen(q->allocated), held, GS_ASSIGN_MAX_GPUS,
                                   err, sizeof err);
        struct gs_assignment r;
        if (k > 0 && gs_assignment_rebind(&a, (const char (*)[GS_REPLICA_ID_MAX])held, k, &r,
                                          err, sizeof err) == 0)
            *u = r;
    }
    return 0;
}

static int32_t milli_of(unsigned cores)
{
    return cores ? (int32_t)cores * 10 : 1; /* as the extender counts (podspec.c) */
}

/* Whether pod self, with limits eff on the GPUs it really holds, fits
 * there on the node's own truth: every other live pod of this node that
 * holds (allocated) or is assigned (not yet started) a share of those GPUs,
 * the GPUs' memory, 100 % of cores and --replicas slots, under the
 * extender's rule (gs_gpu_fit). Returns 1, or 0 with the reason in why. */
static int fits_on_held(struct gs_plugin *p, const struct gs_pod *self,
                        const struct gs_assignment *eff, char *why, size_t whylen)
{
    struct gs_pod *pods = NULL;
    int np = gs_podcache_copy(p->pods, &pods), ok = 1;
    for (int i = 0; i < eff->ngpus && ok; i++) {
        const struct gs_assign_gpu *mine = &eff->gpus[i];
        struct gs_share_use g;
        memset(&g, 0, sizeof g);
        pthread_mutex_lock(&p->inv->lock);
        int gi = gs_inventory_find(p->inv, mine->uuid);
        g.mem_total_mib = gi >= 0 ? (int64_t)(p->inv->gpus[gi].mem_total >> 20) : 0;
        pthread_mutex_unlock(&p->inv->lock);
        g.slots_total = p->replicas;
        char others[400] = "";
        for (int j = 0; j < np; j++) {
            struct gs_assignment u;
            if (strcmp(pods[j].uid, self->uid) == 0 || pod_usage(p, &pods[j], &u) != 0)
                continue;
            for (int k = 0; k < u.ngpus; k++) {
                if (strcmp(u.gpus[k].uuid, mine->uuid) != 0)
                    continue;
                g.milli_used += milli_of(u.gpus[k].cores);
                g.mem_used_mib += (int64_t)u.gpus[k].memory_mib;
                g.slots_used++;
                size_t l = strlen(others);
                snprintf(others + l, sizeof others - l, "%s%.40s/%.60s %lluMi/%u%%%s",
                         l ? ", " : "", pods[j].ns, pods[j].name,
                         (unsigned long long)u.gpus[k].memory_mib, u.gpus[k].cores,
                         pods[j].allocated ? "" : " (assigned, not started)");
            }
        }
        const char *short_of =
            gs_share_fit(&g, milli_of(mine->cores), (int64_t)mine->memory_mib);
        if (short_of) {
            ok = 0;
            snprintf(why, whylen, "it does not fit on GPU %s (%s: needs %lluMi/%u%% cores; "
                     "%lldMi of %lldMi, %d.%d%% cores and %d of %d replicas already taken by "
                     "%s)", mine->uuid, short_of, (unsigned long long)mine->memory_mib, mine->cores,
                     (long long)g.mem_used_mib, (long long)g.mem_total_mib, g.milli_used / 10,
                     g.milli_used % 10, g.slots_used, g.slots_total,
                     others[0] ? others : "no other pod");
        }
    }
    gs_podcache_free_copy(pods, np);
    return ok;
}

static int do_prestart(struct gs_plugin *p, const uint8_t *in, size_t inlen, uint8_t **out,
                       size_t *outlen, char *msg, size_t msglen)
{
    V1beta1__PreStartContainerRequest *req =
        v1beta1__pre_start_container_request__unpack(NULL, inlen, in);
    if (!req) {
        snprintf(msg, msglen, "PreStartContainer: cannot decode the request (%zu bytes)", inlen);
        return ST_INVALID;
    }
    char **ids = req->devices_ids;
    size_t n = req->n_devices_ids;
    char idtxt[2048] = "", what[2100];
    int gpu[GS_ASSIGN_MAX_GPUS], order[GS_ASSIGN_MAX_GPUS];
    struct holder h;
    struct gs_pod pod;
    struct gs_assignment a;
    int code = 0, have_pod = 0, locked = 0;
    memset(&pod, 0, sizeof pod);
    if (n <= GS_ASSIGN_MAX_GPUS)
        ids_text(ids, n, idtxt, sizeof idtxt);
    snprintf(what, sizeof what, "PreStartContainer [%s]", idtxt);
    code = check_ids(p, what, ids, n, gpu, order, msg, msglen);
    if (code)
        goto out;
    if (!p->pods) {
        code = ST_FAILED_PRECONDITION;
        snprintf(msg, msglen, "%s: the agent has no API server connection, so it cannot read "
                 "the pod's limits; refusing", what);
        goto out;
    }
    code = find_holder(p, what, ids, n, &h, msg, msglen);
    if (code)
        goto out;
    if (find_cached(p, &h, &pod) != 0) {
        code = ST_FAILED_PRECONDITION;
        snprintf(msg, msglen, "%s: kubelet says pod %s/%s (container %s) holds these devices, "
                 "but no live pod of that name is bound to node %s", what, h.ns, h.pod,
                 h.container, p->node);
        goto out;
    }
    have_pod = 1;
    char err[256];
    if (!pod.assignment) {
        code = ST_FAILED_PRECONDITION;
        snprintf(msg, msglen, "%s: pod %s/%s has no %s; was it scheduled by the gpuslice "
                 "extender? Not starting it without limits", what, h.ns, h.pod,
                 GS_ANN_ASSIGNMENT);
        goto out;
    }
    if (gs_assignment_parse(pod.assignment, strlen(pod.assignment), &a, err, sizeof err) != 0) {
        code = ST_FAILED_PRECONDITION;
        snprintf(msg, msglen, "%s: pod %s/%s: %s", what, h.ns, h.pod, err);
        goto out;
    }
    char as[1200] = "";
    for (int i = 0; i < a.ngpus; i++) {
        size_t l = strlen(as);
        snprintf(as + l, sizeof as - l, "%s%s", i ? "," : "", a.gpus[i].replica);
    }
    /* The pod's limits on the GPUs it really holds. */
    struct gs_assignment eff;
    char held[GS_ASSIGN_MAX_GPUS][GS_REPLICA_ID_MAX];
    for (size_t i = 0; i < n; i++)
        snprintf(held[i], sizeof held[i], "%s", ids[i]);
    if ((a.node[0] && strcmp(a.node, p->node) != 0) ||
        gs_assignment_rebind(&a, (const char (*)[GS_REPLICA_ID_MAX])held, (int)n, &eff, err,
                             sizeof err) != 0) {
        code = ST_FAILED_PRECONDITION;
        snprintf(msg, msglen, "%s: pod %s/%s holds these devices, but its %s does not match "
                 "them (%s on node %s: %s); refusing", what, h.ns, h.pod, GS_ANN_ASSIGNMENT, as,
                 a.node[0] ? a.node : p->node,
                 a.node[0] && strcmp(a.node, p->node) != 0 ? "another node" : err);
        goto out;
    }
    int recorded = 0;
    if (pod.allocated) {
        char prev[GS_ASSIGN_MAX_GPUS][GS_REPLICA_ID_MAX];
        int k = gs_allocated_parse(pod.allocated, strlen(pod.allocated), prev,
                                   GS_ASSIGN_MAX_GPUS, err, sizeof err);
        recorded = k == (int)n;
        for (int i = 0; recorded && i < k; i++)
            recorded = id_in(prev[i], ids, n);
    }
    int cross = !same_gpus(&a, ids, n);
    if (cross && !recorded) {
        /* kubelet gave the pod replicas of GPUs its scheduling decision did
         * not count (admitted out of the order the hint guessed). Accept
         * only if it fits there on this node's own books; the check, the
         * allocated record (which makes the next check and the extender
         * count the pod where it really is) and the limits are one step
         * under the agent's own mutex, so two such swaps cannot both take
         * the last room. In-process only: nothing to leak. */
        pthread_mutex_lock(&p->lock);
        locked = 1;
        char why[1000];
        if (!fits_on_held(p, &pod, &eff, why, sizeof why)) {
            code = ST_FAILED_PRECONDITION;
            snprintf(msg, msglen, "%s: pod %s/%s holds these devices, but its %s is for other "
                     "GPUs (%s on node %s) and %s; refusing rather than overcommitting the GPU "
                     "(nothing written; delete the pod to reschedule it)", what, h.ns, h.pod,
                     GS_ANN_ASSIGNMENT, as, a.node[0] ? a.node : p->node, why);
            goto out;
        }
        if (record_claim(p, &pod, ids, n) != 0) {
            code = ST_FAILED_PRECONDITION;
            snprintf(msg, msglen, "%s: pod %s/%s holds replicas of other GPUs than its %s "
                     "(%s) and fits there, but recording %s failed (see the agent's log); "
                     "refusing until it can be recorded, so that every reader counts the pod "
                     "where it really is", what, h.ns, h.pod, GS_ANN_ASSIGNMENT, as,
                     GS_ANN_ALLOCATED);
            goto out;
        }
        recorded = 1;
        kube_log(2, "%s: pod %s/%s holds replicas of other GPUs than its assignment (%s); it "
                 "fits there, accepted with its own limits", what, h.ns, h.pod, as);
    } else if (!same_set(&a, ids, n)) {
        kube_log(2, "%s: pod %s/%s holds other replicas than its assignment names (kubelet "
                 "admitted pods out of the hinted order); its limits follow the pod", what,
                 h.ns, h.pod);
    }
    char key[32], state_dir[600], limits_dir[620], path[1300];
    code = alloc_dirs(p, ids, n, key, sizeof key, state_dir, sizeof state_dir, limits_dir,
                      sizeof limits_dir, msg, msglen);
    if (code)
        goto out;
    /* A new owner of these devices: the previous owner's region (its
     * processes are gone, kubelet freed the devices) is not ours to keep. */
    char owner[128] = "";
    snprintf(path, sizeof path, "%s/pod_uid", limits_dir);
    if (read_small(path, owner, sizeof owner) > 0 && strcmp(owner, pod.uid) != 0) {
        char region[700];
        snprintf(region, sizeof region, "%s/region", state_dir);
        if (unlink(region) == 0)
            kube_log(2, "%s: devices change owner (%s -> %s); removed the old region", what,
                     owner, pod.uid);
    }
    char text[4096];
    limits_text(p, &h, &pod, &eff, gpu, order, n, text, sizeof text);
    if (write_atomic(limits_dir, "limits.conf", text) != 0 ||
        write_atomic(limits_dir, "pod_uid", pod.uid) != 0) {
        code = ST_INTERNAL;
        snprintf(msg, msglen, "%s: cannot write %s/limits.conf: %s", what, limits_dir,
                 strerror(errno));
        goto out;
    }
    /* Record the allocation on the pod (once; a container restart calls
     * PreStartContainer again with the same devices). */
    if (!recorded)
        record_claim(p, &pod, ids, n);
    kube_log(2, "%s -> %s/%s/%s: %s/limits.conf", what, h.ns, h.pod, h.container, limits_dir);
    V1beta1__PreStartContainerResponse o = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
    *out = pack(&o.base, outlen);
    if (!*out)
        code = ST_INTERNAL;
out:
    if (locked)
        pthread_mutex_unlock(&p->lock);
    if (have_pod) {
        free(pod.assignment);
        free(pod.allocated);
    }
    v1beta1__pre_start_container_request__free_unpacked(req, NULL);
    return code;
}

/* Who names replica id in the extender's books: 0 no live pod, 1 a pod
 * already recorded as allocated (so it holds other replicas: kubelet
 * admitted out of order), 2 a pod still pending. */
static int id_named(const struct gs_pod *pods, int npods, const char *id)
{
    int who = 0;
    for (int i = 0; i < npods; i++)
        if (!pods[i].terminal && pods[i].assignment && strstr(pods[i].assignment, id)) {
            struct gs_assignment a;
            char err[256];
            if (gs_assignment_parse(pods[i].assignment, strlen(pods[i].assignment), &a, err,
                                    sizeof err) != 0)
                continue;
            for (int g = 0; g < a.ngpus; g++)
                if (strcmp(a.gpus[g].replica, id) == 0)
                    who = who > (pods[i].allocated ? 1 : 2) ? who : (pods[i].allocated ? 1 : 2);
        }
    return who;
}

/* For pod assignment a: one available ID per assigned GPU, its own replica
 * if available, else a must-include ID of that GPU, else the free nominal
 * replica of a pod that holds another one (so that the replicas held stay
 * those the extender counts as used), else one no live pod names, else any.
 * Returns the count chosen (a->ngpus when it fits). */
static int fit_gpus(const struct gs_assignment *a,
                    const V1beta1__ContainerPreferredAllocationRequest *cr,
                    const struct gs_pod *pods, int npods, char **chosen)
{
    for (size_t k = 0; k < cr->n_must_include_deviceids; k++) {
        char uuid[GS_UUID_MAX];
        int on = 0;
        if (gs_replica_split(cr->must_include_deviceids[k], uuid, sizeof uuid, NULL) != 0)
            return 0;
        for (int g = 0; g < a->ngpus; g++)
            on |= strcmp(a->gpus[g].uuid, uuid) == 0;
        if (!on)
            return 0;
    }
    int k = 0;
    for (int g = 0; g < a->ngpus; g++) {
        char *pick = NULL;
        int rank = 5;
        for (size_t j = 0; j < cr->n_available_deviceids; j++) {
            char *id = cr->available_deviceids[j];
            char uuid[GS_UUID_MAX];
            if (gs_replica_split(id, uuid, sizeof uuid, NULL) != 0 ||
                strcmp(uuid, a->gpus[g].uuid) != 0)
                continue;
            int r = strcmp(id, a->gpus[g].replica) == 0 ? 0
                    : id_in(id, cr->must_include_deviceids, cr->n_must_include_deviceids)
                        ? 1
                        : 2 + (id_named(pods, npods, id) + 2) % 3; /* 1->2, 0->3, 2->4 */
            if (r < rank) {
                rank = r;
                pick = id;
            }
        }
        if (!pick)
            return k;
        chosen[k++] = pick;
    }
    return k;
}

/* The order kubelet most likely admits pods in: the order they became
 * bound to this node. kubelet's pod source is a watch on
 * spec.nodeName=<node>, so pods reach its admission in the order of the
 * updates that bound them (the extender writes the assignment, then creates
 * the Binding); it sorts only each batch of additions by creation time.
 * Our own watch sees the same updates in the same order: the
 * resourceVersion at which the agent first saw the pod bound (else the
 * order it saw them in), then creation time and name as tie-breaks. */
static int bound_order(const struct gs_pod *a, const struct gs_pod *b)
{
    if (a->bound_rv && b->bound_rv && a->bound_rv != b->bound_rv)
        return a->bound_rv < b->bound_rv ? -1 : 1;
    if ((!a->bound_rv || !b->bound_rv) && a->bound_seq != b->bound_seq)
        return a->bound_seq < b->bound_seq ? -1 : 1;
    int c = strcmp(a->created, b->created);
    return c ? c : strcmp(a->name, b->name);
}

/* Copies the pods and lists the candidates for a preferred allocation:
 * live, not yet recorded as allocated, well-formed, this node; in the order
 * they became bound here (bound_order). */
static int load_candidates(struct gs_plugin *p, struct gs_pod **pods, int *npods,
                           struct gs_assignment **as, int **cand, int *ncand)
{
    *npods = p->pods ? gs_podcache_copy(p->pods, pods) : 0;
    *as = calloc((size_t)(*npods ? *npods : 1), sizeof **as);
    *cand = calloc((size_t)(*npods ? *npods : 1), sizeof **cand);
    *ncand = 0;
    if (!*as || !*cand)
        return -1;
    for (int i = 0; i < *npods; i++) {
        const struct gs_pod *pd = &(*pods)[i];
        char err[256];
        if (pd->terminal || pd->allocated || !pd->assignment ||
            gs_assignment_parse(pd->assignment, strlen(pd->assignment), &(*as)[i], err,
                                sizeof err) != 0 ||
            ((*as)[i].node[0] && strcmp((*as)[i].node, p->node) != 0))
            continue;
        int at = (*ncand)++;
        while (at > 0) {
            const struct gs_pod *q = &(*pods)[(*cand)[at - 1]];
            if (bound_order(pd, q) >= 0)
                break;
            (*cand)[at] = (*cand)[at - 1];
            at--;
        }
        (*cand)[at] = i;
    }
    return 0;
}

/* Preferred allocation, a hint (PreStartContainer decides the limits once
 * the pod is known): the replica set of the first-bound pending pod whose
 * exact replicas are available; else, replicas of the GPUs of the
 * first-bound pending pod whose GPUs all have one free (a replica number is
 * only a token for one share of its GPU). kubelet admits pods in about
 * that order (bound_order); when it does not, PreStartContainer re-checks
 * the fit on the GPUs really held. */
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
    struct gs_assignment *as = NULL;
    int *cand = NULL;
    int npods = 0, ncand = 0, relisted = 0;
    int code = 0;
    if (!rs || !rsp || !chosen || load_candidates(p, &pods, &npods, &as, &cand, &ncand) != 0) {
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
        int k = 0;
        /* Pass 1: a pod's exact replicas. */
        for (int ci = 0; ci < ncand && k == 0; ci++) {
            const struct gs_assignment *a = &as[cand[ci]];
            if (a->ngpus != size)
                continue;
            int ok = 1;
            for (int g = 0; ok && g < a->ngpus; g++)
                ok = id_in(a->gpus[g].replica, cr->available_deviceids, cr->n_available_deviceids);
            for (size_t m = 0; ok && m < cr->n_must_include_deviceids; m++) {
                int in_a = 0;
                for (int g = 0; g < a->ngpus; g++)
                    in_a |= strcmp(a->gpus[g].replica, cr->must_include_deviceids[m]) == 0;
                ok = in_a;
            }
            if (!ok)
                continue;
            for (int g = 0; g < a->ngpus; g++)
                for (size_t j = 0; j < cr->n_available_deviceids; j++)
                    if (strcmp(cr->available_deviceids[j], a->gpus[g].replica) == 0)
                        chosen[c][k++] = cr->available_deviceids[j];
        }
        /* Pass 2: a pod's GPUs, other replicas of them. */
        for (int ci = 0; ci < ncand && k == 0; ci++) {
            const struct gs_assignment *a = &as[cand[ci]];
            if (a->ngpus != size)
                continue;
            int got = fit_gpus(a, cr, pods, npods, chosen[c]);
            k = got == size ? got : 0;
        }
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
                code = ST_INTERNAL;
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
    free(as);
    free(cand);
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
    if (strcmp(method, "/v1beta1.DevicePlugin/PreStartContainer") == 0)
        return do_prestart(p, in, inlen, out, outlen, msg, msglen);
    if (strcmp(method, "/v1beta1.DevicePlugin/GetDevicePluginOptions") == 0) {
        V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
        o.pre_start_required = 1; /* the limits are written there */
        o.get_preferred_allocation_available = 1;
        *out = pack(&o.base, outlen);
        return *out ? 0 : ST_INTERNAL;
    }
    snprintf(msg, msglen, "unknown method %s", method);
    return ST_UNIMPLEMENTED;
}
