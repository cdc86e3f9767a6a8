/* Collective kernels: which they are, and their spin-free time (collective.h). */
#include "collective.h"

#include <ctype.h>
#include <string.h>

int gs_collective_name(const char *name)
{
    if (!name)
        return 0;
    /* an Itanium-mangled free function: _Z, the name's length, the name */
    if (name[0] == '_' && name[1] == 'Z') {
        name += 2;
        while (isdigit((unsigned char)*name))
            name++;
    }
    return strncmp(name, "ncclDevKernel", 13) == 0 || strncmp(name, "ncclKernel", 10) == 0;
}

static uint64_t shortest(const struct gs_coll_est *e)
{
    uint64_t best = 0;
    for (uint32_t i = 0; i < e->n && i < GS_COLL_SPANS; i++)
        if (best == 0 || e->span[i] < best)
            best = e->span[i];
    return best;
}

uint64_t gs_coll_est_now(const struct gs_coll_est *e)
{
    return e->n < GS_COLL_TRUSTED ? 0 : shortest(e);
}

uint64_t gs_coll_est_add(struct gs_coll_est *e, uint64_t span_ns)
{
    e->span[e->head % GS_COLL_SPANS] = span_ns;
    e->head = (e->head + 1) % GS_COLL_SPANS;
    if (e->n < GS_COLL_SPANS)
        e->n++;
    if (e->n < GS_COLL_TRUSTED)
        return 0;
    return shortest(e) * (e->n == GS_COLL_TRUSTED ? GS_COLL_TRUSTED : 1);
}
