/* Quantity parsing: the API server re-serialises quantities in canonical form
 * (10000 comes back as "10k"), so plain integers are not enough. */
#include "quantity.h"

#include <stdio.h>
#include <string.h>

#define QMAX ((int64_t)1 << 53) /* far above any GPU count, MiB or percent */

static int suffix(const char *s, int64_t *mul, int *milli)
{
    static const struct {
        const char *s;
        int64_t mul;
    } tab[] = { { "", 1 },      { "k", 1000 },     { "M", 1000000 },  { "G", 1000000000 },       { "T", 1000000000000 },
                { "Ki", 1024 }, { "Mi", 1 << 20 }, { "Gi", 1 << 30 }, { "Ti", (int64_t)1 << 40 } };
    *milli = 0;
    if (strcmp(s, "m") == 0) {
        *mul = 1;
        *milli = 1;
        return 0;
    }
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(s, tab[i].s) == 0) {
            *mul = tab[i].mul;
            return 0;
        }
    return -1;
}

int gs_quantity_int(const char *s, int64_t *out, char *err, size_t errlen)
{
    if (!s || !*s || strlen(s) > 40) {
        snprintf(err, errlen, "empty or overlong quantity");
        return -1;
    }
    const char *p = s;
    if (*p == '+')
        p++;
    if (*p == '-') {
        snprintf(err, errlen, "quantity \"%s\" is negative", s);
        return -1;
    }
    int64_t v = 0, frac = 0, fracdiv = 1;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (v > QMAX) {
            snprintf(err, errlen, "quantity \"%s\" is too large", s);
            return -1;
        }
        v = v * 10 + (*p - '0');
    }
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
            if (fracdiv < 1000000000) {
                frac = frac * 10 + (*p - '0');
                fracdiv *= 10;
            } else if (*p != '0') {
                snprintf(err, errlen, "quantity \"%s\" has too many decimals", s);
                return -1;
            }
        }
    }
    if (digits == 0) {
        snprintf(err, errlen, "quantity \"%s\" has no digits", s);
        return -1;
    }
    int64_t mul = 1;
    int milli = 0;
    if (*p == 'e' || *p == 'E') {
        int e = 0, n = 0;
        for (p++; *p >= '0' && *p <= '9' && n < 3; p++, n++)
            e = e * 10 + (*p - '0');
        if (n == 0 || *p || e > 15) {
            snprintf(err, errlen, "quantity \"%s\" has a bad exponent", s);
            return -1;
        }
        while (e--)
            mul *= 10;
    } else if (suffix(p, &mul, &milli) != 0) {
        snprintf(err, errlen, "quantity \"%s\" has an unknown suffix \"%s\"", s, p);
        return -1;
    }
    /* value = (v + frac/fracdiv) * mul / (milli ? 1000 : 1), must be whole */
    if (v > QMAX / mul) {
        snprintf(err, errlen, "quantity \"%s\" is too large", s);
        return -1;
    }
    int64_t whole = v * mul;
    if (frac > INT64_MAX / mul) {
        snprintf(err, errlen, "quantity \"%s\" has too many decimals", s);
        return -1;
    }
    int64_t fpart = frac * mul; /* in units of 1/fracdiv */
    if (fpart % fracdiv != 0) {
        snprintf(err, errlen, "quantity \"%s\" is not a whole number", s);
        return -1;
    }
    whole += fpart / fracdiv;
    if (milli) {
        if (whole % 1000 != 0) {
            snprintf(err, errlen, "quantity \"%s\" is not a whole number", s);
            return -1;
        }
        whole /= 1000;
    }
    *out = whole;
    return 0;
}
