/* gs_format_size: human-readable sizes for the CLI and error messages. */
#include "size_parse.h"

#include <inttypes.h>
#include <stdio.h>

static const char *const gs_units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
#define GS_UNIT_TOP 4

int gs_format_size(uint64_t bytes, char *buf, size_t len)
{
    static const uint64_t pow10[] = { 1, 10, 100 };
    int u = 0;
    int n;

    if (buf == NULL || len == 0)
        return -1;
    while (u < GS_UNIT_TOP && bytes >= (UINT64_C(1) << (10 * (u + 1))))
        u++;
    if (u == 0) {
        n = snprintf(buf, len, "%" PRIu64 " B", bytes);
    } else {
        int shift = 10 * u;
        uint64_t unit = UINT64_C(1) << shift;
        uint64_t q = bytes >> shift;
        uint64_t r = bytes & (unit - 1);
        int d = q < 10 ? 2 : q < 100 ? 1 : 0;
        /* Round half up in integers: r < 2^40, so r * 200 cannot overflow. */
        uint64_t scaled = q * pow10[d] + (r * pow10[d] * 2 + unit) / (2 * unit);

        if (u < GS_UNIT_TOP && scaled >= 1024 * pow10[d]) {
            /* 1023.7 MiB rounds to 1024: say 1.00 GiB instead. */
            u++;
            d = 2;
            scaled = 100;
        } else if (d > 0 && scaled >= 1000) {
            /* 9.999 rounds to 10.00 (or 99.99 to 100.0): keep three significant digits. */
            d--;
            scaled = (scaled + 5) / 10;
        }
        if (d == 0)
            n = snprintf(buf, len, "%" PRIu64 " %s", scaled, gs_units[u]);
        else
            n = snprintf(buf, len, "%" PRIu64 ".%0*" PRIu64 " %s", scaled / pow10[d], d, scaled % pow10[d],
                         gs_units[u]);
    }
    if (n < 0 || (size_t)n >= len)
        return -1;
    return n;
}
