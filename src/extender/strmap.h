/* A small chained hash map from strings to pointers (node and pod indexes). */
#ifndef GPUSLICE_STRMAP_H
#define GPUSLICE_STRMAP_H

#include <stddef.h>

struct strmap_ent;
struct strmap {
    struct strmap_ent **b;
    size_t nb, n;
};

void strmap_init(struct strmap *m);
void strmap_free(struct strmap *m);
void *strmap_get(const struct strmap *m, const char *key);
/* Inserts or replaces; returns 0 or -1 (out of memory). */
int strmap_put(struct strmap *m, const char *key, void *val);
/* Removes and returns the value, or NULL. */
void *strmap_del(struct strmap *m, const char *key);
/* Calls fn for every entry; fn must not change the map. */
void strmap_foreach(const struct strmap *m, void (*fn)(const char *key, void *val, void *ud), void *ud);

#endif
