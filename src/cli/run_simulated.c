/* `gpuslice run --simulated-gpu SIZE`: for someone without an NVIDIA GPU, the
 * command runs on gpuslice's simulated driver (tests/simdriver,
 * docs/simulated-driver.md): libcuda.so.1 and libnvidia-ml.so.1 that model a
 * GPU of SIZE, which the interposer limits as it would a real one. */
#define _GNU_SOURCE
#include "cli.h"
#include "run_checks.h"
#include "simulated_gpu.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct gs_simgpu sim; /* the simulated GPU of this run, once selected */

void gs_run_hint_simulated(void)
{
    fprintf(stderr, "To try gpuslice without a GPU, run COMMAND on a simulated one: "
                    "gpuslice run --simulated-gpu 80GiB --memory 4GiB -- COMMAND\n");
}

void gs_run_note_no_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (h) {
        dlclose(h);
        return;
    }
    fprintf(stderr, "gpuslice run: note: no NVIDIA driver here (libcuda.so.1 cannot be loaded): the command will "
                    "find no GPU\n");
    gs_run_hint_simulated();
}

int gs_run_use_simulated(const char *size, const char *state_dir, struct gs_run_request *req)
{
    if (gs_simgpu_select("run", size, state_dir, &sim) != 0)
        return GS_EXIT_SETUP;
    const char *old = getenv("LD_LIBRARY_PATH");
    size_t n = strlen(sim.dir) + (old ? strlen(old) : 0) + 2;
    char *path = malloc(n);
    if (!path)
        return GS_EXIT_SETUP;
    snprintf(path, n, "%s%s%s", sim.dir, old && *old ? ":" : "", old && *old ? old : "");
    int rc = setenv("LD_LIBRARY_PATH", path, 1);
    free(path);
    req->nvml = sim.nvml;
    return rc ? GS_EXIT_SETUP : 0;
}
