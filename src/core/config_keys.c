/* Name <-> slot mapping for configuration variables. */
#include "config_keys.h"

#include <string.h>

static const char *const gs_family_names[GS_FAM_COUNT] = {
    "CUDA_DEVICE_MEMORY_LIMIT",
    "CUDA_DEVICE_SM_LIMIT",
    "GPUSLICE_MEMORY_LIMIT",
    "GPUSLICE_CORES",
};

static const char *const gs_scalar_names[GS_KEY_COUNT - GS_KEY_HAMI_CACHE] = {
    "CUDA_DEVICE_MEMORY_SHARED_CACHE",
    "GPU_CORE_UTILIZATION_POLICY",
    "LIBCUDA_LOG_LEVEL",
    "GPUSLICE_COMPUTE_MODE",
    "GPUSLICE_SHARE_WEIGHT",
    "GPUSLICE_REGION",
    "GPUSLICE_MANAGED",
    "GPUSLICE_CTX_OVERHEAD",
    "GPUSLICE_LOG_LEVEL",
    "GPUSLICE_CONTAINER",
    "GPUSLICE_POWER_EXPONENT",
    "GPUSLICE_CONFIG",
};

/* Add GPUSLICE_* variables of other components here (not configuration, but legal). */
const char *const gs_key_other_names[] = {
    "GPUSLICE_STATE_DIR",         /* gpuslice CLI: where regions live */
    "GPUSLICE_LIB",               /* gpuslice CLI: interposer to preload */
    "GPUSLICE_SIM_STATE",         /* simulated driver (tests/simdriver) */
    "GPUSLICE_SIM_DEVICES",
    "GPUSLICE_SIM_MEM",
    "GPUSLICE_SIM_CTX_OVERHEAD",
    "GPUSLICE_SIM_POWER_DYN",
    "GPUSLICE_SIM_SWITCH_LOSS",
    NULL,
};

/* Copies src plus an optional "_<dev>" into buf, truncating to len. snprintf would do,
 * but gs_config_load builds every name on each call and this keeps that cheap. */
static void put_name(char *buf, size_t len, const char *src, int dev)
{
    char tmp[GS_KEY_NAME_MAX];
    size_t n = strlen(src);

    if (n > sizeof tmp - 4) /* room for "_15" and the terminator */
        n = sizeof tmp - 4;
    memcpy(tmp, src, n); /* NOLINT(bugprone-not-null-terminated-result): terminated below, in buf */
    if (dev >= 0) {
        tmp[n++] = '_';
        if (dev >= 10)
            tmp[n++] = (char)('0' + dev / 10);
        tmp[n++] = (char)('0' + dev % 10);
    }
    if (n >= len)
        n = len - 1;
    memcpy(buf, tmp, n);
    buf[n] = '\0';
}

void gs_key_name(int slot, char *buf, size_t len)
{
    if (len == 0)
        return;
    if (slot >= GS_KEY_HAMI_CACHE && slot < GS_KEY_COUNT)
        put_name(buf, len, gs_scalar_names[slot - GS_KEY_HAMI_CACHE], -1);
    else if (slot >= 0 && slot < GS_KEY_HAMI_CACHE)
        put_name(buf, len, gs_family_names[slot / GS_FAM_SLOTS], slot % GS_FAM_SLOTS - 1);
    else
        buf[0] = '\0';
}

/* Device index from a suffix: "0".."15", no sign or leading zero; -1 if not one. */
static int parse_index(const char *s, size_t n)
{
    int v = 0;
    size_t i;

    if (n == 0 || n > 2 || (n == 2 && s[0] == '0'))
        return -1;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v < GS_MAX_DEVICES ? v : -1;
}

int gs_key_lookup(const char *name, size_t len)
{
    int i;

    for (i = 0; i < GS_KEY_COUNT - GS_KEY_HAMI_CACHE; i++)
        if (strlen(gs_scalar_names[i]) == len && memcmp(gs_scalar_names[i], name, len) == 0)
            return GS_KEY_HAMI_CACHE + i;
    for (i = 0; i < GS_FAM_COUNT; i++) {
        size_t bl = strlen(gs_family_names[i]);
        int dev;

        if (len < bl || memcmp(gs_family_names[i], name, bl) != 0)
            continue;
        if (len == bl)
            return GS_KEY_FAM(i, -1);
        if (name[bl] != '_')
            continue; /* e.g. GPUSLICE_CORESX: not this family */
        dev = parse_index(name + bl + 1, len - bl - 1);
        return dev < 0 ? GS_KEY_BAD_INDEX : GS_KEY_FAM(i, dev);
    }
    return GS_KEY_UNKNOWN;
}
