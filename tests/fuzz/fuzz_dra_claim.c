/* Fuzzes the DRA driver's claim reader (src/deviceplugin/dra_claim.c): a
 * ResourceClaim's JSON as the API server (or a tenant with write access to
 * claims) could serve it, against a fixed two-GPU node. Invariants: no crash
 * or read past the input; failure gives a one-line reason; success yields
 * 1..16 results of our driver on this node's devices and, per GPU, a memory
 * limit of 1 MiB up to the GPU's size and cores <= 100, ordered by index. */
#include <stdint.h>
#include <string.h>

#include "dra_claim.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct gs_node_view v = {
        .node = "node-a",
        .replicas = 10,
        .ngpus = 2,
        .gpus = { { .uuid = "GPU-a", .index = 0, .mem_total_mib = 81920, .healthy = 1 },
                  { .uuid = "GPU-b", .index = 3, .mem_total_mib = 40960, .healthy = 1 } },
    };
    struct gs_dra_alloc al;
    char err[512];
    err[0] = '\0';
    if (gs_dra_claim_parse((const char *)data, size, GS_DRA_DRIVER_DEFAULT, &v, "u1", &al, err, sizeof err) == 0) {
        FUZZ_CHECK(al.nresults >= 1 && al.nresults <= GS_DRA_MAX_RESULTS);
        FUZZ_CHECK(al.a.ngpus >= 1 && al.a.ngpus <= v.ngpus);
        for (int i = 0; i < al.a.ngpus; i++) {
            const struct gs_view_gpu *g = &v.gpus[al.gpu[i]];
            FUZZ_CHECK(strcmp(al.a.gpus[i].uuid, g->uuid) == 0);
            FUZZ_CHECK(al.a.gpus[i].memory_mib >= 1 && (int64_t)al.a.gpus[i].memory_mib <= g->mem_total_mib);
            FUZZ_CHECK(al.a.gpus[i].cores <= GS_DRA_CORES_TOTAL);
        }
        for (int j = 1; j < al.a.ngpus; j++)
            FUZZ_CHECK(v.gpus[al.gpu[al.order[j - 1]]].index < v.gpus[al.gpu[al.order[j]]].index);
        char pin[2048];
        gs_dra_pin_text(&al, "u1", pin, sizeof pin);
        FUZZ_CHECK(strncmp(pin, "dra-claim u1\nmode ", 18) == 0);
    } else {
        FUZZ_CHECK(err[0] != '\0' && strchr(err, '\n') == NULL);
    }
    return 0;
}
