/* The node agent's pure decisions (see placement.h). */
#include "placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "config_keys.h"
#include "limiter.h"
#include "statedir.h"

int gs_ids_contain(const char *id, char *const *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(set[i], id) == 0)
            return 1;
    return 0;
}

int gs_assignment_same_ids(const struct gs_assignment *a, char *const *set, size_t n)
{
    if ((size_t)a->ngpus != n)
        return 0;
    for (int i = 0; i < a->ngpus; i++)
        if (!gs_ids_contain(a->gpus[i].replica, set, n))
            return 0;
    return 1;
}

/* A replica number is only a token for one share of its GPU: which token a
 * container holds does not matter, which GPUs it is on does. */
int gs_assignment_same_gpus(const struct gs_assignment *a, char *const *set, size_t n)
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

void gs_ids_text(char *const *ids, size_t n, char *out, size_t len)
{
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(out);
        snprintf(out + l, len - l, "%s%s", i ? "," : "", ids[i]);
    }
}

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static void sort_ids(char *const *ids, size_t n, const char **sorted)
{
    for (size_t i = 0; i < n; i++)
        sorted[i] = ids[i];
    qsort(sorted, n, sizeof sorted[0], cmp_str);
}

void gs_ids_lines(char *const *ids, size_t n, char *out, size_t len)
{
    const char *sorted[GS_ASSIGN_MAX_GPUS] = { 0 };
    sort_ids(ids, n, sorted);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(out);
        snprintf(out + l, len - l, "%s\n", sorted[i]);
    }
}

/* Kubelet never gives one device to two live containers, so two live
 * allocations never share a key; a collision is detected through the ids
 * file (agent_state.c). */
void gs_alloc_key(char *const *ids, size_t n, char *out, size_t outlen)
{
    const char *sorted[GS_ASSIGN_MAX_GPUS] = { 0 };
    sort_ids(ids, n, sorted);
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

static int view_find(const struct gs_node_view *v, const char *uuid)
{
    for (int g = 0; g < v->ngpus; g++)
        if (strcmp(v->gpus[g].uuid, uuid) == 0)
            return g;
    return -1;
}

static int cmp_idx(const void *x, const void *y)
{
    const int *a = x, *b = y;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

int gs_ids_check(const struct gs_node_view *v, const char *what, char *const *ids, size_t n, int *gpu, int *order,
                 char *msg, size_t msglen)
{
    if (n == 0 || n > GS_ASSIGN_MAX_GPUS) {
        snprintf(msg, msglen, "%s: %zu devices requested (1..%d)", what, n, GS_ASSIGN_MAX_GPUS);
        return GS_ST_INVALID;
    }
    int idx[GS_ASSIGN_MAX_GPUS][2];
    for (size_t i = 0; i < n; i++) {
        char uuid[GS_UUID_MAX];
        unsigned k = 0;
        if (!ids[i] || gs_replica_split(ids[i], uuid, sizeof uuid, &k) != 0) {
            snprintf(msg, msglen, "%s: '%.140s' is not a gpuslice device ID (<GPU uuid>::<n>)", what,
                     ids[i] ? ids[i] : "(null)");
            return GS_ST_INVALID;
        }
        int g = view_find(v, uuid);
        if (g < 0 || k >= (unsigned)v->replicas) {
            snprintf(msg, msglen, "%s: device %.140s is not a device of node %s", what, ids[i], v->node);
            return GS_ST_FAILED_PRECONDITION;
        }
        for (size_t j = 0; j < i; j++)
            if (gpu[j] == g) {
                snprintf(msg, msglen,
                         "%s: devices %.140s and %.140s are on the same GPU; a "
                         "container gets at most one share of each GPU",
                         what, ids[j], ids[i]);
                return GS_ST_INVALID;
            }
        gpu[i] = g;
        idx[i][0] = (int)v->gpus[g].index;
        idx[i][1] = (int)i;
    }
    qsort(idx, n, sizeof idx[0], cmp_idx);
    for (size_t i = 0; i < n; i++)
        order[i] = idx[i][1];
    return 0;
}

void gs_match_pods(const struct gs_node_view *v, const struct gs_pod *pods, int npods, char *const *ids, size_t n,
                   struct gs_match *m)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < npods; i++) {
        const struct gs_pod *pod = &pods[i];
        struct gs_assignment a;
        char err[256];
        if (pod->terminal || !pod->assignment)
            continue;
        if (gs_assignment_parse(pod->assignment, strlen(pod->assignment), &a, err, sizeof err)) {
            int mentions = 0;
            for (size_t k = 0; k < n; k++)
                mentions |= strstr(pod->assignment, ids[k]) != NULL;
            if (!m->bad[0] || (mentions && !m->bad_mentions)) {
                snprintf(m->bad, sizeof m->bad,
                         "; pod %s/%s on this node has a malformed "
                         "annotation: %s",
                         pod->ns, pod->name, err);
                m->bad_mentions = mentions;
            }
            continue;
        }
        if (a.node[0] && strcmp(a.node, v->node) != 0)
            continue;
        if (!gs_assignment_same_gpus(&a, ids, n))
            continue;
        m->ngpu_matches++;
        if (!gs_assignment_same_ids(&a, ids, n))
            continue;
        m->nmatches++;
        size_t l = strlen(m->names);
        snprintf(m->names + l, sizeof m->names - l, "%s%s/%s", l ? ", " : "", pod->ns, pod->name);
    }
}

/* ---- preferred allocation ---- */

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
            if (gs_assignment_parse(pods[i].assignment, strlen(pods[i].assignment), &a, err, sizeof err) != 0)
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
static int fit_gpus(const struct gs_assignment *a, char *const *avail, size_t navail, char *const *must, size_t nmust,
                    const struct gs_pod *pods, int npods, char **chosen)
{
    for (size_t k = 0; k < nmust; k++) {
        char uuid[GS_UUID_MAX];
        int on = 0;
        if (gs_replica_split(must[k], uuid, sizeof uuid, NULL) != 0)
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
        for (size_t j = 0; j < navail; j++) {
            char *id = avail[j];
            char uuid[GS_UUID_MAX];
            if (gs_replica_split(id, uuid, sizeof uuid, NULL) != 0 || strcmp(uuid, a->gpus[g].uuid) != 0)
                continue;
            int r = strcmp(id, a->gpus[g].replica) == 0 ? 0
                    : gs_ids_contain(id, must, nmust)   ? 1
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

void gs_prefer_candidates(const struct gs_node_view *v, const struct gs_pod *pods, int npods, struct gs_assignment *as,
                          int *cand, int *ncand)
{
    *ncand = 0;
    for (int i = 0; i < npods; i++) {
        const struct gs_pod *pd = &pods[i];
        char err[256];
        if (pd->terminal || pd->allocated || !pd->assignment ||
            gs_assignment_parse(pd->assignment, strlen(pd->assignment), &as[i], err, sizeof err) != 0 ||
            (as[i].node[0] && strcmp(as[i].node, v->node) != 0))
            continue;
        int at = (*ncand)++;
        while (at > 0) {
            const struct gs_pod *q = &pods[cand[at - 1]];
            if (bound_order(pd, q) >= 0)
                break;
            cand[at] = cand[at - 1];
            at--;
        }
        cand[at] = i;
    }
}

int gs_prefer(const struct gs_pod *pods, int npods, const struct gs_assignment *as, const int *cand, int ncand,
              char *const *avail, size_t navail, char *const *must, size_t nmust, int size, char **chosen)
{
    int k = 0;
    /* Pass 1: a pod's exact replicas. */
    for (int ci = 0; ci < ncand && k == 0; ci++) {
        const struct gs_assignment *a = &as[cand[ci]];
        if (a->ngpus != size)
            continue;
        int ok = 1;
        for (int g = 0; ok && g < a->ngpus; g++)
            ok = gs_ids_contain(a->gpus[g].replica, avail, navail);
        for (size_t m = 0; ok && m < nmust; m++) {
            int in_a = 0;
            for (int g = 0; g < a->ngpus; g++)
                in_a |= strcmp(a->gpus[g].replica, must[m]) == 0;
            ok = in_a;
        }
        if (!ok)
            continue;
        for (int g = 0; g < a->ngpus; g++)
            for (size_t j = 0; j < navail; j++)
                if (strcmp(avail[j], a->gpus[g].replica) == 0)
                    chosen[k++] = avail[j];
    }
    /* Pass 2: a pod's GPUs, other replicas of them. */
    for (int ci = 0; ci < ncand && k == 0; ci++) {
        const struct gs_assignment *a = &as[cand[ci]];
        if (a->ngpus != size)
            continue;
        int got = fit_gpus(a, avail, navail, must, nmust, pods, npods, chosen);
        k = got == size ? got : 0;
    }
    return k;
}

/* ---- the fit re-check of a cross-GPU swap ---- */

int gs_pod_usage(const struct gs_node_view *v, const struct gs_pod *q, struct gs_assignment *u)
{
    struct gs_assignment a;
    char err[256];
    if (q->terminal || !q->assignment ||
        gs_assignment_parse(q->assignment, strlen(q->assignment), &a, err, sizeof err) != 0 ||
        (a.node[0] && strcmp(a.node, v->node) != 0))
        return -1;
    *u = a;
    if (q->allocated) {
        char held[GS_ASSIGN_MAX_GPUS][GS_REPLICA_ID_MAX];
        int k = gs_allocated_parse(q->allocated, strlen(q->allocated), held, GS_ASSIGN_MAX_GPUS, err, sizeof err);
        struct gs_assignment r;
        if (k > 0 && gs_assignment_rebind(&a, (const char(*)[GS_REPLICA_ID_MAX])held, k, &r, err, sizeof err) == 0)
            *u = r;
    }
    return 0;
}

int gs_fits_on_held(const struct gs_node_view *v, const struct gs_pod *pods, int npods, const struct gs_pod *self,
                    const struct gs_assignment *eff, char *why, size_t whylen)
{
    int ok = 1;
    for (int i = 0; i < eff->ngpus && ok; i++) {
        const struct gs_assign_gpu *mine = &eff->gpus[i];
        struct gs_share_use g;
        memset(&g, 0, sizeof g);
        int gi = view_find(v, mine->uuid);
        g.mem_total_mib = gi >= 0 ? v->gpus[gi].mem_total_mib : 0;
        g.slots_total = v->replicas;
        char others[400] = "";
        for (int j = 0; j < npods; j++) {
            struct gs_assignment u;
            if (strcmp(pods[j].uid, self->uid) == 0 || gs_pod_usage(v, &pods[j], &u) != 0)
                continue;
            for (int k = 0; k < u.ngpus; k++) {
                if (strcmp(u.gpus[k].uuid, mine->uuid) != 0)
                    continue;
                g.milli_used += gs_cores_milli(u.gpus[k].cores);
                g.mem_used_mib += (int64_t)u.gpus[k].memory_mib;
                g.slots_used++;
                size_t l = strlen(others);
                snprintf(others + l, sizeof others - l, "%s%.40s/%.60s %lluMi/%u%%%s", l ? ", " : "", pods[j].ns,
                         pods[j].name, (unsigned long long)u.gpus[k].memory_mib, u.gpus[k].cores,
                         pods[j].allocated ? "" : " (assigned, not started)");
            }
        }
        const char *short_of = gs_share_fit(&g, gs_cores_milli(mine->cores), (int64_t)mine->memory_mib);
        if (short_of) {
            ok = 0;
            snprintf(why, whylen,
                     "it does not fit on GPU %s (%s: needs %lluMi/%u%% cores; "
                     "%lldMi of %lldMi, %d.%d%% cores and %d of %d replicas already taken by "
                     "%s)",
                     mine->uuid, short_of, (unsigned long long)mine->memory_mib, mine->cores, (long long)g.mem_used_mib,
                     (long long)g.mem_total_mib, g.milli_used / 10, g.milli_used % 10, g.slots_used, g.slots_total,
                     others[0] ? others : "no other pod");
        }
    }
    return ok;
}

/* ---- PreStartContainer's rule ---- */

/* Whether the pod's allocated record names exactly ids. */
static int allocated_is(const struct gs_pod *pod, char *const *ids, size_t n)
{
    if (!pod->allocated)
        return 0;
    char prev[GS_ASSIGN_MAX_GPUS][GS_REPLICA_ID_MAX], err[256];
    int k = gs_allocated_parse(pod->allocated, strlen(pod->allocated), prev, GS_ASSIGN_MAX_GPUS, err, sizeof err);
    int same = k == (int)n;
    for (int i = 0; same && i < k; i++)
        same = gs_ids_contain(prev[i], ids, n);
    return same;
}

enum gs_held_verdict gs_held_verdict_of(const struct gs_node_view *v, const struct gs_pod *pod,
                                        const struct gs_assignment *a, char *const *ids, size_t n,
                                        struct gs_assignment *eff, int *recorded, char *why, size_t whylen)
{
    *recorded = 0;
    if (a->node[0] && strcmp(a->node, v->node) != 0) {
        snprintf(why, whylen, "another node");
        return GS_HELD_REFUSE;
    }
    char held[GS_ASSIGN_MAX_GPUS][GS_REPLICA_ID_MAX];
    if (n > GS_ASSIGN_MAX_GPUS) {
        snprintf(why, whylen, "%zu devices, at most %d", n, GS_ASSIGN_MAX_GPUS);
        return GS_HELD_REFUSE;
    }
    for (size_t i = 0; i < n; i++)
        snprintf(held[i], sizeof held[i], "%s", ids[i]);
    if (gs_assignment_rebind(a, (const char(*)[GS_REPLICA_ID_MAX])held, (int)n, eff, why, whylen) != 0)
        return GS_HELD_REFUSE;
    *recorded = allocated_is(pod, ids, n);
    /* Recorded: the agent accepted it there already (a container restart). */
    if (!gs_assignment_same_gpus(a, ids, n) && !*recorded)
        return GS_HELD_ON_OTHER_GPUS;
    return GS_HELD_AS_ASSIGNED;
}

/* ---- the region's owner ---- */

void gs_region_owner_of(const struct gs_pod *pod, const char *container, struct gs_region_owner *o)
{
    const struct gs_pod_container *c = NULL;
    for (int i = 0; i < pod->ncontainers; i++)
        if (strcmp(pod->containers[i].name, container) == 0)
            c = &pod->containers[i];
    long long uid = GS_ID_UNSET, gid = GS_ID_UNSET, fsg = GS_ID_UNSET;
    if (pod->host_users_false) {
        snprintf(o->why, sizeof o->why, "the pod runs in a user namespace");
    } else if (!c) {
        snprintf(o->why, sizeof o->why,
                 "container %s is not in the pod's spec as the agent saw "
                 "it",
                 container);
    } else {
        uid = c->run_as_user != GS_ID_UNSET ? c->run_as_user : pod->run_as_user;
        gid = c->run_as_group != GS_ID_UNSET ? c->run_as_group : pod->run_as_group;
        fsg = pod->fs_group;
        snprintf(o->why, sizeof o->why, "runAsUser %lld, runAsGroup %lld, fsGroup %lld", uid, gid, fsg);
    }
    long long group = fsg != GS_ID_UNSET ? fsg : gid;
    if (uid == GS_ID_UNSET && group == GS_ID_UNSET) {
        o->uid = o->gid = 0;
        o->mode = 0666;
        return;
    }
    o->uid = uid != GS_ID_UNSET ? (unsigned)uid : 0;
    o->gid = group != GS_ID_UNSET ? (unsigned)group : 0;
    o->mode = 0660;
}

/* ---- the limits file ---- */

/* Anything else (a newline would inject a line into limits.conf) is a
 * malformed answer. */
int gs_k8s_name_ok(const char *s, size_t max)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return 0;
    }
    return 1;
}

/* The settings a pod's environment could otherwise override (the file's
 * value wins for the interposer's node-rule keys, and is the ceiling for
 * the share weight): the region, ledger and roster every process of the container
 * shares, the context charge, the share weight and the compute limiter's
 * tuning. Without them a process could name a region of its own (a fresh
 * limit each) or set GPUSLICE_CTX_OVERHEAD=0 (contexts charged nothing). */
static int limits_pins(const struct gs_node_view *v, char *out, size_t len)
{
    /* Pinned at the node's value where the agent was given one
     * (--power-exponent, --share-yield-us), else at their defaults
     * (config_keys.def). */
    const struct {
        int key;
        const char *node;
    } pinned[] = { { GS_KEY_CTX_OVERHEAD, NULL },
                   { GS_KEY_WEIGHT, NULL },
                   { GS_KEY_POWER_EXP, v->power_exp },
                   { GS_KEY_SHARE_YIELD, v->share_yield_us } };
    int l = snprintf(out, len, "GPUSLICE_REGION=%s\nGPUSLICE_LEDGER_DIR=%s\nGPUSLICE_ROSTER_DIR=%s\n",
                     GS_STATEDIR_CONTAINER_REGION, GS_STATEDIR_CONTAINER_LEDGER, GS_STATEDIR_CONTAINER_ROSTER);
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0] && l > 0 && (size_t)l < len; i++) {
        char name[GS_KEY_NAME_MAX];
        gs_key_name(pinned[i].key, name, sizeof name);
        const char *value = pinned[i].node ? pinned[i].node : gs_key_default(pinned[i].key);
        l += snprintf(out + l, len - (size_t)l, "%s=%s\n", name, value);
    }
    return l;
}

void gs_limits_text(const struct gs_node_view *v, const struct gs_holder *h, const char *uid,
                    const struct gs_assignment *a, const int *gpu, const int *order, size_t n, char *out, size_t len)
{
    char label[600];
    snprintf(label, sizeof label, "%s/%s/%s", h->ns, h->pod, h->container);
    if (strlen(label) >= 128) /* the interposer's label limit */
        snprintf(label, sizeof label, "%.30s/%.60s/%.30s", h->ns, h->pod, h->container);
    int l = snprintf(out, len,
                     "# gpuslice-node-agent: the limits of %s (uid %s)\n"
                     "GPUSLICE_CONTAINER=%s\nGPUSLICE_COMPUTE_MODE=%s\n",
                     label, uid, label, a->share_mode ? "share" : "cap");
    if (l > 0 && (size_t)l < len)
        l += limits_pins(v, out + l, len - (size_t)l);
    for (size_t j = 0; j < n && l > 0 && (size_t)l < len; j++) {
        const char *uuid = v->gpus[gpu[order[j]]].uuid;
        for (int i = 0; i < a->ngpus; i++) {
            if (strcmp(a->gpus[i].uuid, uuid) != 0)
                continue;
            l += snprintf(out + l, len - (size_t)l, "GPUSLICE_MEMORY_LIMIT_%zu=%lluMi\n", j,
                          (unsigned long long)a->gpus[i].memory_mib);
            if (a->gpus[i].cores > 0 && (size_t)l < len)
                l += snprintf(out + l, len - (size_t)l, "GPUSLICE_CORES_%zu=%u\n", j, a->gpus[i].cores);
        }
    }
}

struct gs_roster_entry gs_roster_entry_of(const struct gs_assignment *a, const char *uuid)
{
    struct gs_roster_entry e = { .weight = GS_LIM_DEFAULT_WEIGHT };
    for (int i = 0; !a->share_mode && i < a->ngpus; i++)
        if (strcmp(a->gpus[i].uuid, uuid) == 0 && a->gpus[i].cores > 0 && a->gpus[i].cores < 100) {
            e.weight = a->gpus[i].cores;
            e.capped = 1;
        }
    return e;
}
