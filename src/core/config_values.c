/* Parsers for the non-size configuration values: small integers, fractions and keywords. */
#include "config_internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int gs_cfg_parse_uint(const char *v, unsigned min, unsigned max, unsigned *out, char *why, size_t whylen)
{
    unsigned long long x = 0;
    const char *p;

    if (*v == '\0') {
        snprintf(why, whylen, "empty value");
        return -1;
    }
    for (p = v; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            snprintf(why, whylen, "not a decimal integer (expected %u..%u)", min, max);
            return -1;
        }
        if (x <= max) /* saturate: anything past max is out of range anyway */
            x = x * 10 + (unsigned)(*p - '0');
    }
    if (x < min || x > max) {
        snprintf(why, whylen, "out of range (expected %u..%u)", min, max);
        return -1;
    }
    *out = (unsigned)x;
    return 0;
}

int gs_cfg_parse_milli(const char *v, unsigned *out, char *why, size_t whylen)
{
    unsigned whole = 0, frac = 0, scale = 100;
    const char *p = v;

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
    *out = whole * 1000 + frac;
    return 0;
}

int gs_cfg_parse_word(const char *v, const char *const *words, int n, int *out, char *why, size_t whylen)
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
