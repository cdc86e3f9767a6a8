/*
 * gpuslice-simctl: prints the simulated driver's state file, for tests and
 * debugging. Dead processes are dropped first, as any reader of the state
 * does. Output, one record per line, fields in this order:
 *   device <i> uuid <uuid> total <bytes> used <bytes> free <bytes>
 *   process <pid> device <i> used <bytes> contexts <n>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_state.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuslice-simctl [STATE_FILE]\n"
               "Prints the simulated GPU state (default file: $GPUSLICE_SIM_STATE).\n");
}

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))) {
        usage(argc > 2 ? stderr : stdout);
        return argc > 2 ? 2 : 0;
    }
    const char *path = argc == 2 ? argv[1] : getenv("GPUSLICE_SIM_STATE");
    if (!path || !path[0]) {
        usage(stderr);
        return 2;
    }
    struct sim_state *st = sim_state_open_existing(path);
    if (!st)
        return 1;
    if (sim_state_lock(st) != 0) {
        fprintf(stderr, "gpuslice-simctl: cannot lock the state\n");
        return 1;
    }
    for (uint32_t d = 0; d < st->ndevices; d++) {
        char uuid[96];
        uint64_t used = sim_device_used(st, (int)d), total = st->dev[d].total;
        sim_device_uuid_string((int)d, uuid, sizeof(uuid));
        printf("device %u uuid %s total %llu used %llu free %llu\n", d, uuid, (unsigned long long)total,
               (unsigned long long)used, (unsigned long long)(used >= total ? 0 : total - used));
    }
    for (uint32_t d = 0; d < st->ndevices; d++) {
        for (int p = 0; p < SIM_MAX_PROCS; p++) {
            const struct sim_proc *pr = &st->procs[p];
            if (pr->pid && (pr->used[d] || pr->contexts[d]))
                printf("process %d device %u used %llu contexts %u\n", pr->pid, d, (unsigned long long)pr->used[d],
                       pr->contexts[d]);
        }
    }
    sim_state_unlock(st);
    return 0;
}
