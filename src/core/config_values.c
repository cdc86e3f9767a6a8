/* The value parsers named in config_keys.def: sizes, integers, fractions, keywords,
 * paths and labels, each storing into its key's field. */
#include "config_internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "region_layout.h"
#include "size_parse.h"

/* lo..hi as a decimal integer, no sign or blanks. */
static int parse_uint(const char *v, unsigned lo, unsigned hi, unsigned *out, char *why, size_t whylen)
{
    unsigned long long x = 0;
    const char *p;

    if (*v == '\0') {
        snprintf(why, whylen, "empty value");
        return -1;
    }
    for (p = v; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            snprintf(why, whylen, "not a decimal integer (expected %u..%u)", lo, hi);
            return -1;
        }
        if (x <= hi) /* saturate: anything past hi is out of range anyway */
            x = x * 10 + (unsigned)(*p - '0');
    }
    if (x < lo || x > hi) {
        snprintf(why, whylen, "out of range (expected %u..%u)", lo, hi);
        return -1;
    }
    *out = (unsigned)x;
    return 0;
}

/* Case-insensitive choice among words[0..n-1]; *out is the index. */
static int parse_word(const char *v, const char *const *words, int n, int *out, char *why, size_t whylen)
{
    size_t o = 0;
    int i;

    for (i = 0; i < n; i++) {
        if (strcasecmp(v, words[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    o = (size_t)snprintf(why, whylen, "%s; expected one of:", *v ? "unknown value" : "empty value");
    for (i = 0; i < n && o < whylen; i++)
        o += (size_t)snprintf(why + o, whylen - o, "%s %s", i ? "," : "", words[i]);
    return -1;
}

int gs_cfg_parse_mem_limit(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen)
{
    uint64_t bytes = 0;

    (void)k;
    if (gs_parse_size(v, &bytes, why, whylen) != 0)
        return -1;
    if (bytes == 0) {
        /* HAMi-core reads 0 as "no limit"; a typo must not become unlimited. */
        snprintf(why, whylen, "a memory limit of 0 is not allowed (unset the variable for no limit)");
        return -1;
    }
    if (bytes > GS_REGION_MAX_BYTES) {
        /* the region refuses more as corrupt (gs_region_check) */
        snprintf(why, whylen, "a memory limit past 1024TiB, the most gpuslice accounts, is not allowed");
        return -1;
    }
    memcpy(dst, &bytes, sizeof bytes);
    return 0;
}

int gs_cfg_parse_hami_mem(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen)
{
    uint64_t bytes;
    if (gs_cfg_parse_mem_limit(v, k, &bytes, why, whylen) != 0)
        return -1;
    if (v[strspn(v, "0123456789")] == '\0') {
        snprintf(why, whylen, "a number without a unit is ambiguous here (bytes or MiB?); write %sMiB or %sB", v, v);
        return -1;
    }
    memcpy(dst, &bytes, sizeof bytes);
    return 0;
}

int gs_cfg_parse_hami_sm(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen)
{
    unsigned pct = 0;

    if (parse_uint(v, k->lo, k->hi, &pct, why, whylen) != 0)
        return -1;
    if (pct == 100)
        pct = 0; /* HAMi: 0 and 100 both mean no limit */
    memcpy(dst, &pct, sizeof pct);
    return 0;
}

int gs_cfg_parse_uint(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen)
{
    unsigned u = 0;

    if (parse_uint(v, k->lo, k->hi, &u, why, whylen) != 0)
        return -1;
    memcpy(dst, &u, sizeof u);
    return 0;
}

/* A state path: absolute, so every process of the container finds the same file
 * whatever its working directory; no control characters (a newline would split a
 * line of the agent's files, and such a name is never meant). */
int gs_cfg_parse_path(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen)
{
    size_t n = strlen(v);
    size_t i;

    if (n == 0) {
        snprintf(why, whylen, "empty value");
        return -1;
    }
    if (v[0] != '/') {
        snprintf(why, whylen, "must be an absolute path");
        return -1;
    }
    if (n >= k->size) {
        snprintf(why, whylen, "path longer than %zu bytes", k->size - 1);
        return -1;
    }
    for (i = 0; i < n; i++) {
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) {
            snprintf(why, whylen, "control character in path");
            return -1;
        }
    }
    memcpy(dst, v, n + 1);
    return 0;
}

/* The node view prints this label: printable ASCII only, so it cannot carry escapes. */
int gs_cfg_parse_label(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen)
{
    size_t n = strlen(v);
    size_t i;

    if (n >= k->size) {
        snprintf(why, whylen, "longer than %zu bytes", k->size - 1);
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

/* Word lists in the order of their enums. */
static const char *const gs_policy_words[] = { "default", "force", "disable" };
static const char *const gs_mode_words[] = { "cap", "share" };
static const char *const gs_managed_words[] = { "count", "ignore" };
static const char *const gs_log_words[] = { "error", "warn", "info", "debug" };

static int store_word(const char *v, const char *const *words, int n, void *dst, char *why, size_t whylen)
{
    int w = 0;

    if (parse_word(v, words, n, &w, why, whylen) != 0)
        return -1;
    memcpy(dst, &w, sizeof w); /* an enum is stored as an int (config_keys.c checks the size) */
    return 0;
}

int gs_cfg_parse_core_policy(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen)
{
    (void)k;
    return store_word(v, gs_policy_words, 3, dst, why, whylen);
}

int gs_cfg_parse_compute_mode(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen)
{
    (void)k;
    return store_word(v, gs_mode_words, 2, dst, why, whylen);
}

int gs_cfg_parse_managed(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen)
{
    (void)k;
    return store_word(v, gs_managed_words, 2, dst, why, whylen);
}

int gs_cfg_parse_hami_log(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen)
{
    unsigned u = 0;
    int level;

    if (parse_uint(v, k->lo, k->hi, &u, why, whylen) != 0)
        return -1;
    /* HAMi-core: 0 errors, 1-2 adds warnings and messages, 3 info, 4 debug. */
    level = u == 0 ? 0 : u <= 2 ? 1 : (int)u - 1;
    memcpy(dst, &level, sizeof level);
    return 0;
}

int gs_cfg_parse_log_level(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen)
{
    unsigned u = 0;
    int level;

    if (v[0] >= '0' && v[0] <= '9') {
        if (parse_uint(v, k->lo, k->hi, &u, why, whylen) != 0)
            return -1;
        level = (int)u;
        memcpy(dst, &level, sizeof level);
        return 0;
    }
    return store_word(v, gs_log_words, 4, dst, why, whylen);
}

int gs_cfg_parse_ctx_overhead(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen)
{
    uint64_t bytes = 0;
    int64_t out = -1; /* auto: measured */

    (void)k;
    if (strcasecmp(v, "auto") != 0) {
        if (gs_parse_size(v, &bytes, why, whylen) != 0)
            return -1;
        if (bytes > (uint64_t)INT64_MAX) {
            snprintf(why, whylen, "too large (at most 2^63-1 bytes)");
            return -1;
        }
        out = (int64_t)bytes;
    }
    memcpy(dst, &out, sizeof out);
    return 0;
}

/* A decimal fraction 0..1 with at most 3 decimals ("0.38", ".5", "1"), in thousandths. */
int gs_cfg_parse_milli(const char *v, const struct gs_cfg_key *k, void *dst, char *why, size_t whylen)
{
    unsigned whole = 0, frac = 0, scale = 100, out;
    const char *p = v;

    (void)k;
    if (*p >= '0' && *p <= '9')
        whole = (unsigned)(*p++ - '0');
    else if (*p != '.') {
        snprintf(why, whylen, "not a decimal number between 0 and 1 (e.g. 0.38)");
        return -1;
    }
    if (*p == '.') {
        p++;
        if (*p == '\0') {
            snprintf(why, whylen, "no digits after the decimal point");
            return -1;
        }
        for (; *p >= '0' && *p <= '9'; p++) {
            if (scale == 0) {
                snprintf(why, whylen, "at most 3 decimal places");
                return -1;
            }
            frac += (unsigned)(*p - '0') * scale;
            scale /= 10;
        }
    }
    if (*p != '\0') {
        snprintf(why, whylen, "not a decimal number between 0 and 1 (e.g. 0.38)");
        return -1;
    }
    if (whole > 1 || (whole == 1 && frac > 0)) {
        snprintf(why, whylen, "out of range (expected 0..1)");
        return -1;
    }
    out = whole * 1000 + frac;
    memcpy(dst, &out, sizeof out);
    return 0;
}

/* Ranks and texts of limits, for the ceiling check of gs_config_load. */

uint64_t gs_cfg_rank_mem_limit(const void *elem)
{
    uint64_t v;

    memcpy(&v, elem, sizeof v);
    return v != 0 ? v : UINT64_MAX;
}

uint64_t gs_cfg_rank_uint(const void *elem)
{
    unsigned v;

    memcpy(&v, elem, sizeof v);
    return v != 0 ? v : UINT64_MAX;
}

uint64_t gs_cfg_rank_hami_sm(const void *elem)
{
    return gs_cfg_rank_uint(elem);
}

uint64_t gs_cfg_rank_core_policy(const void *elem)
{
    int w;

    memcpy(&w, elem, sizeof w);
    return w == GS_CORE_POLICY_DISABLE; /* default and force both enforce the limit */
}

uint64_t gs_cfg_rank_managed(const void *elem)
{
    int w;

    memcpy(&w, elem, sizeof w);
    return w == GS_MANAGED_IGNORE;
}

void gs_cfg_show_mem_limit(const void *elem, char *buf, size_t len)
{
    uint64_t v;

    memcpy(&v, elem, sizeof v);
    if (v == 0)
        snprintf(buf, len, "no limit");
    else
        gs_format_size(v, buf, len);
}

void gs_cfg_show_uint(const void *elem, char *buf, size_t len)
{
    unsigned v;

    memcpy(&v, elem, sizeof v);
    if (v == 0)
        snprintf(buf, len, "no limit");
    else
        snprintf(buf, len, "%u", v);
}

void gs_cfg_show_hami_sm(const void *elem, char *buf, size_t len)
{
    gs_cfg_show_uint(elem, buf, len);
}

static void show_word(const void *elem, const char *const *words, int n, char *buf, size_t len)
{
    int w;

    memcpy(&w, elem, sizeof w);
    snprintf(buf, len, "%s", w >= 0 && w < n ? words[w] : "?");
}

void gs_cfg_show_core_policy(const void *elem, char *buf, size_t len)
{
    show_word(elem, gs_policy_words, 3, buf, len);
}

void gs_cfg_show_managed(const void *elem, char *buf, size_t len)
{
    show_word(elem, gs_managed_words, 2, buf, len);
}
