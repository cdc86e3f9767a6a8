/* See dra_plugin.h. */
#include "dra_plugin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent_state.h"
#include "container_edits.h"
#include "dra_claim.h"
#include "dra_objects.h"
#include "dra_v1.pb-c.h"
#include "grpc_server.h"
#include "kube_client.h"
#include "pluginregistration_v1.pb-c.h"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim dra_claim_msg;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device dra_device_msg;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse dra_prep_msg;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry dra_prep_entry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse dra_unprep_msg;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry dra_unprep_entry;

#define DRA_SERVICE "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define DRA_VERSION "v1.DRAPlugin" /* what kubelet's registration calls the service */
#define REG_SERVICE "/pluginregistration.Registration/"
#define DRA_SOCKET "dra.sock"
#define SOCK_MAX 108 /* sun_path */
#define DRA_ERR_MAX 1024
#define CLAIM_ID_PREFIX "dra-claim:" /* the claim's "device set" in the agent's state (ids file) */

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *b = malloc(*len ? *len : 1);
    if (b)
        protobuf_c_message_pack(m, b);
    return b;
}

/* The registration socket, our directory and the service socket. 0, or
 * -1 when one does not fit a unix socket path (gs_dra_check refuses). */
static int sock_paths(const struct gs_dra *d, char *reg, char *dir, char *dra)
{
    int a = snprintf(reg, SOCK_MAX, "%s/%s-reg.sock", d->registry_dir, d->driver);
    int b = snprintf(dir, SOCK_MAX, "%s/%s", d->plugins_dir, d->driver);
    int c = snprintf(dra, SOCK_MAX, "%s/%s/" DRA_SOCKET, d->plugins_dir, d->driver);
    return a >= SOCK_MAX || b >= SOCK_MAX || c >= SOCK_MAX ? -1 : 0;
}

/* A DNS subdomain of at least two labels, at most 63 characters (a DRA
 * driver name): lowercase letters, digits, '-' and '.', each label starting
 * and ending with a letter or digit. */
static int driver_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || !strchr(s, '.'))
        return 0;
    for (size_t i = 0; i < n; i++) {
        int alnum = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9');
        int edge = i == 0 || i == n - 1 || s[i - 1] == '.' || s[i + 1] == '.';
        if (!alnum && (s[i] != '-' || edge) && (s[i] != '.' || i == 0 || i == n - 1 || s[i - 1] == '.'))
            return 0;
    }
    return 1;
}

int gs_dra_check(const struct gs_dra *d, char *err, size_t errlen)
{
    if (!driver_name_ok(d->driver)) {
        snprintf(err, errlen, "--dra-driver '%s': use a DNS subdomain such as " GS_DRA_DRIVER_DEFAULT, d->driver);
        return -1;
    }
    char reg[SOCK_MAX], dir[SOCK_MAX], dra[SOCK_MAX];
    if (sock_paths(d, reg, dir, dra) != 0) {
        snprintf(err, errlen, "--dra-registry-dir or --dra-plugins-dir is too long for a unix socket path (%d)",
                 SOCK_MAX);
        return -1;
    }
    return 0;
}

/* ---- plugin registration (kubelet's plugin watcher) ---- */

static int reg_unary(void *ud, const char *method, const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen,
                     char *msg, size_t msglen)
{
    struct gs_dra *d = ud;
    if (strcmp(method, REG_SERVICE "GetInfo") == 0) {
        char reg[SOCK_MAX], dir[SOCK_MAX], dra[SOCK_MAX];
        if (sock_paths(d, reg, dir, dra) != 0)
            return GS_ST_INTERNAL;
        char *versions[] = { DRA_VERSION };
        Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
        info.type = "DRAPlugin";
        info.name = d->driver;
        info.endpoint = dra;
        info.n_supported_versions = 1;
        info.supported_versions = versions;
        *out = pack(&info.base, outlen);
        return *out ? 0 : GS_ST_INTERNAL;
    }
    if (strcmp(method, REG_SERVICE "NotifyRegistrationStatus") == 0) {
        Pluginregistration__RegistrationStatus *st = pluginregistration__registration_status__unpack(NULL, inlen, in);
        if (!st) {
            snprintf(msg, msglen, "NotifyRegistrationStatus: cannot decode the request (%zu bytes)", inlen);
            return GS_ST_INVALID;
        }
        if (st->plugin_registered)
            kube_log(KUBE_LOG_INFO, "kubelet registered DRA driver %s", d->driver);
        else
            kube_log(KUBE_LOG_ERROR, "kubelet refused DRA driver %s: %.300s", d->driver, st->error);
        pluginregistration__registration_status__free_unpacked(st, NULL);
        Pluginregistration__RegistrationStatusResponse r = PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
        *out = pack(&r.base, outlen);
        return *out ? 0 : GS_ST_INTERNAL;
    }
    snprintf(msg, msglen, "unknown method %s", method);
    return GS_ST_UNIMPLEMENTED;
}

/* ---- one claim ---- */

/* A claim as kubelet names it: a namespace and name (DNS names) and a uid
 * of [A-Za-z0-9-]. */
static int claim_names_ok(const dra_claim_msg *c, char *err, size_t errlen)
{
    const char *u = c->uid ? c->uid : "";
    int uid_ok = *u && strlen(u) < KUBE_POD_UID_MAX;
    for (const char *q = u; *q && uid_ok; q++)
        uid_ok = (*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || *q == '-';
    if (!uid_ok || !c->namespace_ || !gs_k8s_name_ok(c->namespace_, 63) || !c->name || !gs_k8s_name_ok(c->name, 253)) {
        snprintf(err, errlen, "claim %.64s/%.64s uid %.64s: not a valid namespace, name and uid",
                 c->namespace_ ? c->namespace_ : "", c->name ? c->name : "", u);
        return -1;
    }
    return 0;
}

/* The claim's allocation for this node, from the API server. */
static int read_allocation(struct gs_dra *d, const dra_claim_msg *c, const struct gs_node_view *v,
                           struct gs_dra_alloc *al, char *err, size_t errlen)
{
    char path[600], herr[512], why[700];
    snprintf(path, sizeof path, "/apis/" GS_DRA_API "/namespaces/%s/resourceclaims/%s", c->namespace_, c->name);
    char *body = NULL;
    int st = d->p->kc ? kube_request(d->p->kc, "GET", path, NULL, NULL, &body, herr, sizeof herr) : -1;
    int rc = -1;
    if (!d->p->kc)
        snprintf(err, errlen, "the agent has no API server connection, so it cannot read the claim's allocation");
    else if (st == 404)
        snprintf(err, errlen, "ResourceClaim %s/%s is not there (deleted?)", c->namespace_, c->name);
    else if (st < 200 || st >= 300 || !body)
        snprintf(err, errlen, "cannot read ResourceClaim %s/%s: %s", c->namespace_, c->name,
                 st < 0 ? herr : "the API server refused");
    else if (gs_dra_claim_parse(body, strlen(body), d->driver, v, c->uid, al, why, sizeof why) != 0)
        snprintf(err, errlen, "ResourceClaim %s/%s: %s", c->namespace_, c->name, why);
    else
        rc = 0;
    free(body);
    return rc;
}

static void spec_name(const char *uid, char *out, size_t len)
{
    snprintf(out, len, "gpuslice-%s.json", uid);
}

/* The claim's CDI spec, atomically (the runtime reads the directory). */
static int write_cdi(struct gs_dra *d, const char *uid, const struct gs_alloc_dirs *dirs, const struct gs_dra_alloc *al,
                     const struct gs_node_view *v, char *err, size_t errlen)
{
    const char *uuids[GS_ASSIGN_MAX_GPUS];
    for (int j = 0; j < al->a.ngpus; j++)
        uuids[j] = v->gpus[al->gpu[al->order[j]]].uuid;
    struct gs_edits_in in = { .state_root = d->p->state_root,
                              .lib_host = d->p->lib_host,
                              .lib_container = d->p->lib_container,
                              .preload_host = d->p->preload_host,
                              .dirs = dirs,
                              .uuids = uuids,
                              .n = (size_t)al->a.ngpus,
                              .visible_env = !d->p->cdi };
    static struct gs_container_edits e; /* under d->lock */
    if (gs_container_edits(&in, &e, err, errlen) != 0)
        return -1;
    json_t *spec = gs_dra_cdi_spec(uid, &e);
    char *text = spec ? json_dumps(spec, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    json_decref(spec);
    char name[128];
    spec_name(uid, name, sizeof name);
    int rc = -1;
    if (text && (mkdir(d->cdi_dir, 0755) == 0 || errno == EEXIST))
        rc = gs_agent_write_atomic(d->cdi_dir, name, text);
    if (rc != 0)
        snprintf(err, errlen, "cannot write the CDI spec %s/%s: %s", d->cdi_dir, name,
                 text ? strerror(errno) : "out of memory");
    free(text);
    return rc;
}

/* The claim's state, made once: a claim prepared before (kubelet retries,
 * or restarted and prepares again while the pod runs) keeps its region and
 * the usage in it; one whose allocation reads differently is refused. */
static int lay_out_state(struct gs_dra *d, const dra_claim_msg *c, const struct gs_dra_alloc *al,
                         const struct gs_node_view *v, struct gs_alloc_dirs *dirs, char *err, size_t errlen)
{
    char id[128], pin[2048], text[4096];
    snprintf(id, sizeof id, CLAIM_ID_PREFIX "%s", c->uid);
    char *ids[1] = { id };
    if (gs_agent_alloc_dirs(d->p->state_root, ids, 1, dirs, err, errlen) != 0)
        return -1;
    gs_dra_pin_text(al, c->uid, pin, sizeof pin);
    int same = 0;
    if (gs_agent_pin_check(dirs, c->uid, "dra", pin, &same) != 0) {
        snprintf(err, errlen, "its allocation differs from the one prepared before (%s/assignment); refusing",
                 dirs->limits_dir);
        return -1;
    }
    if (same)
        return 0;
    /* Who runs in the pods of a claim is not known here: root's region,
     * mode 0666, reachable only through the claim's own mounts. */
    struct gs_region_owner ro = { .uid = 0, .gid = 0, .mode = 0666 };
    if (gs_agent_state_reset(d->p->state_root, dirs, &ro, err, errlen) != 0)
        return -1;
    for (int j = 0; j < al->a.ngpus; j++) {
        const char *uuid = al->a.gpus[j].uuid;
        struct gs_roster_entry limits = gs_roster_entry_of(&al->a, uuid);
        if (gs_agent_roster_put(d->p->state_root, uuid, dirs->key, &limits, err, errlen) != 0)
            return -1;
    }
    struct gs_holder h;
    snprintf(h.ns, sizeof h.ns, "%s", c->namespace_);
    snprintf(h.pod, sizeof h.pod, "%s", c->name);
    snprintf(h.container, sizeof h.container, "dra");
    gs_limits_text(v, &h, c->uid, &al->a, al->gpu, al->order, (size_t)al->a.ngpus, text, sizeof text);
    if (gs_agent_write_limits(dirs, text, c->uid, "dra", pin) != 0) { /* the pin last: prepared once whole */
        snprintf(err, errlen, "cannot write %s/limits.conf: %s", dirs->limits_dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* What kubelet gets for a prepared claim: each result of ours, the first
 * also naming the claim's CDI device (the interposer, limits and state);
 * with --cdi every result also names its GPU's NVIDIA CDI device. */
struct prep_out {
    dra_device_msg dev[GS_DRA_MAX_RESULTS];
    dra_device_msg *devp[GS_DRA_MAX_RESULTS];
    char *reqp[GS_DRA_MAX_RESULTS];
    char cdi[GS_DRA_MAX_RESULTS][2][160];
    char *cdip[GS_DRA_MAX_RESULTS][2];
    char pool[256];
    struct gs_dra_alloc al;
};

static void prep_answer(const struct gs_dra *d, const dra_claim_msg *c, const struct gs_node_view *v,
                        struct prep_out *o, dra_prep_msg *r)
{
    snprintf(o->pool, sizeof o->pool, "%s", v->node);
    for (int i = 0; i < o->al.nresults; i++) {
        struct gs_dra_result *res = &o->al.r[i];
        dra_device_msg *m = &o->dev[i];
        k8s__io__kubelet__pkg__apis__dra__v1__device__init(m);
        o->reqp[i] = res->request;
        m->n_request_names = 1;
        m->request_names = &o->reqp[i];
        m->pool_name = o->pool;
        m->device_name = res->device;
        size_t k = 0;
        if (i == 0)
            snprintf(o->cdi[i][k++], sizeof o->cdi[i][0], GS_CDI_KIND "=%s", c->uid);
        if (d->p->cdi)
            snprintf(o->cdi[i][k++], sizeof o->cdi[i][0], "nvidia.com/gpu=%s", v->gpus[res->gpu].uuid);
        for (size_t j = 0; j < k; j++)
            o->cdip[i][j] = o->cdi[i][j];
        m->n_cdi_device_ids = k;
        m->cdi_device_ids = o->cdip[i];
        o->devp[i] = m;
    }
    r->n_devices = (size_t)o->al.nresults;
    r->devices = o->devp;
}

static int prepare_claim(struct gs_dra *d, const dra_claim_msg *c, struct prep_out *o, dra_prep_msg *r, char *err,
                         size_t errlen)
{
    struct gs_node_view v;
    gs_plugin_view(d->p, &v);
    struct gs_alloc_dirs dirs;
    if (claim_names_ok(c, err, errlen) != 0 || read_allocation(d, c, &v, &o->al, err, errlen) != 0 ||
        lay_out_state(d, c, &o->al, &v, &dirs, err, errlen) != 0)
        return -1;
    if (d->p->test_allocate_delay_ms > 0) /* test hook: a restart between the state and the CDI spec */
        sleep_ms(d->p->test_allocate_delay_ms);
    if (write_cdi(d, c->uid, &dirs, &o->al, &v, err, errlen) != 0)
        return -1;
    prep_answer(d, c, &v, o, r);
    kube_log(KUBE_LOG_INFO, "NodePrepareResources %s/%s (%s): %d device(s), state %s", c->namespace_, c->name, c->uid,
             o->al.nresults, dirs.key);
    return 0;
}

static int unprepare_claim(struct gs_dra *d, const dra_claim_msg *c, char *err, size_t errlen)
{
    if (claim_names_ok(c, err, errlen) != 0)
        return -1;
    char name[128], path[600], id[128];
    spec_name(c->uid, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", d->cdi_dir, name);
    if (unlink(path) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "cannot remove the CDI spec %s: %s", path, strerror(errno));
        return -1;
    }
    snprintf(id, sizeof id, CLAIM_ID_PREFIX "%s", c->uid);
    char *ids[1] = { id };
    if (gs_agent_alloc_remove(d->p->state_root, ids, 1, err, errlen) != 0)
        return -1;
    kube_log(KUBE_LOG_INFO, "NodeUnprepareResources %s/%s (%s): removed", c->namespace_, c->name, c->uid);
    return 0;
}

/* ---- the DRA service ---- */

static int do_prepare(struct gs_dra *d, const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen, char *msg,
                      size_t msglen)
{
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest *req =
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(NULL, inlen, in);
    if (!req) {
        snprintf(msg, msglen, "NodePrepareResources: cannot decode the request (%zu bytes)", inlen);
        return GS_ST_INVALID;
    }
    size_t n = req->n_claims;
    dra_prep_entry *ent = calloc(n ? n : 1, sizeof *ent);
    dra_prep_entry **entp = calloc(n ? n : 1, sizeof *entp);
    dra_prep_msg *res = calloc(n ? n : 1, sizeof *res);
    struct prep_out *o = calloc(n ? n : 1, sizeof *o);
    char(*errs)[DRA_ERR_MAX] = calloc(n ? n : 1, DRA_ERR_MAX);
    int code = 0;
    if (!ent || !entp || !res || !o || !errs) {
        snprintf(msg, msglen, "NodePrepareResources: out of memory");
        code = GS_ST_INTERNAL;
        goto out;
    }
    pthread_mutex_lock(&d->lock);
    for (size_t i = 0; i < n; i++) {
        const dra_claim_msg *c = req->claims[i];
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resource_response__init(&res[i]);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__claims_entry__init(&ent[i]);
        ent[i].key = c->uid;
        ent[i].value = &res[i];
        entp[i] = &ent[i];
        if (prepare_claim(d, c, &o[i], &res[i], errs[i], DRA_ERR_MAX) != 0) {
            kube_log(KUBE_LOG_WARN, "NodePrepareResources %.64s/%.64s: %s", c->namespace_, c->name, errs[i]);
            res[i].error = errs[i];
            res[i].n_devices = 0;
        }
    }
    pthread_mutex_unlock(&d->lock);
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse resp =
        K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
    resp.n_claims = n;
    resp.claims = entp;
    *out = pack(&resp.base, outlen);
    if (!*out)
        code = GS_ST_INTERNAL;
out:
    free(ent);
    free(entp);
    free(res);
    free(o);
    free(errs);
    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(req, NULL);
    return code;
}

static int do_unprepare(struct gs_dra *d, const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen, char *msg,
                        size_t msglen)
{
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest *req =
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__unpack(NULL, inlen, in);
    if (!req) {
        snprintf(msg, msglen, "NodeUnprepareResources: cannot decode the request (%zu bytes)", inlen);
        return GS_ST_INVALID;
    }
    size_t n = req->n_claims;
    dra_unprep_entry *ent = calloc(n ? n : 1, sizeof *ent);
    dra_unprep_entry **entp = calloc(n ? n : 1, sizeof *entp);
    dra_unprep_msg *res = calloc(n ? n : 1, sizeof *res);
    char(*errs)[DRA_ERR_MAX] = calloc(n ? n : 1, DRA_ERR_MAX);
    int code = 0;
    if (!ent || !entp || !res || !errs) {
        snprintf(msg, msglen, "NodeUnprepareResources: out of memory");
        code = GS_ST_INTERNAL;
        goto out;
    }
    pthread_mutex_lock(&d->lock);
    for (size_t i = 0; i < n; i++) {
        const dra_claim_msg *c = req->claims[i];
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resource_response__init(&res[i]);
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__claims_entry__init(&ent[i]);
        ent[i].key = c->uid;
        ent[i].value = &res[i];
        entp[i] = &ent[i];
        if (unprepare_claim(d, c, errs[i], DRA_ERR_MAX) != 0) {
            kube_log(KUBE_LOG_WARN, "NodeUnprepareResources %.64s/%.64s: %s", c->namespace_, c->name, errs[i]);
            res[i].error = errs[i];
        }
    }
    pthread_mutex_unlock(&d->lock);
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse resp =
        K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
    resp.n_claims = n;
    resp.claims = entp;
    *out = pack(&resp.base, outlen);
    if (!*out)
        code = GS_ST_INTERNAL;
out:
    free(ent);
    free(entp);
    free(res);
    free(errs);
    k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__free_unpacked(req, NULL);
    return code;
}

static int dra_unary(void *ud, const char *method, const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen,
                     char *msg, size_t msglen)
{
    struct gs_dra *d = ud;
    if (strcmp(method, DRA_SERVICE "NodePrepareResources") == 0)
        return do_prepare(d, in, inlen, out, outlen, msg, msglen);
    if (strcmp(method, DRA_SERVICE "NodeUnprepareResources") == 0)
        return do_unprepare(d, in, inlen, out, outlen, msg, msglen);
    snprintf(msg, msglen, "unknown method %s", method);
    return GS_ST_UNIMPLEMENTED;
}

/* ---- the ResourceSlice ---- */

/* Creates or replaces the node's ResourceSlice with the GPUs as they are
 * now, one pool generation above the one published. 0, or -1 (logged). */
static int publish_slice(struct gs_dra *d)
{
    struct gs_plugin *p = d->p;
    char name[600], path[800], err[512];
    if (gs_dra_slice_name(p->node, d->driver, name, sizeof name) != 0)
        return -1;
    snprintf(path, sizeof path, "/apis/" GS_DRA_API "/resourceslices/%s", name);
    json_t *cur = NULL;
    int st = kube_get_json(p->kc, path, &cur, err, sizeof err);
    if (st != 404 && (st < 200 || st >= 300)) {
        kube_log(KUBE_LOG_WARN, "ResourceSlice %s: cannot read it: %s", name, err);
        return -1;
    }
    json_int_t gen =
        json_integer_value(json_object_get(json_object_get(json_object_get(cur, "spec"), "pool"), "generation"));
    const char *rv = json_string_value(json_object_get(json_object_get(cur, "metadata"), "resourceVersion"));
    pthread_mutex_lock(&p->inv->lock);
    json_t *slice = gs_dra_slice(p->node, d->driver, (int64_t)gen + 1, p->inv->gpus, p->inv->ngpus, p->inv->driver);
    pthread_mutex_unlock(&p->inv->lock);
    if (slice && rv)
        json_object_set_new(json_object_get(slice, "metadata"), "resourceVersion", json_string(rv));
    char *text = slice ? json_dumps(slice, JSON_COMPACT) : NULL;
    json_decref(slice);
    json_decref(cur);
    if (!text)
        return -1;
    st = kube_request(p->kc, st == 404 ? "POST" : "PUT", st == 404 ? "/apis/" GS_DRA_API "/resourceslices" : path,
                      "application/json", text, NULL, err, sizeof err);
    free(text);
    if (st < 200 || st >= 300) {
        kube_log(KUBE_LOG_WARN, "ResourceSlice %s: cannot publish it (status %d): %s", name, st, err);
        return -1;
    }
    kube_log(KUBE_LOG_INFO, "published ResourceSlice %s (pool %s, generation %lld)", name, p->node, (long long)gen + 1);
    return 0;
}

/* ---- serving ---- */

static int sockets_there(const char *reg, const char *dra)
{
    struct stat st;
    return stat(reg, &st) == 0 && stat(dra, &st) == 0;
}

/* One life of the two servers: until a socket disappears or *stop. */
static void serve_once(struct gs_dra *d, volatile int *stop)
{
    char reg[SOCK_MAX], dir[SOCK_MAX], dra[SOCK_MAX], err[512];
    if (sock_paths(d, reg, dir, dra) != 0) { /* gs_dra_check refused this at startup */
        *stop = 1;
        return;
    }
    if ((mkdir(d->plugins_dir, 0750) != 0 && errno != EEXIST) || (mkdir(dir, 0750) != 0 && errno != EEXIST) ||
        (mkdir(d->registry_dir, 0750) != 0 && errno != EEXIST)) {
        kube_log(KUBE_LOG_ERROR, "cannot create %s or %s: %s; retrying", dir, d->registry_dir, strerror(errno));
        sleep_ms(1000);
        return;
    }
    struct gs_rpc_handlers dh = { .ud = d, .unary = dra_unary }, rh = { .ud = d, .unary = reg_unary };
    /* The service first: kubelet dials the endpoint as soon as it sees the
     * registration socket. */
    struct gs_rpc_server *ds = gs_rpc_server_start(dra, &dh, err, sizeof err);
    struct gs_rpc_server *rs = ds ? gs_rpc_server_start(reg, &rh, err, sizeof err) : NULL;
    if (!rs) {
        kube_log(KUBE_LOG_ERROR, "%s; retrying", err);
        gs_rpc_server_stop(ds);
        sleep_ms(1000);
        return;
    }
    kube_log(KUBE_LOG_INFO, "DRA driver %s: serving %s, registration on %s", d->driver, dra, reg);
    unsigned published_gen = 0;
    int published = 0;
    time_t next_publish = 0;
    while (!*stop && sockets_there(reg, dra)) {
        if (d->p->kc && time(NULL) >= next_publish) {
            unsigned gen = gs_plugin_generation(d->p);
            if (!published || gen != published_gen) {
                if (publish_slice(d) == 0) {
                    published = 1;
                    published_gen = gen;
                } else {
                    next_publish = time(NULL) + 2;
                }
            }
        }
        sleep_ms(100);
    }
    if (!*stop)
        kube_log(KUBE_LOG_WARN, "a DRA socket was removed: serving and registering again");
    gs_rpc_server_stop(rs);
    gs_rpc_server_stop(ds);
}

int gs_dra_run(struct gs_dra *d, volatile int *stop)
{
    pthread_mutex_init(&d->lock, NULL);
    while (!*stop)
        serve_once(d, stop);
    return 0;
}
