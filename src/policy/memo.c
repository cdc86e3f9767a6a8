/* Memo of a value per node state: equal states (GPUs in any order) share
 * one entry, so thousands of nodes in a few dozen states cost a few dozen
 * evaluations. Bounded: past MEMO_LIMIT slots it starts over. */
#include "policy_internal.h"

#include <stdlib.h>
#include <string.h>

#define MEMO_INITIAL (1u << 14)
#define MEMO_LIMIT (1u << 20)

void gs_memo_clear(gs_memo *m)
{
    if (m->slots)
        memset(m->slots, 0, m->cap * sizeof(*m->slots));
    m->used = 0;
}

void gs_memo_free(gs_memo *m)
{
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

/* Order GPUs so that equal node states give equal memo keys. */
static void canonical(const gs_view *in, gs_view *out)
{
    *out = *in;
    for (int i = 1; i < out->num_gpus; i++) {
        int32_t f = out->gpu_free[i];
        bool idle = out->gpu_idle[i];
        int j = i - 1;
        while (j >= 0 && (out->gpu_free[j] < f || (out->gpu_free[j] == f && out->gpu_idle[j] < idle))) {
            out->gpu_free[j + 1] = out->gpu_free[j];
            out->gpu_idle[j + 1] = out->gpu_idle[j];
            j--;
        }
        out->gpu_free[j + 1] = f;
        out->gpu_idle[j + 1] = idle;
    }
}

static uint64_t hash_bytes(const void *p, size_t len)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

static bool memo_grow(gs_memo *m)
{
    size_t cap = m->cap ? m->cap * 2 : MEMO_INITIAL;
    if (cap > MEMO_LIMIT) {
        gs_memo_clear(m); /* bounded memory: start over rather than grow */
        return m->slots != NULL;
    }
    gs_memo_slot *fresh = calloc(cap, sizeof(*fresh));
    if (!fresh)
        return false;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].used)
            continue;
        size_t at = m->slots[i].hash & (cap - 1);
        while (fresh[at].used)
            at = (at + 1) & (cap - 1);
        fresh[at] = m->slots[i];
    }
    free(m->slots);
    m->slots = fresh;
    m->cap = cap;
    return true;
}

double gs_memo_get(gs_memo *m, const gs_view *v, gs_memo_fn compute, const void *ctx)
{
    gs_view key;
    canonical(v, &key);
    if ((m->used + 1) * 2 > m->cap && !memo_grow(m))
        return compute(ctx, &key);
    uint64_t h = hash_bytes(&key, sizeof(key));
    size_t at = h & (m->cap - 1);
    while (m->slots[at].used) {
        if (m->slots[at].hash == h && memcmp(&m->slots[at].key, &key, sizeof(key)) == 0)
            return m->slots[at].value;
        at = (at + 1) & (m->cap - 1);
    }
    double value = compute(ctx, &key);
    m->slots[at] = (gs_memo_slot){ .hash = h, .key = key, .value = value, .used = true };
    m->used++;
    return value;
}
