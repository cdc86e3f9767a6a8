/* The key table (config_keys.def) expanded, and name <-> slot mapping. */
#include "config_keys.h"

#include <stdint.h>
#include <string.h>

#include "config_internal.h"
#include "limiter.h"

#define GS_FIELD_SIZE(field) sizeof(((struct gs_config *)0)->field)
#define GS_ELEM_SIZE(field) sizeof(((struct gs_config *)0)->field[0])

/* Each parser stores one type; a key pointing a parser at a field of another size is
 * a compile error, not a memory overwrite. */
#define GS_DEVICE_KEY(id, name, parser, lo, hi, field, auth, owner)                                                    \
    _Static_assert(GS_ELEM_SIZE(field) == GS_CFG_STORES_##parser, name ": field does not fit the parser");             \
    _Static_assert(GS_FIELD_SIZE(field) == GS_MAX_DEVICES * GS_ELEM_SIZE(field), name ": not per device");
#define GS_KEY(id, name, parser, lo, hi, field, auth, dflt, owner)                                                     \
    _Static_assert(GS_CFG_STORES_##parser == 0 || GS_FIELD_SIZE(field) == GS_CFG_STORES_##parser,                      \
                   name ": field does not fit the parser");
#include "config_keys.def"

/* A limit is compared by its parser's rank and shown by its show function; other
 * authorities need neither. */
#define GS_CFG_ORDER_LIMIT(parser) gs_cfg_rank_##parser, gs_cfg_show_##parser
#define GS_CFG_ORDER_NODE(parser) NULL, NULL
#define GS_CFG_ORDER_ENV(parser) NULL, NULL

const struct gs_cfg_key gs_cfg_keys[] = {
#define GS_DEVICE_KEY(id, name, parser, lo, hi, field, auth, owner)                                                    \
    { name,                                                                                                            \
      GS_KEY_##id,                                                                                                     \
      1,                                                                                                               \
      gs_cfg_parse_##parser,                                                                                           \
      lo,                                                                                                              \
      hi,                                                                                                              \
      offsetof(struct gs_config, field),                                                                               \
      GS_ELEM_SIZE(field),                                                                                             \
      GS_AUTH_##auth,                                                                                                  \
      GS_CFG_ORDER_##auth(parser),                                                                                     \
      NULL },
#define GS_KEY(id, name, parser, lo, hi, field, auth, dflt, owner)                                                     \
    { name,                                                                                                            \
      GS_KEY_##id,                                                                                                     \
      0,                                                                                                               \
      gs_cfg_parse_##parser,                                                                                           \
      lo,                                                                                                              \
      hi,                                                                                                              \
      offsetof(struct gs_config, field),                                                                               \
      GS_FIELD_SIZE(field),                                                                                            \
      GS_AUTH_##auth,                                                                                                  \
      GS_CFG_ORDER_##auth(parser),                                                                                     \
      dflt },
#define GS_CONFIG_KEY(id, name, owner) { name, GS_KEY_##id, 0, NULL, 0, 0, 0, 0, GS_AUTH_ENV, NULL, NULL, NULL },
#include "config_keys.def"
};
const size_t gs_cfg_nkeys = sizeof(gs_cfg_keys) / sizeof(gs_cfg_keys[0]);

const struct gs_cfg_other_key gs_cfg_other_keys[] = {
#define GS_OTHER_KEY(name, owner) { name, owner },
#include "config_keys.def"
    { NULL, NULL },
};

const struct gs_cfg_key *gs_key_of_slot(int slot, int *dev)
{
    size_t i;

    for (i = 0; i < gs_cfg_nkeys; i++) {
        const struct gs_cfg_key *k = &gs_cfg_keys[i];
        int last = k->slot + (k->per_device ? GS_MAX_DEVICES : 0);

        if (slot >= k->slot && slot <= last) {
            *dev = slot - k->slot - 1;
            return k;
        }
    }
    *dev = -1;
    return NULL;
}

const char *gs_key_default(int slot)
{
    int dev;
    const struct gs_cfg_key *k = gs_key_of_slot(slot, &dev);

    return k != NULL ? k->dflt : NULL;
}

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
    int dev = -1;
    const struct gs_cfg_key *k = gs_key_of_slot(slot, &dev);

    if (len == 0)
        return;
    if (k == NULL)
        buf[0] = '\0';
    else
        put_name(buf, len, k->name, dev);
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
    size_t i;

    for (i = 0; i < gs_cfg_nkeys; i++)
        if (strlen(gs_cfg_keys[i].name) == len && memcmp(gs_cfg_keys[i].name, name, len) == 0)
            return gs_cfg_keys[i].slot;
    for (i = 0; i < gs_cfg_nkeys; i++) {
        const struct gs_cfg_key *k = &gs_cfg_keys[i];
        size_t bl = strlen(k->name);
        int dev;

        /* NAME_<suffix>; GPUSLICE_CORESX is not this family. */
        if (!k->per_device || len <= bl || memcmp(k->name, name, bl) != 0 || name[bl] != '_')
            continue;
        dev = parse_index(name + bl + 1, len - bl - 1);
        return dev < 0 ? GS_KEY_BAD_INDEX : GS_KEY_DEV(k->slot, dev);
    }
    return GS_KEY_UNKNOWN;
}

int gs_key_is_other(const char *name, size_t len)
{
    size_t i;

    for (i = 0; gs_cfg_other_keys[i].name != NULL; i++)
        if (strlen(gs_cfg_other_keys[i].name) == len && memcmp(gs_cfg_other_keys[i].name, name, len) == 0)
            return 1;
    return 0;
}
