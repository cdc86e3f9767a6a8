#include "func_class.h"

#include <stdint.h>
#include <string.h>

unsigned gs_fclass_hash(const void *f, unsigned bits)
{
    /* Fibonacci hashing: the top bits of the handle times 2^64 / phi */
    uint64_t x = (uint64_t)(uintptr_t)f * 0x9E3779B97F4A7C15ULL;
    return (unsigned)(x >> (64U - bits));
}

/* f's slot, or the free slot where it would go. */
static unsigned find(const struct gs_fclass *t, const void *f)
{
    unsigned i = gs_fclass_hash(f, GS_FCLASS_BITS);
    while (t->slot[i].f && t->slot[i].f != f)
        i = (i + 1) & (GS_FCLASS_SLOTS - 1);
    return i;
}

int gs_fclass_get(const struct gs_fclass *t, const void *f)
{
    if (!f)
        return -1;
    const struct gs_fclass_entry *e = &t->slot[find(t, f)];
    return e->f ? e->coll : -1;
}

void gs_fclass_clear(struct gs_fclass *t)
{
    memset(t, 0, sizeof *t);
}

void gs_fclass_put(struct gs_fclass *t, const void *f, int coll)
{
    if (!f)
        return;
    unsigned i = find(t, f);
    if (!t->slot[i].f) {
        if (t->n + 1 > GS_FCLASS_SLOTS / 4 * 3) {
            gs_fclass_clear(t); /* full enough: start again (a free slot always remains for find) */
            i = find(t, f);
        }
        t->n++;
    }
    t->slot[i] = (struct gs_fclass_entry){ .f = f, .coll = coll != 0 };
}
