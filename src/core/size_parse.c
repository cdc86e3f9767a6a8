/* gs_parse_size: strict byte-size parsing. Strict because a value we misread would
 * silently become a different memory limit. */
#include "size_parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "text_escape.h"

/* 2^40 (TiB) has 40 decimal places, so an exact fraction never needs more digits. */
#define GS_FRAC_DIGITS_MAX 40

static int size_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int size_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Binary shift for a unit prefix letter, or -1. */
static int prefix_shift(char c)
{
    switch (lower(c)) {
    case 'k': return 10;
    case 'm': return 20;
    case 'g': return 30;
    case 't': return 40;
    default: return -1;
    }
}

/* Maps the unit text to a shift (0..40). On failure writes the reason. */
static int parse_unit(const char *u, int *shift, char *err, size_t errlen)
{
    size_t n = strlen(u);
    char shown[GS_ESCAPE_BUF];
    int s;

    gs_escape_text(shown, sizeof(shown), u, n, 16);
    if (n == 0) {
        *shift = 0;
        return 0;
    }
    if (n == 1 && u[0] == 'B') {
        *shift = 0;
        return 0;
    }
    if (n == 1 && u[0] == 'b')
        return size_fail(err, errlen, "ambiguous unit 'b' (bits?); use 'B' for bytes");
    s = prefix_shift(u[0]);
    if (s < 0 || n > 3)
        goto unknown;
    if (n == 1) {
        *shift = s;
        return 0;
    }
    if (u[1] == 'b' || u[1] == 'B') {
        if (n != 2)
            goto unknown;
        /* KB/MB/GB/TB read as powers of 1000 to most people; refuse to guess. */
        return size_fail(err, errlen, "ambiguous unit '%s'; use '%ciB' (2^%d) or '%c'", shown, lower(u[0]) - 'a' + 'A',
                         s, lower(u[0]) - 'a' + 'A');
    }
    if (u[1] != 'i' && u[1] != 'I')
        goto unknown;
    if (n == 2 || u[2] == 'B') {
        *shift = s;
        return 0;
    }
    if (u[2] == 'b')
        return size_fail(err, errlen, "ambiguous unit '%s' ('b' means bits); use '%ciB'", shown,
                         lower(u[0]) - 'a' + 'A');
unknown:
    return size_fail(err, errlen, "unknown unit '%s'; use B, K/KiB, M/MiB, G/GiB or T/TiB (powers of 1024)", shown);
}

/* floor(0.digits * 2^shift) into *whole; returns 0 if that is exact, -1 if not. Doubles
 * the decimal fraction digit by digit, so no intermediate can overflow. */
static int frac_bytes(const char *digits, size_t n, int shift, uint64_t *whole)
{
    unsigned char d[GS_FRAC_DIGITS_MAX];
    uint64_t acc = 0;
    size_t i;
    int k;

    while (n > 0 && digits[n - 1] == '0')
        n--;
    if (n > GS_FRAC_DIGITS_MAX)
        return -1;
    for (i = 0; i < n; i++)
        d[i] = (unsigned char)(digits[i] - '0');
    for (k = 0; k < shift; k++) {
        unsigned carry = 0;

        for (i = n; i-- > 0;) {
            unsigned v = d[i] * 2u + carry;
            d[i] = (unsigned char)(v % 10);
            carry = v / 10;
        }
        acc = acc * 2 + carry;
    }
    for (i = 0; i < n; i++)
        if (d[i] != 0)
            return -1;
    *whole = acc;
    return 0;
}

int gs_parse_size(const char *text, uint64_t *out, char *err, size_t errlen)
{
    const char *p = text;
    const char *frac = NULL;
    size_t frac_len = 0;
    uint64_t ip = 0;
    uint64_t fb = 0;
    int shift = 0;

    if (text == NULL || out == NULL)
        return size_fail(err, errlen, "no value");
    if (*text == '\0')
        return size_fail(err, errlen, "empty value");
    if (*text == '+' || *text == '-')
        return size_fail(err, errlen, "sign not allowed");
    for (p = text; *p != '\0'; p++)
        if (*p == ' ' || (*p >= '\t' && *p <= '\r'))
            return size_fail(err, errlen, "whitespace not allowed");
    p = text;
    if (*p < '0' || *p > '9')
        return size_fail(err, errlen, "not a number (expected digits, then an optional unit)");
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned dgt = (unsigned)(*p - '0');

        if (ip > (UINT64_MAX - dgt) / 10)
            return size_fail(err, errlen, "too large (more than 2^64-1 bytes)");
        ip = ip * 10 + dgt;
    }
    if (*p == '.') {
        frac = ++p;
        while (*p >= '0' && *p <= '9')
            p++;
        frac_len = (size_t)(p - frac);
        if (frac_len == 0)
            return size_fail(err, errlen, "missing digits after '.'");
    }
    if (parse_unit(p, &shift, err, errlen) != 0)
        return -1;
    if (frac != NULL && frac_bytes(frac, frac_len, shift, &fb) != 0)
        return size_fail(err, errlen, "fraction is not a whole number of bytes");
    if (shift > 0 && ip > (UINT64_MAX >> shift))
        return size_fail(err, errlen, "too large (more than 2^64-1 bytes)");
    ip <<= shift;
    if (ip > UINT64_MAX - fb)
        return size_fail(err, errlen, "too large (more than 2^64-1 bytes)");
    *out = ip + fb;
    return 0;
}
