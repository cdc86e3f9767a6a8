/* Parsing of the extender/agent annotations: strict, bounded, versioned. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "annotation.h"

static int printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7e)
            return 0;
    return 1;
}

int gs_replica_split(const char *id, char *uuid, size_t uuidlen, unsigned *k)
{
    const char *sep = strstr(id, "::");
    if (!sep || sep == id || strstr(sep + 2, "::"))
        return -1;
    size_t ul = (size_t)(sep - id);
    if (ul + 1 > uuidlen)
        return -1;
    const char *p = sep + 2;
    if (!*p || strlen(p) > 5)
        return -1;
    unsigned v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (unsigned)(*p - '0');
    }
    if (sep[2] == '0' && sep[3] != '\0') /* no leading zeros: one spelling per ID */
        return -1;
    memcpy(uuid, id, ul);
    uuid[ul] = '\0';
    if (k)
        *k = v;
    return 0;
}

static int check_version(json_t *root, const char *what, char *err, size_t errlen)
{
    json_t *v = json_object_get(root, "v");
    if (!json_is_integer(v)) {
        snprintf(err, errlen, "%s: missing integer field \"v\" (version)", what);
        return -1;
    }
    if (json_integer_value(v) != GS_ANN_VERSION) {
        snprintf(err, errlen, "%s: unsupported version v=%lld (this agent reads v=%d)", what,
                 (long long)json_integer_value(v), GS_ANN_VERSION);
        return -1;
    }
    return 0;
}

/* jansson quotes the offending input in its message: keep the reason one
 * line of printable ASCII, whatever bytes the annotation held. */
static void scrub(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            *s = '?';
}

static json_t *load(const char *text, size_t len, const char *what, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "%s: not valid JSON at column %d: %s", what, je.column, je.text);
        scrub(err);
        return NULL;
    }
    if (!json_is_object(root)) {
        snprintf(err, errlen, "%s: must be a JSON object", what);
        json_decref(root);
        return NULL;
    }
    if (check_version(root, what, err, errlen) != 0) {
        json_decref(root);
        return NULL;
    }
    return root;
}

static int get_replica(json_t *arr, size_t i, char *out, size_t outlen, const char *what, char *err, size_t errlen)
{
    const char *id = json_string_value(json_array_get(arr, i));
    char uuid[GS_UUID_MAX];
    if (!id || strlen(id) + 1 > outlen || !printable(id) || gs_replica_split(id, uuid, sizeof uuid, NULL) != 0) {
        snprintf(err, errlen, "%s: replicas[%zu] must be a device ID \"<GPU uuid>::<n>\"", what, i);
        return -1;
    }
    snprintf(out, outlen, "%s", id);
    return 0;
}

int gs_assignment_parse(const char *text, size_t len, struct gs_assignment *out, char *err, size_t errlen)
{
    static const char what[] = GS_ANN_ASSIGNMENT;
    json_t *root = load(text, len, what, err, errlen);
    if (!root)
        return -1;
    struct gs_assignment a;
    memset(&a, 0, sizeof a);
    int rc = -1;
    json_t *gpus = json_object_get(root, "gpus");
    json_t *reps = json_object_get(root, "replicas");
    json_t *node = json_object_get(root, "node");
    json_t *mode = json_object_get(root, "mode");
    size_t n = json_array_size(gpus);
    if (!json_is_array(gpus) || n == 0 || n > GS_ASSIGN_MAX_GPUS) {
        snprintf(err, errlen, "%s: \"gpus\" must be an array of 1..%d GPUs", what, GS_ASSIGN_MAX_GPUS);
        goto out;
    }
    if (!json_is_array(reps) || json_array_size(reps) != n) {
        snprintf(err, errlen,
                 "%s: \"replicas\" must be an array with one device ID per GPU "
                 "(%zu)",
                 what, n);
        goto out;
    }
    if (node) {
        const char *s = json_string_value(node);
        if (!s || !*s || strlen(s) >= sizeof a.node || !printable(s)) {
            snprintf(err, errlen, "%s: \"node\" must be a node name", what);
            goto out;
        }
        snprintf(a.node, sizeof a.node, "%s", s);
    }
    if (mode) {
        const char *s = json_string_value(mode);
        if (s && strcmp(s, "cap") == 0) {
            a.share_mode = 0;
        } else if (s && strcmp(s, "share") == 0) {
            a.share_mode = 1;
        } else {
            snprintf(err, errlen, "%s: \"mode\" must be \"cap\" or \"share\"", what);
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct gs_assign_gpu *g = &a.gpus[i];
        json_t *o = json_array_get(gpus, i);
        const char *uuid = json_string_value(json_object_get(o, "uuid"));
        json_t *mem = json_object_get(o, "memory_mib");
        json_t *cores = json_object_get(o, "cores");
        if (!json_is_object(o) || !uuid || !*uuid || strlen(uuid) >= GS_UUID_MAX || !printable(uuid) ||
            strstr(uuid, "::")) {
            snprintf(err, errlen, "%s: gpus[%zu].uuid must be a GPU UUID", what, i);
            goto out;
        }
        snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
        if (!json_is_integer(mem) || json_integer_value(mem) < 1 ||
            (uint64_t)json_integer_value(mem) > GS_MAX_MEMORY_MIB) {
            snprintf(err, errlen, "%s: gpus[%zu].memory_mib must be an integer in 1..%llu", what, i,
                     (unsigned long long)GS_MAX_MEMORY_MIB);
            goto out;
        }
        g->memory_mib = (uint64_t)json_integer_value(mem);
        if (cores && (!json_is_integer(cores) || json_integer_value(cores) < 0 || json_integer_value(cores) > 100)) {
            snprintf(err, errlen, "%s: gpus[%zu].cores must be an integer in 0..100", what, i);
            goto out;
        }
        g->cores = cores ? (unsigned)json_integer_value(cores) : 0;
        if (get_replica(reps, i, g->replica, sizeof g->replica, what, err, errlen) != 0)
            goto out;
        char ru[GS_UUID_MAX];
        gs_replica_split(g->replica, ru, sizeof ru, NULL);
        if (strcmp(ru, g->uuid) != 0) {
            snprintf(err, errlen, "%s: replicas[%zu] is not a replica of gpus[%zu] (%s)", what, i, i, g->uuid);
            goto out;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(a.gpus[j].uuid, g->uuid) == 0) {
                snprintf(err, errlen, "%s: GPU %s is listed twice", what, g->uuid);
                goto out;
            }
        }
    }
    a.ngpus = (int)n;
    *out = a;
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int gs_allocated_parse(const char *text, size_t len, char (*replicas)[GS_REPLICA_ID_MAX], int max, char *err,
                       size_t errlen)
{
    static const char what[] = GS_ANN_ALLOCATED;
    json_t *root = load(text, len, what, err, errlen);
    if (!root)
        return -1;
    json_t *reps = json_object_get(root, "replicas");
    size_t n = json_array_size(reps);
    int rc = -1;
    if (!json_is_array(reps) || n == 0 || n > (size_t)max) {
        snprintf(err, errlen, "%s: \"replicas\" must be an array of 1..%d device IDs", what, max);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (get_replica(reps, i, replicas[i], GS_REPLICA_ID_MAX, what, err, errlen) != 0)
            goto out;
    rc = (int)n;
out:
    json_decref(root);
    return rc;
}

int gs_assignment_rebind(const struct gs_assignment *a, const char (*held)[GS_REPLICA_ID_MAX], int n,
                         struct gs_assignment *out, char *err, size_t errlen)
{
    if (n != a->ngpus || n <= 0 || n > GS_ASSIGN_MAX_GPUS) {
        snprintf(err, errlen, "%d replicas held for an assignment of %d GPUs", n, a->ngpus);
        return -1;
    }
    struct gs_assignment o = *a;
    int used[GS_ASSIGN_MAX_GPUS] = { 0 }, from[GS_ASSIGN_MAX_GPUS];
    char uuid[GS_ASSIGN_MAX_GPUS][GS_UUID_MAX];
    for (int i = 0; i < n; i++) {
        from[i] = -1;
        if (gs_replica_split(held[i], uuid[i], sizeof uuid[i], NULL) != 0) {
            snprintf(err, errlen, "'%.140s' is not a device ID", held[i]);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(uuid[i], uuid[j]) == 0) {
                snprintf(err, errlen, "two held replicas on GPU %s", uuid[i]);
                return -1;
            }
        for (int g = 0; g < a->ngpus; g++)
            if (strcmp(a->gpus[g].uuid, uuid[i]) == 0) {
                from[i] = g;
                used[g] = 1;
            }
    }
    for (int i = 0; i < n; i++) {
        if (from[i] < 0) {
            for (int g = 0; g < a->ngpus && from[i] < 0; g++)
                if (!used[g]) {
                    from[i] = g;
                    used[g] = 1;
                }
        }
        o.gpus[i] = a->gpus[from[i]];
        memcpy(o.gpus[i].uuid, uuid[i], sizeof o.gpus[i].uuid);
        snprintf(o.gpus[i].replica, sizeof o.gpus[i].replica, "%s", held[i]);
    }
    *out = o;
    return 0;
}
