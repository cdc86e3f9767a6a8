/*
 * Which kernels are collectives, by function handle: the interposer asks the
 * driver once per function (cuFuncGetName) and keeps the answer here. A
 * fixed table with open addressing; past three quarters full it starts again
 * empty, so that a program loading ever more kernels (torch.compile makes
 * many) has its functions asked about again, and the table is never overrun.
 * The caller serialises access. Pure logic, unit-tested.
 */
#ifndef GPUSLICE_FUNC_CLASS_H
#define GPUSLICE_FUNC_CLASS_H

#define GS_FCLASS_BITS 12
#define GS_FCLASS_SLOTS (1U << GS_FCLASS_BITS)

struct gs_fclass_entry {
    const void *f; /* NULL: a free slot */
    int coll;
};

struct gs_fclass {
    struct gs_fclass_entry slot[GS_FCLASS_SLOTS];
    unsigned n; /* slots in use */
};

/* 1: f is a collective's function, 0: it is not, -1: not known (NULL never
 * is). */
int gs_fclass_get(const struct gs_fclass *t, const void *f);

/* Records f's answer (a NULL f is not recorded). */
void gs_fclass_put(struct gs_fclass *t, const void *f, int coll);

/* Forgets every answer. */
void gs_fclass_clear(struct gs_fclass *t);

/* f's place in a table of 2^bits slots (1..32 bits): the handle's bits
 * mixed, since the driver's handles share their low bits (alignment). */
unsigned gs_fclass_hash(const void *f, unsigned bits);

#endif
