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
int gs_config_file_read(const char *path, char **buf_out, struct gs_cfg_layer *layer, char *err,
                        size_t errlen);

/* Writes "gpuslice: [file:line: ]NAME='value': <reason>" for slot of layer; returns -1. */
int gs_cfg_fail(char *err, size_t errlen, const struct gs_cfg_layer *layer, int slot, const char *reason);

/* Value parsers: return 0, or -1 with a reason (not naming the value) in why. */
int gs_cfg_parse_uint(const char *v, unsigned min, unsigned max, unsigned *out, char *why, size_t whylen);
/* A decimal fraction 0..1 with at most 3 decimals ("0.38", ".5", "1"), in thousandths. */
int gs_cfg_parse_milli(const char *v, unsigned *out, char *why, size_t whylen);
/* Case-insensitive choice among words[0..n-1]; *out is the index. */
int gs_cfg_parse_word(const char *v, const char *const *words, int n, int *out, char *why, size_t whylen);

/* Suggests the known name closest to name (edit distance <= 2) or returns NULL. */
const char *gs_cfg_suggest(const char *name, size_t len, char *buf, size_t buflen);

#endif
