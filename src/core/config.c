/* gs_config_load: merges the config file, HAMi-core's variables and ours.
 * Precedence, lowest first: file (HAMi names, then ours), environment (HAMi names, then
 * ours). Within one source and naming, NAME_<i> beats NAME for device i. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
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

/* Each key's default (config_keys.def), stored by its own parser. A default that
 * does not parse is a build mistake; the load fails rather than run without it. */
static int set_defaults(struct gs_config *cfg, char *err, size_t errlen)
{
    char why[256];
    size_t i;

    memset(cfg, 0, sizeof(*cfg));
    for (i = 0; i < gs_cfg_nkeys; i++) {
        const struct gs_cfg_key *k = &gs_cfg_keys[i];

        if (k->dflt != NULL && k->parse(k->dflt, k, (char *)cfg + k->offset, why, sizeof(why)) != 0) {
            if (err != NULL && errlen > 0)
                snprintf(err, errlen, "gpuslice: internal error: the default of %s, '%s', does not parse: %s", k->name,
                         k->dflt, why);
            return -1;
        }
    }
    return 0;
}

/* The slot of layer that decided element dev of the field at offset (-1: none), in the
 * order apply_layer stores: the field's last key in the table wins, and within a
 * family NAME_<dev> beats NAME. */
static int deciding_slot(const struct gs_cfg_layer *layer, size_t offset, int dev)
{
    int found = -1;
    size_t i;

    for (i = 0; i < gs_cfg_nkeys; i++) {
        const struct gs_cfg_key *k = &gs_cfg_keys[i];

        if (k->parse == NULL || k->offset != offset)
            continue;
        if (k->per_device && layer->val[GS_KEY_DEV(k->slot, dev)] != NULL)
            found = GS_KEY_DEV(k->slot, dev);
        else if (layer->val[k->slot] != NULL)
            found = k->slot;
    }
    return found;
}

/* Whether k is the first key of its field, so each field is merged once. */
static int first_of_field(const struct gs_cfg_key *k)
{
    size_t i;

    for (i = 0; &gs_cfg_keys[i] != k; i++)
        if (gs_cfg_keys[i].parse != NULL && gs_cfg_keys[i].offset == k->offset)
            return 0;
    return 1;
}

/* "NAME='value'" of slot in layer, escaped, into buf. */
static void show_setting(const struct gs_cfg_layer *layer, int slot, char *buf, size_t len)
{
    char name[GS_KEY_NAME_MAX];
    char val[GS_ESCAPE_BUF];

    gs_key_name(slot, name, sizeof(name));
    gs_escape_text(val, sizeof(val), layer->val[slot], strlen(layer->val[slot]), GS_ESCAPE_SHOW);
    snprintf(buf, len, "%s='%s'", name, val);
}

/* An environment value above the ceiling the config file sets (file slot fs) or leaves
 * at its default (fs < 0, the default's value at ceiling). */
static int ceiling_fail(char *err, size_t errlen, const struct gs_cfg_layer *env, int es,
                        const struct gs_cfg_layer *file, int fs, const struct gs_cfg_key *k, const void *ceiling)
{
    char envset[GS_KEY_NAME_MAX + GS_ESCAPE_BUF + 4];
    char fileset[GS_KEY_NAME_MAX + GS_ESCAPE_BUF + 4];
    char path[GS_ESCAPE_BUF];
    char name[GS_KEY_NAME_MAX];
    char dflt[64];

    if (err == NULL || errlen == 0)
        return -1;
    show_setting(env, es, envset, sizeof(envset));
    gs_escape_text(path, sizeof(path), file->file, strlen(file->file), GS_ESCAPE_SHOW);
    if (fs >= 0) {
        show_setting(file, fs, fileset, sizeof(fileset));
        snprintf(err, errlen,
                 "gpuslice: %s would raise the limit set by %s:%u: %s (the environment may lower a limit "
                 "of the config file, never raise it)",
                 envset, path, file->line[fs], fileset);
    } else {
        gs_key_name(es, name, sizeof(name));
        k->show(ceiling, dflt, sizeof(dflt));
        snprintf(err, errlen,
                 "gpuslice: %s would raise the limit set by %s, which leaves %s at its default '%s' (the "
                 "environment may lower a limit of the config file, never raise it)",
                 envset, path, name, dflt);
    }
    return -1;
}

/* Puts the environment's values over *out, which holds the defaults and the config
 * file's values (file: that file's layer, or NULL when there is none). Without a file
 * the environment wins; with one, each field follows its key's authority. */
static int merge_env(struct gs_config *out, const struct gs_config *envcfg, const struct gs_cfg_layer *env,
                     const struct gs_cfg_layer *file, char *err, size_t errlen)
{
    size_t i;

    for (i = 0; i < gs_cfg_nkeys; i++) {
        const struct gs_cfg_key *k = &gs_cfg_keys[i];
        int ndev = k->per_device ? GS_MAX_DEVICES : 1;
        int dev;

        if (k->parse == NULL || !first_of_field(k))
            continue;
        for (dev = 0; dev < ndev; dev++) {
            size_t off = k->offset + (size_t)dev * k->size;
            const void *ev = (const char *)envcfg + off;
            void *ov = (char *)out + off;
            int es = deciding_slot(env, k->offset, dev);
            int fs = file != NULL ? deciding_slot(file, k->offset, dev) : -1;

            if (es < 0)
                continue;
            if (file != NULL && k->auth == GS_AUTH_LIMIT && k->rank(ev) > k->rank(ov))
                return ceiling_fail(err, errlen, env, es, file, fs, k, ov);
            if (file != NULL && k->auth == GS_AUTH_NODE && fs >= 0)
                continue; /* the node's setting wins outright */
            memcpy(ov, ev, k->size);
        }
    }
    return 0;
}

int gs_config_load(struct gs_config *cfg, gs_getenv_fn getenv_fn, void *ctx, char *err, size_t errlen)
{
    /* Built in local copies so that *cfg is only written on success. */
    struct gs_config tmp;
    struct gs_config envcfg;
    struct gs_cfg_layer env;
    struct gs_cfg_layer file;
    char name[GS_KEY_NAME_MAX];
    char *filebuf = NULL;
    int have_file;
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
    if (set_defaults(&tmp, err, errlen) != 0 || set_defaults(&envcfg, err, errlen) != 0)
        return -1;
    memset(&env, 0, sizeof(env));
    for (slot = 0; slot < GS_KEY_COUNT; slot++) {
        gs_key_name(slot, name, sizeof(name));
        env.val[slot] = getenv_fn(name, ctx);
    }
    have_file = env.val[GS_KEY_CONFIG] != NULL;
    if (have_file && env.val[GS_KEY_CONFIG][0] == '\0')
        return gs_cfg_fail(err, errlen, &env, GS_KEY_CONFIG, "empty value");
    rc = have_file ? gs_config_file_read(env.val[GS_KEY_CONFIG], &filebuf, &file, err, errlen) : 0;
    if (rc == 0 && have_file)
        rc = apply_layer(&tmp, &file, err, errlen);
    if (rc == 0)
        rc = apply_layer(&envcfg, &env, err, errlen);
    if (rc == 0) /* the file's text must live until here: messages quote it */
        rc = merge_env(&tmp, &envcfg, &env, have_file ? &file : NULL, err, errlen);
    free(filebuf);
    if (rc != 0)
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

const char *gs_getenv_pinned_config(const char *name, void *ctx)
{
    return strcmp(name, "GPUSLICE_CONFIG") == 0 ? (const char *)ctx : getenv(name);
}
