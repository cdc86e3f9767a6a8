/*
 * Fuzzes the kubeconfig loader (src/k8s/kube_kubeconfig.c, its YAML through
 * yaml_json.c) with any bytes as the file's text.
 *
 * Invariants: no crash, leak or unbounded growth (nested aliases); a refusal
 * says why in one line; an accepted file gives a client for an http(s) URL
 * with no space or control byte, and a client certificate with its key.
 */
#include "fuzz_target.h"
#include "kube_client.h"
#include "kube_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[300] = "";
    if (size > KUBE_KUBECONFIG_MAX_BYTES)
        return 0;
    struct kube_client *kc = kube_client_from_kubeconfig((const char *)data, size, "/fuzz", "fuzz", err, sizeof err);
    if (!kc) {
        fuzz_check_refusal(err, sizeof err);
        return 0;
    }
    FUZZ_CHECK(strncmp(kc->base, "http://", 7) == 0 || strncmp(kc->base, "https://", 8) == 0);
    for (const char *p = kc->base; *p; p++)
        FUZZ_CHECK((unsigned char)*p > ' ' && (unsigned char)*p != 0x7f);
    FUZZ_CHECK(!(kc->cert_file || kc->cert_data.data) == !(kc->key_file || kc->key_data.data));
    kube_client_free(kc);
    return 0;
}
