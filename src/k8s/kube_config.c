/*
 * Client configuration: in-cluster service account, a plain URL, or a
 * kubeconfig (kube_kubeconfig.c); the client's life.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube_client.h"
#include "kube_internal.h"
#include "text_escape.h"

struct kube_client *kube_client_alloc(const char *base, char *err, size_t errlen)
{
    kube_global_init();
    int bad = !base || (strncmp(base, "http://", 7) != 0 && strncmp(base, "https://", 8) != 0);
    const char *host = bad ? NULL : strstr(base, "://") + 3;
    bad = bad || *host == '\0' || *host == '/';
    for (const char *p = base; p && *p && !bad; p++)
        bad = (unsigned char)*p <= ' ' || (unsigned char)*p == 0x7f;
    if (bad) {
        char shown[GS_ESCAPE_BUF];
        snprintf(err, errlen, "API server URL '%s' must be http:// or https:// and a host, with no spaces",
                 gs_escape_shown(shown, base ? base : "(none)"));
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
    free(kc->base);
    if (kc->token)
        explicit_bzero(kc->token, strlen(kc->token));
    free(kc->token);
    free(kc->token_file);
    free(kc->ca_file);
    free(kc->ca_data.data);
    free(kc->cert_file);
    free(kc->key_file);
    free(kc->cert_data.data);
    if (kc->key_data.data)
        explicit_bzero(kc->key_data.data, kc->key_data.len);
    free(kc->key_data.data);
    free(kc);
}

struct kube_client *kube_client_new_url(const char *base_url, const char *token, char *err, size_t errlen)
{
    if (token && *token && !kube_token_ok(token)) {
        snprintf(err, errlen, "the token (GPUSLICE_KUBE_TOKEN) holds a space or a control byte");
        return NULL;
    }
    struct kube_client *kc = kube_client_alloc(base_url, err, errlen);
    if (kc && token && *token && !(kc->token = strdup(token))) {
        kube_client_free(kc);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
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
