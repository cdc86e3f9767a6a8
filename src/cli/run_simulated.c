/* `gpuslice run --simulated-gpu SIZE`: for someone without an NVIDIA GPU, the
 * command runs on gpuslice's simulated driver (tests/simdriver,
 * docs/simulated-driver.md): libcuda.so.1 and libnvidia-ml.so.1 that model a
 * GPU of SIZE, which the interposer limits as it would a real one. */
#define _GNU_SOURCE
#include "cli.h"
#include "run_checks.h"
#include "size_parse.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where the simulated driver lies relative to this program: the build tree
 * (<build>/bin, <build>/simdriver), then an install (<prefix>/bin,
 * <prefix>/lib/gpuslice/simdriver). */
static const char *const sim_dirs[] = { "../simdriver", "../" GPUSLICE_INSTALL_LIBDIR "/gpuslice/simdriver" };

static char sim_nvml[PATH_MAX + 32]; /* the simulated NVML, once found */

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

static int find_sim_dir(char *out, size_t len)
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
            "gpuslice run: --simulated-gpu: the simulated driver is not installed beside %s (looked in %s/%s "
            "and %s/%s)\n",
            self, self, sim_dirs[0], self, sim_dirs[1]);
    return -1;
}

int gs_run_simulated_size_ok(const char *size)
{
    char err[256];
    uint64_t bytes;
    if (gs_parse_size(size, &bytes, err, sizeof err) != 0) {
        fprintf(stderr, "gpuslice run: --simulated-gpu '%s': %s\n", size, err);
        return -1;
    }
    /* The size names the state file: a unit and no path characters. */
    if (bytes == 0 || strspn(size, "0123456789.") == strlen(size) || strpbrk(size, "/ \t")) {
        fprintf(stderr, "gpuslice run: --simulated-gpu '%s': expected the GPU's memory with a unit, e.g. 80GiB\n",
                size);
        return -1;
    }
    return 0;
}

int gs_run_use_simulated(const char *size, const char *state_dir, struct gs_run_request *req)
{
    char dir[PATH_MAX], state[PATH_MAX + 64];
    if (find_sim_dir(dir, sizeof dir) != 0)
        return GS_EXIT_SETUP;
    const char *old = getenv("LD_LIBRARY_PATH");
    size_t n = strlen(dir) + (old ? strlen(old) : 0) + 2;
    char *path = malloc(n);
    if (!path)
        return GS_EXIT_SETUP;
    snprintf(path, n, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
    snprintf(state, sizeof state, "%s/simulated-gpu-%s.state", state_dir, size);
    snprintf(sim_nvml, sizeof sim_nvml, "%s/libnvidia-ml.so.1", dir);
    int rc = setenv("LD_LIBRARY_PATH", path, 1) || setenv("GPUSLICE_SIM_MEM", size, 1) ||
             setenv("GPUSLICE_SIM_STATE", state, 1);
    free(path);
    req->nvml = sim_nvml;
    return rc ? GS_EXIT_SETUP : 0;
}
