/* The kubeconfig loader (src/k8s/kube_kubeconfig.c): what it takes from the
 * files kubectl, kind and kubeadm write, and what it refuses, by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kube_client.h"
#include "kube_internal.h"

static char err[512];

static struct kube_client *load(const char *text)
{
    err[0] = '\0';
    return kube_client_from_kubeconfig(text, strlen(text), "/etc/kube", "test.yaml", err, sizeof err);
}

/* Loading text fails with an error that holds want. */
static void refused(const char *text, const char *want)
{
    struct kube_client *kc = load(text);
    CHECK(kc == NULL);
    if (!strstr(err, want) || strchr(err, '\n'))
        fprintf(stderr, "error '%s' lacks '%s' (or has a newline)\n", err, want);
    CHECK(strstr(err, want) != NULL);
    CHECK(strchr(err, '\n') == NULL);
    kube_client_free(kc);
}

/* base64 of "CERT-PEM" and "KEY-PEM" */
#define CERT_B64 "Q0VSVC1QRU0="
#define KEY_B64 "S0VZLVBFTQ=="

/* As kind writes it: two clusters, a current context, a client
 * certificate user; comments and quoting as YAML allows. */
static const char KIND[] = "apiVersion: v1\n"
                           "clusters:\n"
                           "- cluster:\n"
                           "    certificate-authority-data: " CERT_B64 "\n"
                           "    server: https://127.0.0.1:6443\n"
                           "  name: kind-kind\n"
                           "- cluster:\n"
                           "    server: https://other:6443 # not this one\n"
                           "  name: other\n"
                           "contexts:\n"
                           "- context:\n"
                           "    cluster: other\n"
                           "    user: nobody\n"
                           "  name: other\n"
                           "- context: {cluster: kind-kind, user: \"kind-kind\"}\n"
                           "  name: kind-kind\n"
                           "current-context: 'kind-kind'\n"
                           "kind: Config\n"
                           "users:\n"
                           "- name: kind-kind\n"
                           "  user:\n"
                           "    client-certificate-data: " CERT_B64 "\n"
                           "    client-key-data: >-\n"
                           "      S0VZ\n"
                           "      LVBFTQ==\n"
                           "- name: nobody\n"
                           "  user: {}\n";

static void a_kind_kubeconfig_gives_the_current_contexts_server_ca_and_certificate(void)
{
    struct kube_client *kc = load(KIND);
    CHECK(kc != NULL);
    if (!kc) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    CHECK(strcmp(kc->base, "https://127.0.0.1:6443") == 0);
    CHECK(kc->ca_data.len == 8 && memcmp(kc->ca_data.data, "CERT-PEM", 8) == 0);
    CHECK(kc->cert_data.len == 8 && memcmp(kc->cert_data.data, "CERT-PEM", 8) == 0);
    /* a folded scalar's line breaks are spaces: base64 ignores them */
    CHECK(kc->key_data.len == 7 && memcmp(kc->key_data.data, "KEY-PEM", 7) == 0);
    CHECK(!kc->token && !kc->token_file && !kc->insecure && !kc->ca_file);
    kube_client_free(kc);
}

static void the_same_document_as_json_reads_the_same(void)
{
    struct kube_client *kc =
        load("{\"current-context\": \"c\", \"contexts\": [{\"name\": \"c\", \"context\": {\"cluster\": \"k\", "
             "\"user\": \"u\"}}], \"clusters\": [{\"name\": \"k\", \"cluster\": {\"server\": "
             "\"https://10.0.0.1\", \"insecure-skip-tls-verify\": true}}], \"users\": [{\"name\": \"u\", "
             "\"user\": {\"token\": \"abc\", \"tokenFile\": \"ignored\"}}]}");
    CHECK(kc && strcmp(kc->base, "https://10.0.0.1") == 0);
    CHECK(kc && kc->insecure && kc->token && strcmp(kc->token, "abc") == 0 && !kc->token_file);
    kube_client_free(kc);
}

static void relative_paths_are_the_files_directorys(void)
{
    struct kube_client *kc = load("clusters:\n- name: k\n  cluster:\n    server: https://k\n"
                                  "    certificate-authority: pki/ca.crt\n"
                                  "users:\n- name: u\n  user:\n    tokenFile: /run/token\n"
                                  "    client-certificate: u.crt\n    client-key: /keys/u.key\n");
    CHECK(kc != NULL);
    if (!kc) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    CHECK(strcmp(kc->ca_file, "/etc/kube/pki/ca.crt") == 0);
    CHECK(strcmp(kc->token_file, "/run/token") == 0);
    CHECK(strcmp(kc->cert_file, "/etc/kube/u.crt") == 0 && strcmp(kc->key_file, "/keys/u.key") == 0);
    kube_client_free(kc);
}

static void what_cannot_be_honoured_is_refused_by_name(void)
{
    static const char head[] = "clusters:\n- name: k\n  cluster:\n    server: https://k\n"
                               "contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n"
                               "current-context: c\n";
    char doc[1024];
    snprintf(doc, sizeof doc,
             "%susers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
             "      command: aws\n",
             head);
    refused(doc, "exec plugin (aws)");
    snprintf(doc, sizeof doc, "%susers:\n- name: u\n  user:\n    auth-provider:\n      name: gcp\n", head);
    refused(doc, "auth-provider");
    snprintf(doc, sizeof doc, "%susers:\n- name: u\n  user:\n    username: admin\n    password: x\n", head);
    refused(doc, "basic authentication");
    snprintf(doc, sizeof doc, "%susers:\n- name: u\n  user:\n    client-certificate-data: " CERT_B64 "\n", head);
    refused(doc, "user 'u' has a client certificate but no client-key");
    snprintf(doc, sizeof doc, "%susers:\n- name: u\n  user:\n    client-key: k.pem\n", head);
    refused(doc, "has a client key but no client-certificate");
    snprintf(doc, sizeof doc,
             "%susers:\n- name: u\n  user:\n    client-certificate-data: not*base64\n    client-key: k\n", head);
    refused(doc, "client-certificate-data is not base64");
    snprintf(doc, sizeof doc,
             "%susers:\n- name: u\n  user:\n    client-certificate-data: QQ==QUFB\n    client-key: k\n", head);
    refused(doc, "client-certificate-data is not base64");
    snprintf(doc, sizeof doc,
             "%susers:\n- name: u\n  user:\n    client-certificate-data: QUF=QQ==\n    client-key: k\n", head);
    refused(doc, "client-certificate-data is not base64");
    snprintf(doc, sizeof doc, "%susers:\n- name: u\n  user: {token: \"abc\\r\\nX-Evil: 1\"}\n", head);
    refused(doc, "user 'u' has a token with a space or a control byte");
    snprintf(doc, sizeof doc, "%susers: []\n", head);
    refused(doc, "names user 'u', which it does not list");
}

static void a_context_that_cannot_be_chosen_is_refused(void)
{
    static const char two[] = "clusters:\n- name: k\n  cluster:\n    server: https://k\n"
                              "contexts:\n- name: a\n  context: {cluster: k}\n- name: b\n  context: {cluster: k}\n";
    refused(two, "no current-context, and 2 contexts to choose from");
    char doc[512];
    snprintf(doc, sizeof doc, "%scurrent-context: \"c\\nd\"\n", two);
    refused(doc, "current-context 'c\\x0ad' is not among its contexts");
    refused("contexts:\n- name: a\n  context: {cluster: gone}\n", "context 'a' names no cluster it lists");
    refused("clusters:\n- name: k\n  cluster: {}\n", "cluster 'k' has no server");
    refused("clusters:\n- name: k\n  cluster: {server: \"ftp://k\"}\n", "must be http:// or https:// and a host");
    refused("clusters:\n- name: k\n  cluster: {server: \"http:///\"}\n", "must be http:// or https:// and a host");
    refused("clusters:\n- name: k\n  cluster: {server: \"https://k\\n\"}\n", "with no spaces");
    refused("clusters:\n- name: k\n  cluster: {server: https://k, certificate-authority: ca.crt, "
            "insecure-skip-tls-verify: true}\n",
            "names a certificate authority and insecure-skip-tls-verify");
    refused("clusters: []\n", "no context, and 0 clusters to choose from");
    /* the one cluster, with no context at all */
    struct kube_client *kc = load("clusters:\n- name: k\n  cluster: {server: http://k:8080}\n");
    CHECK(kc && strcmp(kc->base, "http://k:8080") == 0);
    kube_client_free(kc);
}

static void what_is_not_a_kubeconfig_is_refused_with_its_line(void)
{
    refused("clusters:\n  - name: [k\n", "line 3");
    refused("{\"clusters\": [}", "line 1");
    refused("- just\n- a list\n", "not a mapping");
    refused("", "empty");
    /* aliases of aliases, a thousand-fold each: bounded, not expanded */
    refused("a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
            "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
            "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
            "more than 65536 values");
    char deep[200] = "x: ";
    for (int i = 0; i < 40; i++)
        strcat(deep, "[");
    refused(deep, "line");
    char flat[200] = "x: ";
    for (int i = 0; i < 40; i++)
        strcat(flat, "[");
    for (int i = 0; i < 40; i++)
        strcat(flat, "]");
    refused(flat, "nested deeper than 32 levels");
}

static void a_file_is_read_whole_or_refused(void)
{
    char dir[] = "/tmp/gs-kubeconfig-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/config", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("clusters:\n- name: k\n  cluster: {server: https://k, certificate-authority: ca.crt}\n", f);
    fclose(f);
    struct kube_client *kc = kube_client_new_kubeconfig(path, err, sizeof err);
    char want[300];
    snprintf(want, sizeof want, "%s/ca.crt", dir);
    CHECK(kc && strcmp(kc->ca_file, want) == 0);
    kube_client_free(kc);

    f = fopen(path, "w");
    for (int i = 0; f && i < KUBE_KUBECONFIG_MAX_BYTES / 16 + 1; i++)
        fputs("# padding 01234\n", f); /* 16 bytes */
    if (f)
        fclose(f);
    CHECK(kube_client_new_kubeconfig(path, err, sizeof err) == NULL);
    CHECK(strstr(err, "at most 1048576 bytes") != NULL);
    CHECK(kube_client_new_kubeconfig(dir, err, sizeof err) == NULL && strstr(err, "not a regular file"));
    unlink(path);
    CHECK(kube_client_new_kubeconfig(path, err, sizeof err) == NULL && strstr(err, "No such file"));
    rmdir(dir);
}

int main(void)
{
    a_kind_kubeconfig_gives_the_current_contexts_server_ca_and_certificate();
    the_same_document_as_json_reads_the_same();
    relative_paths_are_the_files_directorys();
    what_cannot_be_honoured_is_refused_by_name();
    a_context_that_cannot_be_chosen_is_refused();
    what_is_not_a_kubeconfig_is_refused_with_its_line();
    a_file_is_read_whole_or_refused();
    return check_result("kubeconfig");
}
