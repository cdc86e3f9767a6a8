/* gpuslice's simulated GPU (--simulated-gpu SIZE of run and top): the
 * simulated driver of tests/simdriver (docs/simulated-driver.md), found
 * beside this program, modelling one GPU of SIZE whose state every run that
 * names the same SIZE in one state directory shares. */
#ifndef GPUSLICE_CLI_SIMULATED_GPU_H
#define GPUSLICE_CLI_SIMULATED_GPU_H

#include <limits.h>
#include <stddef.h>

struct gs_simgpu {
    char dir[PATH_MAX];       /* the simulated driver's folder */
    char nvml[PATH_MAX + 32]; /* its libnvidia-ml.so.1 */
};

/* 0 if SIZE can be --simulated-gpu's, else -1 with a message naming cmd. */
int gs_simgpu_size_ok(const char *cmd, const char *size);

/* Finds the simulated driver and points this process's environment at the
 * GPU of SIZE in state_dir (GPUSLICE_SIM_MEM, GPUSLICE_SIM_STATE), which the
 * simulated driver reads when it starts. 0, or -1 with a message. */
int gs_simgpu_select(const char *cmd, const char *size, const char *state_dir, struct gs_simgpu *out);

#endif
