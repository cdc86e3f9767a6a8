/*
 * Client configuration: in-cluster service account, kubeconfig (the subset
 * kubectl writes: clusters/contexts/users lists of flat mappings, or the same
 * document as JSON), or a plain URL.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube_client.h"
#include "kube_internal.h"

struct kube_client *kube_client_alloc(const char *base, char *err, size_t errlen)
{
    kube_global_init();
    if (!base || (strncmp(base, "http://", 7) != 0 && strncmp(base, "https://", 8) != 0)) {
        snprintf(err, errlen, "API server URL '%s' must start with http:// or https://", base ? base : "(none)");
        return NULL;
    }
    struct kube_client *kc = calloc(1, sizeof *kc);
    if (!kc || !(kc->base = strdup(base))) {
        free(kc);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    size_t n = strlen(kc->base);
    while (n > 0 && kc->base[n - 1] == '/')
        kc->base[--n] = '\0';
    kc->attempts = 5;
    kc->backoff_ms = 100;
    kc->timeout_ms = 10000;
    return kc;
}

void kube_client_free(struct kube_client *kc)
{
    if (!kc)
        return;
    if (kc->ca_tmp) {
        unlink(kc->ca_tmp);
        free(kc->ca_tmp);
    }
    free(kc->base);
    free(kc->token);
    free(kc->token_file);
    free(kc->ca_file);
    free(kc);
}

struct kube_client *kube_client_new_url(const char *base_url, const char *token, char *err, size_t errlen)
{
    struct kube_client *kc = kube_client_alloc(base_url, err, errlen);
    if (kc && token && *token)
        kc->token = strdup(token);
    return kc;
}

struct kube_client *kube_client_new_incluster(const char *dir, char *err, size_t errlen)
{
    if (!dir)
        dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host) {
        snprintf(err, errlen,
                 "in-cluster config: KUBERNETES_SERVICE_HOST is not set "
                 "(not running in a pod? use --kubeconfig or --api-server)");
        return NULL;
    }
    char tok[4096], ca[4096], base[512];
    snprintf(tok, sizeof tok, "%s/token", dir);
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    if (access(tok, R_OK) != 0) {
        snprintf(err, errlen, "in-cluster config: cannot read %s", tok);
        return NULL;
    }
    /* An IPv6 address needs brackets in a URL. */
    if (strchr(host, ':'))
        snprintf(base, sizeof base, "https://[%s]:%s", host, port && *port ? port : "443");
    else
        snprintf(base, sizeof base, "https://%s:%s", host, port && *port ? port : "443");
    struct kube_client *kc = kube_client_alloc(base, err, errlen);
    if (!kc)
        return NULL;
    kc->token_file = strdup(tok);
    if (access(ca, R_OK) == 0)
        kc->ca_file = strdup(ca);
    return kc;
}

/* ---- kubeconfig ---- */
#define KC_MAX_ITEMS 32
#define KC_MAX_KEYS 12
struct kc_item {
    int nkeys;
    char key[KC_MAX_KEYS][48];
    char *val[KC_MAX_KEYS];
};
struct kc_doc {
    char current[256];
    struct kc_item clusters[KC_MAX_ITEMS], contexts[KC_MAX_ITEMS], users[KC_MAX_ITEMS];
    int nclusters, ncontexts, nusers;
};

static void doc_free(struct kc_doc *d)
{
    struct kc_item *lists[3] = { d->clusters, d->contexts, d->users };
    int counts[3] = { d->nclusters, d->ncontexts, d->nusers };
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < counts[l]; i++)
            for (int k = 0; k < lists[l][i].nkeys; k++)
                free(lists[l][i].val[k]);
}

static void item_set(struct kc_item *it, const char *key, const char *val)
{
    if (it->nkeys >= KC_MAX_KEYS || !*val)
        return;
    snprintf(it->key[it->nkeys], sizeof it->key[0], "%s", key);
    it->val[it->nkeys++] = strdup(val);
}

static const char *item_get(const struct kc_item *it, const char *key)
{
    for (int k = 0; k < it->nkeys; k++)
        if (strcmp(it->key[k], key) == 0)
            return it->val[k];
    return NULL;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    if (n >= 2 && (s[0] == '"' || s[0] == '\'') && s[n - 1] == s[0]) {
        s[n - 1] = '\0';
        s++;
    }
    return s;
}

static void parse_yaml(char *text, struct kc_doc *d)
{
    struct kc_item *list = NULL;
    int *count = NULL;
    struct kc_item *cur = NULL;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *hash = strstr(line, " #");
        if (hash)
            *hash = '\0';
        if (line[0] == '#')
            continue;
        int indent = 0;
        while (line[indent] == ' ')
            indent++;
        char *s = line + indent;
        if (!*s)
            continue;
        int item_start = 0;
        if (s[0] == '-' && (s[1] == ' ' || s[1] == '\0')) {
            item_start = 1;
            s = trim(s + 1);
        }
        char *colon = strchr(s, ':');
        if (indent == 0 && !item_start) {
            cur = NULL;
            list = NULL;
            if (!colon)
                continue;
            *colon = '\0';
            char *key = trim(s), *val = trim(colon + 1);
            if (strcmp(key, "clusters") == 0)
                list = d->clusters, count = &d->nclusters;
            else if (strcmp(key, "contexts") == 0)
                list = d->contexts, count = &d->ncontexts;
            else if (strcmp(key, "users") == 0)
                list = d->users, count = &d->nusers;
            else if (strcmp(key, "current-context") == 0)
                snprintf(d->current, sizeof d->current, "%s", val);
            continue;
        }
        if (item_start && list) {
            cur = *count < KC_MAX_ITEMS ? &list[(*count)++] : NULL;
        }
        if (!cur || !colon)
            continue;
        *colon = '\0';
        item_set(cur, trim(s), trim(colon + 1));
    }
}

static void json_items(json_t *arr, struct kc_item *items, int *count, const char *inner)
{
    size_t i;
    json_t *el;
    json_array_foreach(arr, i, el)
    {
        if (*count >= KC_MAX_ITEMS)
            break;
        struct kc_item *it = &items[(*count)++];
        const char *name = json_string_value(json_object_get(el, "name"));
        if (name)
            item_set(it, "name", name);
        json_t *obj = json_object_get(el, inner);
        const char *k;
        json_t *v;
        json_object_foreach(obj, k, v)
        {
            if (json_is_string(v))
                item_set(it, k, json_string_value(v));
            else if (json_is_boolean(v))
                item_set(it, k, json_is_true(v) ? "true" : "false");
        }
    }
}

static const struct kc_item *find_named(const struct kc_item *items, int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        const char *nm = item_get(&items[i], "name");
        if (name && nm && strcmp(nm, name) == 0)
            return &items[i];
    }
    return n == 1 && !name ? &items[0] : NULL;
}

static int b64val(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

static char *write_ca_data(const char *b64, char *err, size_t errlen)
{
    char path[] = "/tmp/gpuslice-ca-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        snprintf(err, errlen, "kubeconfig: cannot create a temporary CA file");
        return NULL;
    }
    FILE *f = fdopen(fd, "w");
    unsigned acc = 0;
    int bits = 0;
    for (const char *p = b64; *p && *p != '='; p++) {
        int v = b64val((unsigned char)*p);
        if (v < 0)
            continue;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            fputc((int)((acc >> bits) & 0xffu), f);
        }
    }
    fclose(f);
    return strdup(path);
}

struct kube_client *kube_client_new_kubeconfig(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "kubeconfig %s: cannot open", path);
        return NULL;
    }
    size_t cap = 1 << 20;
    char *text = malloc(cap);
    size_t n = text ? fread(text, 1, cap - 1, f) : 0;
    fclose(f);
    if (!text)
        return NULL;
    text[n] = '\0';
    struct kc_doc *d = calloc(1, sizeof *d);
    if (!d) {
        free(text);
        return NULL;
    }
    const char *first = text;
    while (isspace((unsigned char)*first))
        first++;
    if (*first == '{') {
        json_error_t je;
        json_t *root = json_loads(text, 0, &je);
        if (!root) {
            snprintf(err, errlen, "kubeconfig %s: bad JSON at line %d: %s", path, je.line, je.text);
            free(text);
            free(d);
            return NULL;
        }
        const char *cur = json_string_value(json_object_get(root, "current-context"));
        if (cur)
            snprintf(d->current, sizeof d->current, "%s", cur);
        json_items(json_object_get(root, "clusters"), d->clusters, &d->nclusters, "cluster");
        json_items(json_object_get(root, "contexts"), d->contexts, &d->ncontexts, "context");
        json_items(json_object_get(root, "users"), d->users, &d->nusers, "user");
        json_decref(root);
    } else {
        parse_yaml(text, d);
    }
    free(text);
    struct kube_client *kc = NULL;
    const struct kc_item *ctx = find_named(d->contexts, d->ncontexts, d->current[0] ? d->current : NULL);
    const struct kc_item *cl = ctx ? find_named(d->clusters, d->nclusters, item_get(ctx, "cluster"))
                                   : (d->nclusters == 1 ? &d->clusters[0] : NULL);
    const struct kc_item *us =
        ctx ? find_named(d->users, d->nusers, item_get(ctx, "user")) : (d->nusers == 1 ? &d->users[0] : NULL);
    const char *server = cl ? item_get(cl, "server") : NULL;
    if (!server) {
        snprintf(err, errlen, "kubeconfig %s: no server for context '%s'", path, d->current[0] ? d->current : "(none)");
        goto out;
    }
    if (us && (item_get(us, "client-certificate-data") || item_get(us, "client-certificate"))) {
        snprintf(err, errlen,
                 "kubeconfig %s: client certificates are not supported; use a "
                 "token user",
                 path);
        goto out;
    }
    kc = kube_client_alloc(server, err, errlen);
    if (!kc)
        goto out;
    const char *v;
    if (us && (v = item_get(us, "token")))
        kc->token = strdup(v);
    if (us && (v = item_get(us, "tokenFile")))
        kc->token_file = strdup(v);
    if ((v = item_get(cl, "certificate-authority")))
        kc->ca_file = strdup(v);
    if ((v = item_get(cl, "certificate-authority-data"))) {
        kc->ca_tmp = write_ca_data(v, err, errlen);
        if (kc->ca_tmp)
            kc->ca_file = strdup(kc->ca_tmp);
    }
    if ((v = item_get(cl, "insecure-skip-tls-verify")) && strcmp(v, "true") == 0)
        kc->insecure = 1;
out:
    doc_free(d);
    free(d);
    return kc;
}

struct kube_client *kube_client_new_auto(const char *url, const char *kubeconfig, char *err, size_t errlen)
{
    if (url && *url)
        return kube_client_new_url(url, getenv("GPUSLICE_KUBE_TOKEN"), err, errlen);
    if (!kubeconfig || !*kubeconfig)
        kubeconfig = getenv("KUBECONFIG");
    if (kubeconfig && *kubeconfig)
        return kube_client_new_kubeconfig(kubeconfig, err, errlen);
    return kube_client_new_incluster(getenv("GPUSLICE_SERVICEACCOUNT_DIR"), err, errlen);
}
