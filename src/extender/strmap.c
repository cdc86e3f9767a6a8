/* Chained hashing with FNV-1a; doubles when the load factor passes 1. */
#include "strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct strmap_ent {
    char *key;
    void *val;
    struct strmap_ent *next;
};

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

void strmap_init(struct strmap *m)
{
    memset(m, 0, sizeof *m);
}

void strmap_free(struct strmap *m)
{
    for (size_t i = 0; i < m->nb; i++)
        for (struct strmap_ent *e = m->b[i], *nx; e; e = nx) {
            nx = e->next;
            free(e->key);
            free(e);
        }
    free(m->b);
    strmap_init(m);
}

void *strmap_get(const struct strmap *m, const char *key)
{
    if (!m->nb)
        return NULL;
    for (struct strmap_ent *e = m->b[hash(key) & (m->nb - 1)]; e; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e->val;
    return NULL;
}

static int grow(struct strmap *m)
{
    size_t nb = m->nb ? m->nb * 2 : 64;
    struct strmap_ent **b = calloc(nb, sizeof *b);
    if (!b)
        return -1;
    for (size_t i = 0; i < m->nb; i++)
        for (struct strmap_ent *e = m->b[i], *nx; e; e = nx) {
            nx = e->next;
            size_t j = hash(e->key) & (nb - 1);
            e->next = b[j];
            b[j] = e;
        }
    free(m->b);
    m->b = b;
    m->nb = nb;
    return 0;
}

int strmap_put(struct strmap *m, const char *key, void *val)
{
    if (m->n >= m->nb && grow(m) != 0)
        return -1;
    size_t j = hash(key) & (m->nb - 1);
    for (struct strmap_ent *e = m->b[j]; e; e = e->next)
        if (strcmp(e->key, key) == 0) {
            e->val = val;
            return 0;
        }
    struct strmap_ent *e = malloc(sizeof *e);
    if (!e || !(e->key = strdup(key))) {
        free(e);
        return -1;
    }
    e->val = val;
    e->next = m->b[j];
    m->b[j] = e;
    m->n++;
    return 0;
}

void *strmap_del(struct strmap *m, const char *key)
{
    if (!m->nb)
        return NULL;
    for (struct strmap_ent **pp = &m->b[hash(key) & (m->nb - 1)]; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->key, key) == 0) {
            struct strmap_ent *e = *pp;
            void *v = e->val;
            *pp = e->next;
            free(e->key);
            free(e);
            m->n--;
            return v;
        }
    return NULL;
}

void strmap_foreach(const struct strmap *m, void (*fn)(const char *key, void *val, void *ud), void *ud)
{
    for (size_t i = 0; i < m->nb; i++)
        for (struct strmap_ent *e = m->b[i]; e; e = e->next)
            fn(e->key, e->val, ud);
}
