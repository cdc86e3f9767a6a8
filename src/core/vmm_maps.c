#include "vmm_maps.h"

#include <stdlib.h>
#include <string.h>

struct handle_entry {
    uint64_t handle;
    uint32_t maps;
    int released;
    struct gs_vmm_settle settle; /* valid once released */
};

struct map_entry {
    uint64_t va;
    uint64_t size;
    struct handle_entry *h;
    struct gs_alloc_rec charge;
};

/* maps: sorted by va. live: the entries of unreleased handles, sorted by
 * handle value (a released one is reached through its mappings only). */
static struct {
    struct map_entry *maps;
    uint32_t nmaps, cap_maps;
    struct handle_entry **live;
    uint32_t nlive, cap_live;
    uint32_t nhandles;
    struct handle_entry *spare; /* for the next new handle: made by gs_vmm_map_room */
    uint32_t max_maps;
} t = { .max_maps = GS_VMM_MAX_MAPS };

/* Grows *arr of elem-sized items to hold at least need of them. */
static int grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    uint32_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    void *n = realloc(*arr, (size_t)ncap * elem);
    if (!n)
        return -1;
    *arr = n;
    *cap = ncap;
    return 0;
}

/* First mapping whose va is at least va. */
static uint32_t map_lower_bound(uint64_t va)
{
    uint32_t lo = 0, hi = t.nmaps;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t.maps[mid].va < va)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* First live entry whose handle is at least handle. */
static uint32_t live_lower_bound(uint64_t handle)
{
    uint32_t lo = 0, hi = t.nlive;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t.live[mid]->handle < handle)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct handle_entry *live_find(uint64_t handle)
{
    uint32_t i = live_lower_bound(handle);
    return i < t.nlive && t.live[i]->handle == handle ? t.live[i] : NULL;
}

static void live_remove(const struct handle_entry *h)
{
    uint32_t i = live_lower_bound(h->handle);
    if (i >= t.nlive || t.live[i] != h)
        return;
    memmove(&t.live[i], &t.live[i + 1], (size_t)(t.nlive - i - 1) * sizeof t.live[0]);
    t.nlive--;
}

/* Puts h among the live entries, in handle order (room made already). */
static void live_insert(struct handle_entry *h)
{
    uint32_t i = live_lower_bound(h->handle);
    memmove(&t.live[i + 1], &t.live[i], (size_t)(t.nlive - i) * sizeof t.live[0]);
    t.live[i] = h;
    t.nlive++;
}

/* The live entry of handle, made from the spare if it has none. */
static struct handle_entry *live_get(uint64_t handle)
{
    struct handle_entry *h = live_find(handle);
    if (h || !t.spare)
        return h;
    h = t.spare;
    t.spare = NULL;
    memset(h, 0, sizeof *h);
    h->handle = handle;
    live_insert(h);
    t.nhandles++;
    return h;
}

int gs_vmm_map_room(void)
{
    if (t.nmaps >= t.max_maps)
        return -1;
    if (grow((void **)&t.maps, &t.cap_maps, t.nmaps + 1, sizeof t.maps[0]) != 0 ||
        grow((void **)&t.live, &t.cap_live, t.nlive + 1, sizeof t.live[0]) != 0)
        return -1;
    if (!t.spare)
        t.spare = calloc(1, sizeof *t.spare);
    return t.spare ? 0 : -1;
}

int gs_vmm_map_add(uint64_t va, uint64_t size, uint64_t handle, struct gs_alloc_rec charge)
{
    if (t.nmaps >= t.cap_maps || t.nlive >= t.cap_live)
        return -1;
    struct handle_entry *h = live_get(handle);
    if (!h)
        return -1;
    h->maps++;
    uint32_t i = map_lower_bound(va);
    memmove(&t.maps[i + 1], &t.maps[i], (size_t)(t.nmaps - i) * sizeof t.maps[0]);
    t.maps[i] = (struct map_entry){ .va = va, .size = size, .h = h, .charge = charge };
    t.nmaps++;
    return 0;
}

int gs_vmm_handle_released(uint64_t handle, const struct gs_vmm_settle *settle)
{
    struct handle_entry *h = live_find(handle);
    if (!h)
        return 0;
    live_remove(h);
    h->released = 1;
    h->settle = *settle;
    return 1;
}

int gs_vmm_handle_revived(uint64_t va, uint64_t handle, struct gs_vmm_settle *settle)
{
    uint32_t i = map_lower_bound(va + 1);
    if (i == 0)
        return 0;
    struct handle_entry *h = t.maps[i - 1].h;
    if (va - t.maps[i - 1].va >= t.maps[i - 1].size || h->handle != handle || !h->released || live_find(handle))
        return 0;
    if (grow((void **)&t.live, &t.cap_live, t.nlive + 1, sizeof t.live[0]) != 0)
        return -1;
    live_insert(h);
    h->released = 0;
    *settle = h->settle;
    return 1;
}

/* One mapping fewer for h: at its last, the entry goes, and a released
 * handle's settle is copied out (returns 1). */
static int drop_map_of(struct handle_entry *h, struct gs_vmm_settle *settle)
{
    if (--h->maps)
        return 0;
    int released = h->released;
    if (released)
        *settle = h->settle;
    else
        live_remove(h);
    free(h);
    t.nhandles--;
    return released;
}

int gs_vmm_unmapped(uint64_t va, uint64_t size, gs_vmm_unmapped_fn unmapped, void *arg)
{
    uint32_t lo = map_lower_bound(va), hi = lo;
    while (hi < t.nmaps && t.maps[hi].va - va < size)
        hi++;
    for (uint32_t i = lo; i < hi; i++) {
        struct gs_vmm_settle settle;
        int last = drop_map_of(t.maps[i].h, &settle);
        t.maps[i].h = NULL;
        if (unmapped)
            unmapped(&t.maps[i].charge, last ? &settle : NULL, arg);
    }
    memmove(&t.maps[lo], &t.maps[hi], (size_t)(t.nmaps - hi) * sizeof t.maps[0]);
    t.nmaps -= hi - lo;
    return (int)(hi - lo);
}

uint32_t gs_vmm_map_count(void)
{
    return t.nmaps;
}

uint32_t gs_vmm_handle_count(void)
{
    return t.nhandles;
}

void gs_vmm_maps_abandon(void)
{
    uint32_t max = t.max_maps;
    memset(&t, 0, sizeof t);
    t.max_maps = max;
}

void gs_vmm_maps_set_max(uint32_t max)
{
    t.max_maps = max;
}
