/* gs_config_load: merges the config file, HAMi-core's variables and ours.
 * Precedence, lowest first: file (HAMi names, then ours), environment (HAMi names, then
 * ours). Within one source and naming, NAME_<i> beats NAME for device i. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"
#include "limiter.h"
#include "size_parse.h"
#include "text_escape.h"

#define GS_WHY_MAX 256

int gs_cfg_fail(char *err, size_t errlen, const struct gs_cfg_layer *layer, int slot, const char *reason)
{
    char name[GS_KEY_NAME_MAX];
    char val[GS_ESCAPE_BUF];
    char file[GS_ESCAPE_BUF];
    const char *v = layer->val[slot] ? layer->val[slot] : "";

    if (err == NULL || errlen == 0)
        return -1;
    gs_key_name(slot, name, sizeof(name));
    gs_escape_text(val, sizeof(val), v, strlen(v), GS_ESCAPE_SHOW);
    if (layer->file != NULL) {
        gs_escape_text(file, sizeof(file), layer->file, strlen(layer->file), GS_ESCAPE_SHOW);
        snprintf(err, errlen, "gpuslice: %s:%u: %s='%s': %s", file, layer->line[slot], name, val, reason);
    } else {
        snprintf(err, errlen, "gpuslice: %s='%s': %s", name, val, reason);
    }
    return -1;
}

/* Parses one per-device value into *out (bytes or percent); 0 or -1 with why. */
static int parse_dev_value(int fam, const char *v, uint64_t *out, char *why, size_t whylen)
{
    unsigned pct = 0;

    switch (fam) {
    case GS_FAM_HAMI_MEM:
    case GS_FAM_OUR_MEM:
        if (gs_parse_size(v, out, why, whylen) != 0)
            return -1;
        if (*out == 0) {
            /* HAMi-core reads 0 as "no limit"; a typo must not become unlimited. */
            snprintf(why, whylen, "a memory limit of 0 is not allowed (unset the variable for no limit)");
            return -1;
        }
        return 0;
    case GS_FAM_HAMI_SM:
        if (gs_cfg_parse_uint(v, 0, 100, &pct, why, whylen) != 0)
            return -1;
        *out = (pct == 100) ? 0 : pct; /* HAMi: 0 and 100 both mean no limit */
        return 0;
    default:
        if (gs_cfg_parse_uint(v, 1, 100, &pct, why, whylen) != 0)
            return -1;
        *out = pct;
        return 0;
    }
}

/* Applies family fam of layer: NAME sets every device, NAME_<i> overrides device i. */
static int apply_family(struct gs_config *cfg, const struct gs_cfg_layer *layer, int fam, char *err,
                        size_t errlen)
{
    char why[GS_WHY_MAX];
    uint64_t all = 0;
    int have_all = 0;
    int dev;

    if (layer->val[GS_KEY_FAM(fam, -1)] != NULL) {
        if (parse_dev_value(fam, layer->val[GS_KEY_FAM(fam, -1)], &all, why, sizeof(why)) != 0)
            return gs_cfg_fail(err, errlen, layer, GS_KEY_FAM(fam, -1), why);
        have_all = 1;
    }
    for (dev = 0; dev < GS_MAX_DEVICES; dev++) {
        const char *v = layer->val[GS_KEY_FAM(fam, dev)];
        uint64_t x = all;

        if (v != NULL && parse_dev_value(fam, v, &x, why, sizeof(why)) != 0)
            return gs_cfg_fail(err, errlen, layer, GS_KEY_FAM(fam, dev), why);
        if (v == NULL && !have_all)
            continue;
        if (fam == GS_FAM_HAMI_MEM || fam == GS_FAM_OUR_MEM)
            cfg->mem_limit[dev] = x;
        else
            cfg->sm_limit[dev] = (unsigned)x;
    }
    return 0;
}

/* A state-file path: absolute, so every process of the container finds the same file
 * whatever its working directory. */
static int parse_path(const char *v, char *dst, size_t dstlen, char *why, size_t whylen)
{
    size_t n = strlen(v);

    if (n == 0)
        snprintf(why, whylen, "empty value");
    else if (v[0] != '/')
        snprintf(why, whylen, "must be an absolute path");
    else if (n >= dstlen)
        snprintf(why, whylen, "path longer than %zu bytes", dstlen - 1);
    else {
        memcpy(dst, v, n + 1);
        return 0;
    }
    return -1;
}

/* The node view prints this label: printable ASCII only, so it cannot carry escapes. */
static int parse_label(const char *v, char *dst, size_t dstlen, char *why, size_t whylen)
{
    size_t n = strlen(v);
    size_t i;

    if (n >= dstlen) {
        snprintf(why, whylen, "longer than %zu bytes", dstlen - 1);
        return -1;
    }
    for (i = 0; i < n; i++) {
        if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e) {
            snprintf(why, whylen, "only printable ASCII is allowed");
            return -1;
        }
    }
    memcpy(dst, v, n + 1);
    return 0;
}

static const char *const gs_policy_words[] = { "default", "force", "disable" };
static const char *const gs_mode_words[] = { "cap", "share" };
static const char *const gs_managed_words[] = { "count", "ignore" };
static const char *const gs_log_words[] = { "error", "warn", "info", "debug" };

/* Parses and stores the value of one non-device slot. */
static int apply_scalar(struct gs_config *cfg, int slot, const char *v, char *why, size_t whylen)
{
    unsigned u = 0;
    int w = 0;
    uint64_t bytes = 0;

    switch (slot) {
    case GS_KEY_HAMI_CACHE:
    case GS_KEY_REGION:
        return parse_path(v, cfg->region_path, sizeof(cfg->region_path), why, whylen);
    case GS_KEY_HAMI_POLICY:
        if (gs_cfg_parse_word(v, gs_policy_words, 3, &w, why, whylen) != 0)
            return -1;
        cfg->core_policy = (enum gs_core_policy)w;
        return 0;
    case GS_KEY_HAMI_LOG:
        /* HAMi-core: 0 errors, 1-2 adds warnings and messages, 3 info, 4 debug. */
        if (gs_cfg_parse_uint(v, 0, 4, &u, why, whylen) != 0)
            return -1;
        cfg->log_level = u == 0 ? 0 : u <= 2 ? 1 : (int)u - 1;
        return 0;
    case GS_KEY_MODE:
        if (gs_cfg_parse_word(v, gs_mode_words, 2, &w, why, whylen) != 0)
            return -1;
        cfg->compute_mode = (enum gs_compute_mode)w;
        return 0;
    case GS_KEY_WEIGHT:
        if (gs_cfg_parse_uint(v, 1, 10000, &u, why, whylen) != 0)
            return -1;
        cfg->share_weight = u;
        return 0;
    case GS_KEY_MANAGED:
        if (gs_cfg_parse_word(v, gs_managed_words, 2, &w, why, whylen) != 0)
            return -1;
        cfg->managed_policy = (enum gs_managed_policy)w;
        return 0;
    case GS_KEY_CTX_OVERHEAD:
        if (strcasecmp(v, "auto") == 0) {
            cfg->ctx_overhead = -1;
            return 0;
        }
        if (gs_parse_size(v, &bytes, why, whylen) != 0)
            return -1;
        if (bytes > (uint64_t)INT64_MAX) {
            snprintf(why, whylen, "too large (at most 2^63-1 bytes)");
            return -1;
        }
        cfg->ctx_overhead = (int64_t)bytes;
        return 0;
    case GS_KEY_LOG:
        if (v[0] >= '0' && v[0] <= '9') {
            if (gs_cfg_parse_uint(v, 0, 3, &u, why, whylen) != 0)
                return -1;
            cfg->log_level = (int)u;
            return 0;
        }
        if (gs_cfg_parse_word(v, gs_log_words, 4, &w, why, whylen) != 0)
            return -1;
        cfg->log_level = w;
        return 0;
    case GS_KEY_POWER_EXP:
        return gs_cfg_parse_milli(v, &cfg->power_exp_milli, why, whylen);
    case GS_KEY_CONTAINER:
        return parse_label(v, cfg->container_name, sizeof(cfg->container_name), why, whylen);
    default:
        return 0; /* GPUSLICE_CONFIG: consumed before the layers are applied */
    }
}

/* Applies one source. HAMi's names go first so that ours, applied after, win. */
static int apply_layer(struct gs_config *cfg, const struct gs_cfg_layer *layer, char *err, size_t errlen)
{
    static const int fams[] = { GS_FAM_HAMI_MEM, GS_FAM_HAMI_SM, GS_FAM_OUR_MEM, GS_FAM_OUR_CORES };
    char why[GS_WHY_MAX];
    size_t i;
    int slot;

    for (i = 0; i < sizeof(fams) / sizeof(fams[0]); i++)
        if (apply_family(cfg, layer, fams[i], err, errlen) != 0)
            return -1;
    /* Scalar slots are numbered HAMi first, ours after, which is the order we want. */
    for (slot = GS_KEY_HAMI_CACHE; slot < GS_KEY_COUNT; slot++) {
        if (layer->val[slot] == NULL)
            continue;
        if (apply_scalar(cfg, slot, layer->val[slot], why, sizeof(why)) != 0)
            return gs_cfg_fail(err, errlen, layer, slot, why);
    }
    return 0;
}

static void set_defaults(struct gs_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->compute_mode = GS_COMPUTE_CAP;
    cfg->share_weight = 100;
    cfg->core_policy = GS_CORE_POLICY_DEFAULT;
    cfg->managed_policy = GS_MANAGED_COUNT;
    cfg->ctx_overhead = -1;
    cfg->log_level = 1;
    cfg->power_exp_milli = GS_LIM_DEFAULT_POWER_EXP;
}

int gs_config_load(struct gs_config *cfg, gs_getenv_fn getenv_fn, void *ctx, char *err, size_t errlen)
{
    /* Built in a local copy so that *cfg is only written on success. */
    struct gs_config tmp;
    struct gs_cfg_layer env;
    struct gs_cfg_layer file;
    char name[GS_KEY_NAME_MAX];
    char *filebuf = NULL;
    int slot;
    int i;
    int rc;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (cfg == NULL || getenv_fn == NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "gpuslice: internal error: gs_config_load called without %s",
                     cfg == NULL ? "a config" : "a getenv function");
        return -1;
    }
    set_defaults(&tmp);
    memset(&env, 0, sizeof(env));
    for (slot = 0; slot < GS_KEY_COUNT; slot++) {
        gs_key_name(slot, name, sizeof(name));
        env.val[slot] = getenv_fn(name, ctx);
    }
    if (env.val[GS_KEY_CONFIG] != NULL) {
        if (env.val[GS_KEY_CONFIG][0] == '\0')
            return gs_cfg_fail(err, errlen, &env, GS_KEY_CONFIG, "empty value");
        rc = gs_config_file_read(env.val[GS_KEY_CONFIG], &filebuf, &file, err, errlen);
        if (rc == 0)
            rc = apply_layer(&tmp, &file, err, errlen);
        free(filebuf);
        if (rc != 0)
            return -1;
    }
    if (apply_layer(&tmp, &env, err, errlen) != 0)
        return -1;
    for (i = 0; i < GS_MAX_DEVICES; i++)
        if (tmp.mem_limit[i] != 0 || tmp.sm_limit[i] != 0)
            tmp.any_limit = 1;
    *cfg = tmp;
    return 0;
}

const char *gs_getenv_process(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}
