/* The configuration keys, generated from config_keys.def. Every name maps to a slot
 * number so that the environment and the config file can be held side by side in the
 * same shape; a per-device family takes 1 + GS_MAX_DEVICES slots (NAME, NAME_0..15). */
#ifndef GPUSLICE_CONFIG_KEYS_H
#define GPUSLICE_CONFIG_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

enum gs_key_slot {
#define GS_DEVICE_KEY(id, name, parser, lo, hi, field, auth, owner)                                                    \
    GS_KEY_##id, GS_KEY_##id##_LAST = GS_KEY_##id + GS_MAX_DEVICES,
#define GS_KEY(id, name, parser, lo, hi, field, auth, dflt, owner) GS_KEY_##id,
#define GS_CONFIG_KEY(id, name, owner) GS_KEY_##id,
#include "config_keys.def"
    GS_KEY_COUNT
};

/* Slot of device dev's name in the family whose all-devices slot is slot. */
#define GS_KEY_DEV(slot, dev) ((slot) + 1 + (dev))

#define GS_KEY_UNKNOWN (-1)   /* not a configuration name */
#define GS_KEY_BAD_INDEX (-2) /* a per-device family with a bad _<i> suffix */

/* Longest name in the table plus "_15" and NUL, rounded up. */
#define GS_KEY_NAME_MAX 48

struct gs_cfg_key;

/* Who has the last word over a field when a config file is in use (config_keys.def). */
enum gs_cfg_auth { GS_AUTH_LIMIT = 0, GS_AUTH_NODE, GS_AUTH_ENV };

/* How loose a stored limit is (higher: the tenant may use more; UINT64_MAX: no limit),
 * and the same value as text for a message. */
typedef uint64_t (*gs_cfg_rank_fn)(const void *elem);
typedef void (*gs_cfg_show_fn)(const void *elem, char *buf, size_t len);

/* Parses v and stores it at dst (the key's field, or one element of it); 0, or -1 with
 * a reason (not naming the value) in why. */
typedef int (*gs_cfg_parse_fn)(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);

struct gs_cfg_key {
    const char *name;
    int slot;              /* the key's slot; a family's all-devices slot */
    int per_device;        /* 1: a family of 1 + GS_MAX_DEVICES slots */
    gs_cfg_parse_fn parse; /* NULL: stores nothing (GPUSLICE_CONFIG) */
    unsigned lo, hi;       /* the parser's bounds, where it takes any */
    size_t offset;         /* of the field in struct gs_config */
    size_t size;           /* of the field, or of one element of a per-device field */
    enum gs_cfg_auth auth;
    gs_cfg_rank_fn rank; /* GS_AUTH_LIMIT only, else NULL */
    gs_cfg_show_fn show; /* GS_AUTH_LIMIT only, else NULL */
    const char *dflt;    /* the default as typed, stored by parse first; NULL: none (zero) */
};

/* Every configuration key, in the table's order (the order of precedence within one
 * source); gs_cfg_nkeys entries. */
extern const struct gs_cfg_key gs_cfg_keys[];
extern const size_t gs_cfg_nkeys;

/* Other programs' GPUSLICE_* variables: legal in the environment, not configuration. */
struct gs_cfg_other_key {
    const char *name;
    const char *owner;
};
extern const struct gs_cfg_other_key gs_cfg_other_keys[]; /* ends with { NULL, NULL } */

/* The key holding slot, and the device the slot names (-1: all devices or a scalar);
 * NULL for a slot out of range. */
const struct gs_cfg_key *gs_key_of_slot(int slot, int *dev);

/* The default of slot's key as a user would type it (config_keys.def), or NULL. */
const char *gs_key_default(int slot);

/* Writes the name of slot into buf (at least GS_KEY_NAME_MAX bytes). */
void gs_key_name(int slot, char *buf, size_t len);

/* Looks up the first len bytes of name: a slot, GS_KEY_UNKNOWN or GS_KEY_BAD_INDEX. */
int gs_key_lookup(const char *name, size_t len);

/* 1 if the first len bytes of name are another program's variable (gs_cfg_other_keys). */
int gs_key_is_other(const char *name, size_t len);

#endif
