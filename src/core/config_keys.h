/* The table of configuration variable names. Every name maps to a slot number so that
 * the environment and the config file can be held side by side in the same shape. */
#ifndef GPUSLICE_CONFIG_KEYS_H
#define GPUSLICE_CONFIG_KEYS_H

#include <stddef.h>

#include "config.h"

/* Per-device families: NAME (all devices) and NAME_0..NAME_15. */
enum gs_key_family {
    GS_FAM_HAMI_MEM = 0, /* CUDA_DEVICE_MEMORY_LIMIT */
    GS_FAM_HAMI_SM,      /* CUDA_DEVICE_SM_LIMIT */
    GS_FAM_OUR_MEM,      /* GPUSLICE_MEMORY_LIMIT */
    GS_FAM_OUR_CORES,    /* GPUSLICE_CORES */
    GS_FAM_COUNT
};
#define GS_FAM_SLOTS (GS_MAX_DEVICES + 1)

/* Slot of a family's all-devices name (dev = -1) or of its device dev. */
#define GS_KEY_FAM(fam, dev) ((fam) * GS_FAM_SLOTS + 1 + (dev))

enum gs_key_scalar {
    GS_KEY_HAMI_CACHE = GS_FAM_COUNT * GS_FAM_SLOTS, /* CUDA_DEVICE_MEMORY_SHARED_CACHE */
    GS_KEY_HAMI_POLICY,                              /* GPU_CORE_UTILIZATION_POLICY */
    GS_KEY_HAMI_LOG,                                 /* LIBCUDA_LOG_LEVEL */
    GS_KEY_MODE,                                     /* GPUSLICE_COMPUTE_MODE */
    GS_KEY_WEIGHT,                                   /* GPUSLICE_SHARE_WEIGHT */
    GS_KEY_REGION,                                   /* GPUSLICE_REGION */
    GS_KEY_MANAGED,                                  /* GPUSLICE_MANAGED */
    GS_KEY_CTX_OVERHEAD,                             /* GPUSLICE_CTX_OVERHEAD */
    GS_KEY_LOG,                                      /* GPUSLICE_LOG_LEVEL */
    GS_KEY_CONTAINER,                                /* GPUSLICE_CONTAINER */
    GS_KEY_POWER_EXP,                                /* GPUSLICE_POWER_EXPONENT */
    GS_KEY_CONFIG,                                   /* GPUSLICE_CONFIG (environment only) */
    GS_KEY_COUNT
};

#define GS_KEY_UNKNOWN (-1)   /* not a configuration name */
#define GS_KEY_BAD_INDEX (-2) /* a per-device family with a bad _<i> suffix */

/* Longest name in the table plus "_15" and NUL, rounded up. */
#define GS_KEY_NAME_MAX 48

/* Writes the name of slot into buf (at least GS_KEY_NAME_MAX bytes). */
void gs_key_name(int slot, char *buf, size_t len);

/* Looks up the first len bytes of name: a slot, GS_KEY_UNKNOWN or GS_KEY_BAD_INDEX. */
int gs_key_lookup(const char *name, size_t len);

/* Names other gpuslice components put in a container's environment that are not
 * configuration, so gs_config_check_unknown must let them through. NULL-terminated. */
extern const char *const gs_key_other_names[];

#endif
