/* Private to src/k8s: the client's configuration. */
#ifndef GPUSLICE_KUBE_INTERNAL_H
#define GPUSLICE_KUBE_INTERNAL_H

#include <stddef.h>

struct kube_client {
    char *base;       /* https://host:port, no trailing slash */
    char *token;      /* static bearer token, or NULL */
    char *token_file; /* re-read on every request (bound tokens rotate), or NULL */
    char *ca_file;    /* CA bundle path, or NULL for the system store */
    char *ca_tmp;     /* temporary file holding certificate-authority-data */
    int insecure;     /* skip TLS verification (kubeconfig opt-in only) */
    int attempts;
    int backoff_ms;
    long timeout_ms;
};

struct kube_client *kube_client_alloc(const char *base, char *err, size_t errlen);
void kube_global_init(void);

#endif
