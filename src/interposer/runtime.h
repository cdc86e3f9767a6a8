/*
 * Process-wide interposer state: the configuration, the container's shared
 * region, this process's slot in it, and the CUDA-ordinal -> region-device
 * map. Everything here is set up lazily on the first driver call, so a
 * program that never touches the GPU pays nothing but a getenv scan.
 */
#ifndef GPUSLICE_RUNTIME_H
#define GPUSLICE_RUNTIME_H

#include "../abi/cuda_abi.h"
#include "../abi/nvml_abi.h"
#include "../core/config.h"
#include "../core/region.h"

#include <stddef.h>
#include <sys/stat.h>

enum gs_mode {
    GS_MODE_PASSTHROUGH = 0, /* nothing configured: every call goes straight through */
    GS_MODE_ENFORCE = 1,     /* limits and accounting active */
    GS_MODE_BROKEN = 2       /* invalid configuration or unusable state: fail closed */
};

struct gs_runtime {
    int mode;
    struct gs_config cfg;
    char error[1024]; /* why we are BROKEN */
};

extern struct gs_runtime gs_rt;

static inline int gs_mode(void)
{
    return __atomic_load_n(&gs_rt.mode, __ATOMIC_RELAXED);
}

/* The region, opened on first use; NULL (and mode BROKEN) if it cannot be. */
struct gs_region *gs_rt_region(void);

/* This process's own descriptor of the region file, for gs_region_*
 * calls that judge liveness (gs_region_reserve's getter): checked to be
 * the region's still, and opened again where the program closed it or
 * gave its number to another file; -1 before the region is open. */
int gs_rt_region_fd(void);

/* This process's region slot, attached on first use. -1 on failure, which
 * also sets mode BROKEN. */
int gs_rt_slot(void);

/* Before anything reaches the real driver: in enforce mode, opens the
 * region and takes this process's slot. 0 when the process may go on; -1
 * (mode BROKEN, reported once) when it must be refused the GPU. */
int gs_rt_ready(void);

/* Region device index for a CUDA ordinal / for the current context's device
 * / for an NVML device. -1 if unknown; a region that cannot record the
 * device also sets mode BROKEN. GS_DEV_UNTRACKED for an ordinal past the
 * per-ordinal tables (GS_MAX_DEVICES, logged once) where a limit is set:
 * its memory and compute cannot be accounted, so they are refused, never
 * left unlimited; -1 for it where nothing is limited. */
#define GS_DEV_UNTRACKED (-2)
int gs_rt_dev_of_ordinal(CUdevice ordinal);
int gs_rt_dev_current(CUdevice *ordinal_out);
int gs_rt_dev_of_nvml(nvmlDevice_t device);

/* Bumped in every child after fork(): per-thread state that outlives a fork
 * (the forking thread's) compares it instead of calling getpid(), a system
 * call, on the launch path. */
extern unsigned gs_rt_fork_generation;

/* The directory that holds the region (the state directory; "/" for a
 * region at the root), and the region file's own stat. 0, or -1 if the
 * region path has no directory part or the file cannot be stat'ed. */
int gs_rt_region_dir(char *dir, size_t len, struct stat *self);

/* Reports the configuration error once, on the first driver call. */
void gs_rt_report_broken(void);

#endif
