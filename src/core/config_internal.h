/* Shared between the config loader's files; not part of the public API. */
#ifndef GPUSLICE_CONFIG_INTERNAL_H
#define GPUSLICE_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "config_keys.h"

/* One source of settings (the environment or the config file), indexed by slot. */
struct gs_cfg_layer {
    const char *val[GS_KEY_COUNT]; /* NULL = not set in this source */
    unsigned line[GS_KEY_COUNT];   /* file line of each value; 0 for the environment */
    const char *file;              /* file name, or NULL for the environment */
};

/* Config files are small; anything bigger is a mistake (or not a config file). */
#define GS_CONFIG_FILE_MAX 65536
#define GS_CONFIG_LINE_MAX 8192

/* Reads and parses the config file at path into layer, whose values then point into
 * *buf_out (free() it when done, also on failure). Returns 0 or -1 with a message. */
int gs_config_file_read(const char *path, char **buf_out, struct gs_cfg_layer *layer, char *err, size_t errlen);

/* Writes "gpuslice: [file:line: ]NAME='value': <reason>" for slot of layer; returns -1. */
int gs_cfg_fail(char *err, size_t errlen, const struct gs_cfg_layer *layer, int slot, const char *reason);

/* The parsers named in config_keys.def (gs_cfg_parse_fn), each with the size of what it
 * stores (GS_CFG_STORES_<parser>; 0 for a string that fills the field, whatever its size).
 * None of them names the value in why: the caller does. */
#define GS_CFG_STORES_mem_limit sizeof(uint64_t)       /* size > 0 */
#define GS_CFG_STORES_hami_sm sizeof(unsigned)         /* lo..hi percent; 100 = no limit (0) */
#define GS_CFG_STORES_hami_mem GS_CFG_STORES_mem_limit /* as mem_limit, with a unit */
#define GS_CFG_STORES_uint sizeof(unsigned)            /* lo..hi */
#define GS_CFG_STORES_path 0                           /* absolute, no control characters */
#define GS_CFG_STORES_label 0                          /* printable ASCII, may be empty */
#define GS_CFG_STORES_core_policy sizeof(enum gs_core_policy)
#define GS_CFG_STORES_compute_mode sizeof(enum gs_compute_mode)
#define GS_CFG_STORES_managed sizeof(enum gs_managed_policy)
#define GS_CFG_STORES_hami_log sizeof(int)         /* HAMi-core's lo..hi, as gpuslice's level */
#define GS_CFG_STORES_log_level sizeof(int)        /* a word, or lo..hi */
#define GS_CFG_STORES_ctx_overhead sizeof(int64_t) /* a size, or auto (-1) */
#define GS_CFG_STORES_milli sizeof(unsigned)       /* 0..1, at most 3 decimals, in thousandths */
int gs_cfg_parse_mem_limit(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);
int gs_cfg_parse_hami_sm(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);
/* HAMi-core's memory variable: a size as mem_limit, but a number without a
 * unit is refused (read as bytes by some tools and MiB by others: "4" must
 * not become a 4-byte or a 4 MiB limit by guess). Stored, compared and
 * shown as mem_limit. */
int gs_cfg_parse_hami_mem(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);
#define gs_cfg_rank_hami_mem gs_cfg_rank_mem_limit
#define gs_cfg_show_hami_mem gs_cfg_show_mem_limit
int gs_cfg_parse_uint(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);
int gs_cfg_parse_path(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);
int gs_cfg_parse_label(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);
int gs_cfg_parse_core_policy(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);
int gs_cfg_parse_compute_mode(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);
int gs_cfg_parse_managed(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);
int gs_cfg_parse_hami_log(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);
int gs_cfg_parse_log_level(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);
int gs_cfg_parse_ctx_overhead(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);
int gs_cfg_parse_milli(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen);

/* The order of the parsers whose keys are limits (GS_AUTH_LIMIT): gs_cfg_rank_fn and
 * gs_cfg_show_fn over what the parser stores. */
uint64_t gs_cfg_rank_mem_limit(const void *elem);   /* 0: no limit */
uint64_t gs_cfg_rank_hami_sm(const void *elem);     /* 0: no limit */
uint64_t gs_cfg_rank_uint(const void *elem);        /* 0: no limit */
uint64_t gs_cfg_rank_core_policy(const void *elem); /* disable is looser than default and force */
uint64_t gs_cfg_rank_managed(const void *elem);     /* ignore is looser than count */
void gs_cfg_show_mem_limit(const void *elem, char *buf, size_t len);
void gs_cfg_show_hami_sm(const void *elem, char *buf, size_t len);
void gs_cfg_show_uint(const void *elem, char *buf, size_t len);
void gs_cfg_show_core_policy(const void *elem, char *buf, size_t len);
void gs_cfg_show_managed(const void *elem, char *buf, size_t len);

/* Suggests the known name closest to name (edit distance <= 2) or returns NULL. */
const char *gs_cfg_suggest(const char *name, size_t len, char *buf, size_t buflen);

#endif
