/*
 * A kubeconfig, as kubectl reads it: YAML (libyaml) or JSON, the current
 * context's cluster (server, CA as a file or inline, the insecure opt-in)
 * and user (bearer token or token file, client certificate and key as files
 * or inline). Relative paths are taken from the kubeconfig's directory.
 * What it cannot honour (exec plugins, auth providers, basic auth) is
 * refused by name rather than ignored.
 */
#include <errno.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "kube_client.h"
#include "kube_internal.h"
#include "text_escape.h"
#include "yaml_json.h"

/* A non-empty string field of o, or NULL. */
static const char *str_of(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s && *s ? s : NULL;
}

/* YAML scalars stay strings (yaml_to_json), true spelt as YAML's core
 * schema allows; JSON has booleans. */
static int is_true(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    const char *s = json_string_value(v);
    return json_is_true(v) || (s && strcasecmp(s, "true") == 0);
}

/* The entry of list (clusters, contexts or users) named name, or NULL.
 * Its fields are in its inner mapping (fields_of). */
static json_t *named(json_t *list, const char *name)
{
    size_t i;
    json_t *el;
    json_array_foreach(list, i, el)
    {
        const char *n = json_string_value(json_object_get(el, "name"));
        if (n && strcmp(n, name) == 0)
            return el;
    }
    return NULL;
}

/* An entry's fields: its "cluster", "context" or "user" mapping (NULL,
 * which reads as no fields, where it has none). */
static json_t *fields_of(json_t *entry, const char *inner)
{
    return json_object_get(entry, inner);
}

/* The only entry's name where list has exactly one, else NULL. */
static const char *only_name(json_t *list)
{
    return json_array_size(list) == 1 ? json_string_value(json_object_get(json_array_get(list, 0), "name")) : NULL;
}

/* path as the kubeconfig means it: relative to the file's directory. */
static char *resolve(const char *dir, const char *path)
{
    if (path[0] == '/' || !dir)
        return strdup(path);
    size_t n = strlen(dir) + strlen(path) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, path);
    return p;
}

/* Decodes the base64 of an inline field (whitespace ignored, padding as
 * written). 0, or -1 if it is not base64. */
static int decode_b64(const char *text, struct kube_blob *out)
{
    size_t n = strlen(text);
    char *clean = malloc(n + 1);
    unsigned char *bin = malloc(n / 4 * 3 + 3);
    size_t m = 0;
    for (size_t i = 0; clean && i < n; i++)
        if (!strchr(" \t\r\n", text[i]))
            clean[m++] = text[i];
    int ok = clean && bin && m > 0 && m % 4 == 0 && m <= (size_t)INT32_MAX;
    /* padding only at the end (EVP_DecodeBlock takes '=' anywhere) */
    for (size_t i = 0; ok && i + 2 < m; i++)
        ok = clean[i] != '=';
    ok = ok && !(clean[m - 2] == '=' && clean[m - 1] != '=');
    int len = ok ? EVP_DecodeBlock(bin, (const unsigned char *)clean, (int)m) : -1;
    if (len >= 0) {
        /* EVP_DecodeBlock counts the padding's bytes too */
        len -= (clean[m - 1] == '=') + (clean[m - 2] == '=');
        out->data = bin;
        out->len = (size_t)len;
    } else {
        free(bin);
    }
    free(clean);
    return len >= 0 ? 0 : -1;
}

/* A file or inline pair (client-certificate / client-certificate-data):
 * the path or the decoded bytes. 0, or -1 with err set. */
static int file_or_data(json_t *o, const char *field, const char *dir, char **file, struct kube_blob *data,
                        const char *origin, char *err, size_t errlen)
{
    char data_field[64];
    snprintf(data_field, sizeof data_field, "%s-data", field);
    const char *d = str_of(o, data_field), *f = str_of(o, field);
    if (d) { /* kubectl: inline data wins over a file */
        if (decode_b64(d, data) != 0) {
            snprintf(err, errlen, "kubeconfig %s: %s is not base64", origin, data_field);
            return -1;
        }
        return 0;
    }
    if (f && !(*file = resolve(dir, f))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* Refuses the ways of logging in that need more than a token or a
 * certificate: they would otherwise be ignored, and the API server would
 * answer 401 or 403 with no hint why. */
static int user_supported(json_t *user, const char *uname, const char *origin, char *err, size_t errlen)
{
    json_t *exec = json_object_get(user, "exec");
    if (exec) {
        const char *cmd = str_of(exec, "command");
        char cmd_s[GS_ESCAPE_BUF];
        snprintf(err, errlen,
                 "kubeconfig %s: user '%s' logs in through an exec plugin (%s), which gpuslice does not run; "
                 "use a token, tokenFile or client certificate user",
                 origin, uname, cmd ? gs_escape_shown(cmd_s, cmd) : "no command");
        return -1;
    }
    if (json_object_get(user, "auth-provider")) {
        snprintf(err, errlen,
                 "kubeconfig %s: user '%s' logs in through an auth-provider, which gpuslice does not support; "
                 "use a token, tokenFile or client certificate user",
                 origin, uname);
        return -1;
    }
    if (str_of(user, "username") || str_of(user, "password")) {
        snprintf(err, errlen,
                 "kubeconfig %s: user '%s' has a username and password (basic authentication, gone from "
                 "Kubernetes since 1.19); use a token, tokenFile or client certificate user",
                 origin, uname);
        return -1;
    }
    return 0;
}

/* The user's credentials into kc. 0, or -1 with err set. */
static int take_user(struct kube_client *kc, json_t *user, const char *uname, const char *dir, const char *origin,
                     char *err, size_t errlen)
{
    if (user_supported(user, uname, origin, err, errlen) != 0)
        return -1;
    const char *v;
    if ((v = str_of(user, "token")) && !kube_token_ok(v)) {
        snprintf(err, errlen, "kubeconfig %s: user '%s' has a token with a space or a control byte", origin, uname);
        return -1;
    }
    if (v && !(kc->token = strdup(v)))
        goto oom;
    if (!kc->token && (v = str_of(user, "tokenFile")) && !(kc->token_file = resolve(dir, v)))
        goto oom;
    if (file_or_data(user, "client-certificate", dir, &kc->cert_file, &kc->cert_data, origin, err, errlen) != 0 ||
        file_or_data(user, "client-key", dir, &kc->key_file, &kc->key_data, origin, err, errlen) != 0)
        return -1;
    int cert = kc->cert_file || kc->cert_data.data, key = kc->key_file || kc->key_data.data;
    if (cert != key) {
        snprintf(err, errlen, "kubeconfig %s: user '%s' has a client %s but no %s", origin, uname,
                 cert ? "certificate" : "key", cert ? "client-key" : "client-certificate");
        return -1;
    }
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

/* The cluster's CA and TLS choice into kc. 0, or -1 with err set. */
static int take_cluster(struct kube_client *kc, json_t *cluster, const char *cname, const char *dir, const char *origin,
                        char *err, size_t errlen)
{
    if (file_or_data(cluster, "certificate-authority", dir, &kc->ca_file, &kc->ca_data, origin, err, errlen) != 0)
        return -1;
    kc->insecure = is_true(cluster, "insecure-skip-tls-verify");
    if (kc->insecure && (kc->ca_file || kc->ca_data.data)) {
        snprintf(err, errlen,
                 "kubeconfig %s: cluster '%s' names a certificate authority and insecure-skip-tls-verify; "
                 "keep one",
                 origin, cname);
        return -1;
    }
    return 0;
}

struct kube_client *kube_client_from_kubeconfig(const char *text, size_t len, const char *dir, const char *origin,
                                                char *err, size_t errlen)
{
    char why[GS_ESCAPE_BUF + 64] = "";
    json_t *root;
    size_t lead = 0;
    while (lead < len && strchr(" \t\r\n", text[lead]))
        lead++;
    if (lead < len && text[lead] == '{') {
        json_error_t je;
        root = json_loadb(text, len, 0, &je);
        char text_s[GS_ESCAPE_BUF];
        if (!root) /* jansson quotes the token it stopped at */
            snprintf(why, sizeof why, "line %d: %s", je.line, gs_escape_shown(text_s, je.text));
    } else {
        root = yaml_to_json(text, len, why, sizeof why);
    }
    if (!root) {
        snprintf(err, errlen, "kubeconfig %s: %s", origin, why);
        return NULL;
    }
    struct kube_client *kc = NULL;
    /* (jansson reads nothing from what is not an object) */
    json_t *clusters = json_object_get(root, "clusters"), *contexts = json_object_get(root, "contexts");
    json_t *users = json_object_get(root, "users"), *ctx = NULL;
    const char *cur = str_of(root, "current-context");
    if (!json_is_object(root)) {
        snprintf(err, errlen, "kubeconfig %s: not a mapping of clusters, contexts and users", origin);
        goto out;
    }
    if (!cur && json_array_size(contexts) > 1) {
        snprintf(err, errlen, "kubeconfig %s: no current-context, and %zu contexts to choose from", origin,
                 json_array_size(contexts));
        goto out;
    }
    if (!cur)
        cur = only_name(contexts);
    char cur_s[GS_ESCAPE_BUF], cname_s[GS_ESCAPE_BUF], uname_s[GS_ESCAPE_BUF];
    gs_escape_shown(cur_s, cur);
    if (cur && !(ctx = named(contexts, cur))) {
        snprintf(err, errlen, "kubeconfig %s: current-context '%s' is not among its contexts", origin, cur_s);
        goto out;
    }
    /* without a context: the one cluster and the one user, if so */
    const char *cname = ctx ? str_of(fields_of(ctx, "context"), "cluster") : only_name(clusters);
    const char *uname = ctx ? str_of(fields_of(ctx, "context"), "user") : only_name(users);
    json_t *cluster = cname ? named(clusters, cname) : NULL;
    json_t *user = uname ? named(users, uname) : NULL;
    gs_escape_shown(cname_s, cname);
    gs_escape_shown(uname_s, uname);
    if (!cluster && ctx) {
        snprintf(err, errlen, "kubeconfig %s: context '%s' names no cluster it lists", origin, cur_s);
        goto out;
    }
    if (!cluster) {
        snprintf(err, errlen, "kubeconfig %s: no context, and %zu clusters to choose from", origin,
                 json_array_size(clusters));
        goto out;
    }
    if (uname && !user) { /* (without a context uname is the one user's: listed) */
        snprintf(err, errlen, "kubeconfig %s: context '%s' names user '%s', which it does not list", origin, cur_s,
                 uname_s);
        goto out;
    }
    cluster = fields_of(cluster, "cluster");
    user = fields_of(user, "user");
    const char *server = str_of(cluster, "server");
    if (!server) {
        snprintf(err, errlen, "kubeconfig %s: cluster '%s' has no server", origin, cname_s);
        goto out;
    }
    if (!(kc = kube_client_alloc(server, why, sizeof why))) {
        snprintf(err, errlen, "kubeconfig %s: cluster '%s': %s", origin, cname_s, why);
        goto out;
    }
    if (take_cluster(kc, cluster, cname_s, dir, origin, err, errlen) != 0 ||
        (user && take_user(kc, user, uname_s, dir, origin, err, errlen) != 0) || kube_tls_check(kc, err, errlen) != 0) {
        kube_client_free(kc);
        kc = NULL;
    }
out:
    json_decref(root);
    return kc;
}

struct kube_client *kube_client_new_kubeconfig(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "kubeconfig %s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    char *text = NULL;
    size_t n = 0;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > KUBE_KUBECONFIG_MAX_BYTES)
        snprintf(err, errlen, "kubeconfig %s: not a regular file of at most %d bytes", path, KUBE_KUBECONFIG_MAX_BYTES);
    else if (!(text = malloc((size_t)st.st_size + 1)))
        snprintf(err, errlen, "out of memory");
    else if ((n = fread(text, 1, (size_t)st.st_size, f)) != (size_t)st.st_size || ferror(f))
        snprintf(err, errlen, "kubeconfig %s: cannot read it whole", path);
    fclose(f);
    char *copy = strdup(path);
    struct kube_client *kc = NULL;
    if (text && n == (size_t)st.st_size && copy)
        kc = kube_client_from_kubeconfig(text, n, dirname(copy), path, err, errlen);
    free(copy);
    free(text);
    return kc;
}
