/*
 * A viewer's private snapshot of a region (`gpuslice top`, the node agent's
 * metrics, the compute limiter's look at sibling containers). A region is
 * written by its tenant, so to a viewer it is hostile input: the file is
 * read, never mapped (a tenant that truncates it cannot raise SIGBUS in the
 * viewer), only if it is a regular file of the exact size reached without a
 * symbolic link (a FIFO cannot hang the viewer), and the copy is checked
 * whole (gs_region_check) before any field is used. Its mutex is never
 * touched.
 */
#ifndef GPUSLICE_REGION_VIEW_H
#define GPUSLICE_REGION_VIEW_H

#include "region.h"

#include <stddef.h>
#include <stdint.h>

struct gs_region_view {
    struct gs_region r; /* the checked copy */
    int fd;             /* the file, read-only: asks whether a slot's process lives */
};

/* Reads and checks the region at path. Returns the view (free with
 * gs_region_view_free), or NULL with what failed and why in err. */
struct gs_region_view *gs_region_view_open(const char *path, char *err, size_t errlen);
void gs_region_view_free(struct gs_region_view *v);

/* Copies a whole region image of len bytes into *out and checks it: what
 * gs_region_view_open does after reading. 0, or -1 with the reason in err. */
int gs_region_view_parse(struct gs_region *out, const void *buf, size_t len, char *err, size_t errlen);

/* 1 if slot is taken by a process that is alive now (region.h: its byte
 * is locked), whatever its pid namespace. */
int gs_region_view_alive(const struct gs_region_view *v, int slot);

/* Bytes held on device dev by live processes, and how many processes are
 * live (dev -1: count only). */
uint64_t gs_region_view_used(const struct gs_region_view *v, int dev, int *live_procs);

#endif
