/* gs_config_load: merges the config file, HAMi-core's variables and ours.
 * Precedence, lowest first: file (HAMi names, then ours), environment (HAMi names, then
 * ours). Within one source and naming, NAME_<i> beats NAME for device i. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "limiter.h"
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

/* Applies one source in the table's order, so that a later key storing into the same
 * field wins (ours over HAMi-core's). A family's NAME sets every device and NAME_<i>
 * then overrides device i. Every value set is parsed, also one that is overridden. */
static int apply_layer(struct gs_config *cfg, const struct gs_cfg_layer *layer, char *err, size_t errlen)
{
    char why[GS_WHY_MAX];
    size_t i;

    for (i = 0; i < gs_cfg_nkeys; i++) {
        const struct gs_cfg_key *k = &gs_cfg_keys[i];
        char *field = (char *)cfg + k->offset;
        uint64_t all = 0; /* the all-devices value of a family, as its parser stored it */
        int dev;

        if (k->parse == NULL)
            continue; /* GPUSLICE_CONFIG: consumed before the layers are applied */
        if (!k->per_device) {
            if (layer->val[k->slot] != NULL && k->parse(layer->val[k->slot], k, field, why, sizeof(why)) != 0)
                return gs_cfg_fail(err, errlen, layer, k->slot, why);
            continue;
        }
        if (layer->val[k->slot] != NULL && k->parse(layer->val[k->slot], k, &all, why, sizeof(why)) != 0)
            return gs_cfg_fail(err, errlen, layer, k->slot, why);
        for (dev = 0; dev < GS_MAX_DEVICES; dev++) {
            const char *v = layer->val[GS_KEY_DEV(k->slot, dev)];
            char *elem = field + (size_t)dev * k->size;

            if (v != NULL) {
                if (k->parse(v, k, elem, why, sizeof(why)) != 0)
                    return gs_cfg_fail(err, errlen, layer, GS_KEY_DEV(k->slot, dev), why);
            } else if (layer->val[k->slot] != NULL) {
                memcpy(elem, &all, k->size);
            }
        }
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
