#define _GNU_SOURCE
#include "simulated_gpu.h"
#include "cli.h"
#include "size_parse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where the simulated driver lies relative to this program: the build tree
 * (<build>/bin, <build>/simdriver), then an install (<prefix>/bin,
 * <prefix>/lib/gpuslice/simdriver). */
static const char *const sim_dirs[] = { "../simdriver", "../" GPUSLICE_INSTALL_LIBDIR "/gpuslice/simdriver" };

static int find_sim_dir(const char *cmd, char *out, size_t len)
{
    char self[PATH_MAX], path[PATH_MAX + 64];
    if (gs_cli_self_dir(self, sizeof self) != 0)
        return -1;
    for (size_t i = 0; i < sizeof sim_dirs / sizeof sim_dirs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s/libcuda.so.1", self, sim_dirs[i]);
        if (access(path, R_OK) == 0 && realpath(path, out) && strlen(out) < len) {
            *strrchr(out, '/') = '\0';
            return 0;
        }
    }
    fprintf(stderr,
            "gpuslice %s: --simulated-gpu: the simulated driver is not installed beside %s (looked in %s/%s "
            "and %s/%s)\n",
            cmd, self, self, sim_dirs[0], self, sim_dirs[1]);
    return -1;
}

int gs_simgpu_size_ok(const char *cmd, const char *size)
{
    char err[256];
    uint64_t bytes;
    if (gs_parse_size(size, &bytes, err, sizeof err) != 0) {
        fprintf(stderr, "gpuslice %s: --simulated-gpu '%s': %s\n", cmd, size, err);
        return -1;
    }
    /* The size names the state file: a unit and no path characters. */
    if (bytes == 0 || strspn(size, "0123456789.") == strlen(size) || strpbrk(size, "/ \t")) {
        fprintf(stderr, "gpuslice %s: --simulated-gpu '%s': expected the GPU's memory with a unit, e.g. 80GiB\n", cmd,
                size);
        return -1;
    }
    return 0;
}

int gs_simgpu_select(const char *cmd, const char *size, const char *state_dir, struct gs_simgpu *out)
{
    char state[PATH_MAX + 64];
    if (find_sim_dir(cmd, out->dir, sizeof out->dir) != 0)
        return -1;
    snprintf(out->nvml, sizeof out->nvml, "%s/libnvidia-ml.so.1", out->dir);
    snprintf(state, sizeof state, "%s/simulated-gpu-%s.state", state_dir, size);
    return setenv("GPUSLICE_SIM_MEM", size, 1) || setenv("GPUSLICE_SIM_STATE", state, 1) ? -1 : 0;
}
