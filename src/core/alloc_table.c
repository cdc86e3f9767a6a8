#include "alloc_table.h"

#include <stdlib.h>
#include <string.h>

#define STRIPES 64
#define MIN_CAP 16

struct entry {
    uint64_t key; /* 0 = empty */
    struct gs_alloc_rec rec;
};

struct stripe {
    int lock;
    uint32_t cap; /* power of two */
    uint32_t count;
    struct entry *slots;
    char pad[40]; /* one stripe per cache line: threads on different stripes never share one */
};

static struct stripe stripes[STRIPES];

static uint64_t make_key(enum gs_alloc_kind kind, uint64_t handle)
{
    /* Handles and device addresses stay below 2^57 on every supported CPU. */
    return handle ^ ((uint64_t)kind << 58);
}

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static void lock(struct stripe *s)
{
    while (__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&s->lock, __ATOMIC_RELAXED))
            cpu_relax();
}

static void unlock(struct stripe *s)
{
    __atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE);
}

static struct stripe *stripe_of(uint64_t key)
{
    return &stripes[mix(key) & (STRIPES - 1)];
}

static uint32_t home(const struct stripe *s, uint64_t key)
{
    return (uint32_t)(mix(key) >> 6) & (s->cap - 1);
}

static int grow(struct stripe *s)
{
    uint32_t ncap = s->cap ? s->cap * 2 : MIN_CAP;
    struct entry *n = calloc(ncap, sizeof *n);
    if (!n)
        return -1;
    struct entry *old = s->slots;
    uint32_t ocap = s->cap;
    s->slots = n;
    s->cap = ncap;
    for (uint32_t i = 0; i < ocap; i++) {
        if (!old[i].key)
            continue;
        uint32_t j = home(s, old[i].key);
        while (n[j].key)
            j = (j + 1) & (ncap - 1);
        n[j] = old[i];
    }
    free(old);
    return 0;
}

int gs_alloc_put(enum gs_alloc_kind kind, uint64_t handle, struct gs_alloc_rec rec, struct gs_alloc_rec *replaced,
                 int *was_replaced)
{
    uint64_t key = make_key(kind, handle);
    struct stripe *s = stripe_of(key);
    int rc = 0;
    if (was_replaced)
        *was_replaced = 0;
    lock(s);
    if ((s->count + 1) * 4 > s->cap * 3 && grow(s) != 0) {
        rc = -1;
    } else {
        uint32_t j = home(s, key);
        while (s->slots[j].key && s->slots[j].key != key)
            j = (j + 1) & (s->cap - 1);
        if (s->slots[j].key == key) {
            if (replaced)
                *replaced = s->slots[j].rec;
            if (was_replaced)
                *was_replaced = 1;
        } else {
            s->count++;
        }
        s->slots[j].key = key;
        s->slots[j].rec = rec;
    }
    unlock(s);
    return rc;
}

int gs_alloc_take(enum gs_alloc_kind kind, uint64_t handle, struct gs_alloc_rec *out)
{
    uint64_t key = make_key(kind, handle);
    struct stripe *s = stripe_of(key);
    int rc = -1;
    lock(s);
    if (s->cap) {
        uint32_t mask = s->cap - 1;
        uint32_t j = home(s, key);
        while (s->slots[j].key && s->slots[j].key != key)
            j = (j + 1) & mask;
        if (s->slots[j].key == key) {
            *out = s->slots[j].rec;
            rc = 0;
            s->count--;
            /* Backward-shift deletion keeps probe chains intact without
             * tombstones. */
            uint32_t hole = j;
            for (uint32_t k = (j + 1) & mask; s->slots[k].key; k = (k + 1) & mask) {
                uint32_t h = home(s, s->slots[k].key);
                int movable = hole <= k ? (h <= hole || h > k) : (h <= hole && h > k);
                if (movable) {
                    s->slots[hole] = s->slots[k];
                    hole = k;
                }
            }
            s->slots[hole].key = 0;
        }
    }
    unlock(s);
    return rc;
}

int gs_alloc_get(enum gs_alloc_kind kind, uint64_t handle, struct gs_alloc_rec *out)
{
    uint64_t key = make_key(kind, handle);
    struct stripe *s = stripe_of(key);
    int rc = -1;
    lock(s);
    if (s->cap) {
        uint32_t j = home(s, key);
        while (s->slots[j].key && s->slots[j].key != key)
            j = (j + 1) & (s->cap - 1);
        if (s->slots[j].key == key) {
            *out = s->slots[j].rec;
            rc = 0;
        }
    }
    unlock(s);
    return rc;
}

void gs_alloc_clear(void)
{
    for (int i = 0; i < STRIPES; i++) {
        struct stripe *s = &stripes[i];
        lock(s);
        if (s->slots)
            memset(s->slots, 0, (size_t)s->cap * sizeof *s->slots);
        s->count = 0;
        unlock(s);
    }
}

void gs_alloc_lock_all(void)
{
    for (int i = 0; i < STRIPES; i++)
        lock(&stripes[i]);
}

void gs_alloc_unlock_all(void)
{
    for (int i = 0; i < STRIPES; i++)
        unlock(&stripes[i]);
}
