/* Fuzzes the node agent's annotation parsers (gpuslice.io/assignment and
 * gpuslice.io/allocated) and the replica-ID splitter. Invariants: no crash
 * or read past the input; failure gives a one-line reason; success yields
 * 1..16 GPUs whose replica IDs split back to their own UUIDs, memory in
 * range and cores <= 100. */
#include <stdint.h>
#include <string.h>

#include "annotation.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_assignment a;
    char err[512];
    err[0] = '\0';
    if (gs_assignment_parse((const char *)data, size, &a, err, sizeof err) == 0) {
        FUZZ_CHECK(a.ngpus >= 1 && a.ngpus <= GS_ASSIGN_MAX_GPUS);
        for (int i = 0; i < a.ngpus; i++) {
            char uuid[GS_UUID_MAX];
            unsigned k;
            FUZZ_CHECK(a.gpus[i].memory_mib >= 1 && a.gpus[i].memory_mib <= GS_MAX_MEMORY_MIB);
            FUZZ_CHECK(a.gpus[i].cores <= 100);
            FUZZ_CHECK(gs_replica_split(a.gpus[i].replica, uuid, sizeof uuid, &k) == 0);
            FUZZ_CHECK(strcmp(uuid, a.gpus[i].uuid) == 0);
        }
    } else {
        FUZZ_CHECK(err[0] != '\0' && strchr(err, '\n') == NULL);
    }
    char reps[GS_ASSIGN_MAX_GPUS][GS_REPLICA_ID_MAX];
    int n = gs_allocated_parse((const char *)data, size, reps, GS_ASSIGN_MAX_GPUS, err, sizeof err);
    FUZZ_CHECK(n == -1 || (n >= 1 && n <= GS_ASSIGN_MAX_GPUS));
    return 0;
}
