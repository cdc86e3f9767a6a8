/* gpuslice configuration: HAMi-core's environment variables, our own, and an optional
 * config file, merged with a documented precedence (docs/configuration.md).
 * Invalid configuration fails closed: every set value is checked, even one that a
 * higher-precedence source overrides, and any error makes loading fail. */
#ifndef GPUSLICE_CONFIG_H
#define GPUSLICE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define GS_MAX_DEVICES 16

enum gs_core_policy { GS_CORE_POLICY_DEFAULT = 0, GS_CORE_POLICY_FORCE, GS_CORE_POLICY_DISABLE };
enum gs_compute_mode { GS_COMPUTE_CAP = 0, GS_COMPUTE_SHARE };
enum gs_managed_policy { GS_MANAGED_COUNT = 0, GS_MANAGED_IGNORE };

/* Defaults: config_keys.def, each key's dflt. */
struct gs_config {
    uint64_t
        mem_limit[GS_MAX_DEVICES]; /* bytes; 0 = no limit on that device (index = CUDA ordinal seen by the process) */
    unsigned sm_limit[GS_MAX_DEVICES]; /* percent 1..100; 0 = no compute limit */
    enum gs_compute_mode compute_mode; /* cap or share */
    unsigned share_weight;             /* for share mode */
    enum gs_core_policy core_policy;
    enum gs_managed_policy managed_policy;
    int64_t ctx_overhead;     /* bytes charged per context; -1 = measure automatically */
    unsigned power_exp_milli; /* compute limiter's power correction exponent, thousandths; 0 = off */
    unsigned share_yield_us; /* share mode: GPU work queued at most while borrowing a light neighbour's part; 0 = off */
    int log_level;           /* 0 error, 1 warn (default), 2 info, 3 debug */
    char region_path[4096];  /* shared state file; "" = none configured */
    char ledger_dir[4096];   /* where the per-GPU ledgers are; "" = next to the region */
    char roster_dir[4096];   /* where the node agent's per-GPU rosters are; "" = none */
    char container_name[128]; /* label shown by the node view; "" if unset */
    int any_limit;            /* 1 if any memory or compute limit is set */
};

/* Returns the value of name, or NULL if unset. ctx is passed through untouched. */
typedef const char *(*gs_getenv_fn)(const char *name, void *ctx);

/* Loads configuration from the environment through getenv_fn, including the optional
 * config file named by GPUSLICE_CONFIG. Returns 0 on success. On any invalid value
 * returns -1 and writes one line naming the variable (or file:line) and the value, e.g.
 * "gpuslice: CUDA_DEVICE_MEMORY_LIMIT_1='4GB': ambiguous unit 'GB'; use 'GiB' (2^30) or 'G'".
 * *cfg is written only on success. err is "" on success; it may be NULL if errlen is 0.
 * Indexed variables are probed as NAME_0..NAME_15 only; call gs_config_check_unknown on
 * the real environment to catch misspelt names and bad indexes. */
int gs_config_load(struct gs_config *cfg, gs_getenv_fn getenv_fn, void *ctx, char *err, size_t errlen);

/* Convenience: the process environment (getenv). */
const char *gs_getenv_process(const char *name, void *ctx);

/* The process environment, except that GPUSLICE_CONFIG is ctx (a path):
 * inside a container the node agent set up, its limits file applies
 * whatever the environment says, so a pod spec or a process cannot swap it
 * for a file of its own. */
const char *gs_getenv_pinned_config(const char *name, void *ctx);

/* Scans a NULL-terminated "NAME=value" list (e.g. environ; NULL is an empty list) and
 * fails on names that look like ours but are not known: any name starting with
 * GPUSLICE_ (in any case) that gpuslice does not define, and indexed names with a bad
 * device index (CUDA_DEVICE_MEMORY_LIMIT_99, GPUSLICE_CORES_x, ..._01). Returns 0 if
 * clean, else -1 with a message like
 * "gpuslice: unknown variable GPUSLICE_MEMROY_LIMIT='8GiB'; did you mean GPUSLICE_MEMORY_LIMIT?". */
int gs_config_check_unknown(char **environ_list, char *err, size_t errlen);

#endif
