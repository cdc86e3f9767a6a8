#include "accounting.h"

static uint64_t round_up(uint64_t v, uint64_t to)
{
    uint64_t r = v % to;
    if (r == 0)
        return v;
    return v > UINT64_MAX - (to - r) ? UINT64_MAX : v + (to - r);
}

uint64_t gs_charge_linear(uint64_t size)
{
    if (size == 0)
        return 0;
    return size > GS_MIB ? round_up(size, GS_LARGE_PAGE) : round_up(size, 4096);
}

static unsigned element_bytes(int format)
{
    switch (format) {
    case 0x01:
    case 0x08: return 1; /* (un)signed int8 */
    case 0x02:
    case 0x09:
    case 0x10: return 2; /* int16, half */
    case 0x03:
    case 0x0a:
    case 0x20: return 4; /* int32, float */
    default: return 16;
    }
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    if (a && b > UINT64_MAX / a)
        return UINT64_MAX;
    return a * b;
}

static uint64_t at_least_one(uint64_t v)
{
    return v ? v : 1;
}

static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t d, unsigned channels, int format)
{
    uint64_t b = mul_sat(at_least_one(w), at_least_one(h));
    b = mul_sat(b, at_least_one(d));
    b = mul_sat(b, at_least_one(channels));
    return mul_sat(b, element_bytes(format));
}

uint64_t gs_charge_array(uint64_t width, uint64_t height, uint64_t depth, unsigned channels, int format)
{
    return round_up(array_bytes(width, height, depth, channels, format), GS_LARGE_PAGE);
}

uint64_t gs_charge_mipmapped(uint64_t width, uint64_t height, uint64_t depth, unsigned channels, int format,
                             unsigned levels)
{
    uint64_t total = 0;
    for (unsigned l = 0; l < at_least_one(levels) && l < 64; l++) {
        uint64_t b = array_bytes(width, height, depth, channels, format);
        total = total > UINT64_MAX - b ? UINT64_MAX : total + b;
        width = width > 1 ? width / 2 : 1;
        height = height > 1 ? height / 2 : height;
        depth = depth > 1 ? depth / 2 : depth;
    }
    return round_up(total, GS_LARGE_PAGE);
}
