#include "region_export.h"
#include "region_lock.h"

#include <stdio.h>
#include <string.h>

static int valid_slot(int32_t s)
{
    return s >= 0 && s < GS_REGION_MAX_PROCS;
}

/* A record whose fields can be used as indexes: a tenant writes its region
 * and could have broken one since it was checked. */
static int usable(const struct gs_region_export *e)
{
    return e->bytes != 0 && e->dev >= 0 && e->dev < GS_REGION_MAX_DEVICES && valid_slot(e->payer);
}

static struct gs_export_holder *holder_of(struct gs_region_export *e, int slot)
{
    for (int h = 0; h < GS_EXPORT_HOLDERS; h++)
        if (e->holder[h].refs != 0 && e->holder[h].slot == slot)
            return &e->holder[h];
    return NULL;
}

static int first_holder(const struct gs_region_export *e)
{
    for (int h = 0; h < GS_EXPORT_HOLDERS; h++)
        if (e->holder[h].refs != 0 && valid_slot(e->holder[h].slot))
            return e->holder[h].slot;
    return -1;
}

/* Moves the charge from the payer to slot `to`. Added before it is taken
 * away: a process dying in between leaves it counted twice, never lost. */
static void move_charge_locked(struct gs_region *r, struct gs_region_export *e, int to)
{
    uint64_t *from = &r->proc[e->payer].mem_used[e->dev];
    r->proc[to].mem_used[e->dev] += e->bytes;
    *from = *from >= e->bytes ? *from - e->bytes : 0;
    e->payer = to;
}

static void free_record_locked(struct gs_region *r, struct gs_region_export *e)
{
    uint64_t *mine = &r->proc[e->payer].mem_used[e->dev];
    uint64_t *total = &r->dev[e->dev].mem_used;
    *mine = *mine >= e->bytes ? *mine - e->bytes : 0;
    *total = *total >= e->bytes ? *total - e->bytes : 0;
    memset(e, 0, sizeof *e);
}

/* slot, no longer a holder, stops keeping keys and paying. */
static void after_leaving_locked(struct gs_region *r, struct gs_region_export *e, int slot)
{
    if (e->exporter == slot) {
        e->exporter = -1; /* what kept the keys unique may go now */
        memset(e->key, 0, sizeof e->key);
    }
    int next = first_holder(e);
    if (next < 0)
        free_record_locked(r, e);
    else if (e->payer == slot || !holder_of(e, e->payer))
        move_charge_locked(r, e, next);
}

static int key_usable(const struct gs_export_key *key)
{
    return key->type == GS_EXPORT_KEY_FILE || key->type == GS_EXPORT_KEY_FABRIC;
}

int gs_region_export_new(struct gs_region *r, int slot, int dev, uint64_t bytes, const struct gs_export_key *key)
{
    if (!valid_slot(slot) || dev < 0 || dev >= GS_REGION_MAX_DEVICES || bytes == 0 || !key_usable(key) ||
        gs_region_lock(r) != 0)
        return -1;
    int idx = -1;
    for (int i = 0; i < GS_REGION_MAX_EXPORTS && idx < 0; i++)
        if (r->exports[i].bytes == 0)
            idx = i;
    if (idx >= 0) {
        struct gs_region_export *e = &r->exports[idx];
        memset(e, 0, sizeof *e);
        e->dev = dev;
        e->payer = slot;
        e->exporter = slot;
        e->holder[0] = (struct gs_export_holder){ .slot = slot, .refs = 1 };
        e->key[0] = *key;
        e->bytes = bytes;
    }
    gs_region_unlock(r);
    return idx;
}

int gs_region_export_add_key(struct gs_region *r, int idx, int slot, const struct gs_export_key *key)
{
    if (idx < 0 || idx >= GS_REGION_MAX_EXPORTS || !key_usable(key) || gs_region_lock(r) != 0)
        return -1;
    struct gs_region_export *e = &r->exports[idx];
    int rc = -1;
    for (int k = 0; k < GS_EXPORT_KEYS && rc != 0 && usable(e) && e->exporter == slot; k++) {
        if (e->key[k].type == GS_EXPORT_KEY_NONE || memcmp(&e->key[k], key, sizeof *key) == 0) {
            e->key[k] = *key;
            rc = 0;
        }
    }
    gs_region_unlock(r);
    return rc;
}

static int has_key(const struct gs_region_export *e, const struct gs_export_key *key)
{
    for (int k = 0; k < GS_EXPORT_KEYS; k++)
        if (e->key[k].type == key->type && memcmp(e->key[k].bytes, key->bytes, sizeof key->bytes) == 0)
            return 1;
    return 0;
}

int gs_region_export_join(struct gs_region *r, int slot, const struct gs_export_key *key, int *dev)
{
    if (!valid_slot(slot) || !key_usable(key) || gs_region_lock(r) != 0)
        return -1;
    int idx = -1;
    for (int i = 0; i < GS_REGION_MAX_EXPORTS && idx < 0; i++) {
        struct gs_region_export *e = &r->exports[i];
        if (!usable(e) || e->exporter < 0 || !has_key(e, key))
            continue;
        struct gs_export_holder *h = holder_of(e, slot);
        for (int j = 0; j < GS_EXPORT_HOLDERS && !h; j++)
            if (e->holder[j].refs == 0)
                h = &e->holder[j];
        if (!h)
            break; /* no room: the caller charges this importer itself */
        h->slot = slot;
        h->refs++;
        *dev = e->dev;
        idx = i;
    }
    gs_region_unlock(r);
    return idx;
}

int gs_region_export_leave(struct gs_region *r, int idx, int slot)
{
    if (idx < 0 || idx >= GS_REGION_MAX_EXPORTS || gs_region_lock(r) != 0)
        return -1;
    struct gs_region_export *e = &r->exports[idx];
    struct gs_export_holder *h = usable(e) ? holder_of(e, slot) : NULL;
    if (h && --h->refs == 0) {
        h->slot = 0;
        after_leaving_locked(r, e, slot);
    }
    gs_region_unlock(r);
    return h ? 0 : -1;
}

void gs_region_exports_drop_locked(struct gs_region *r, const unsigned char gone[GS_REGION_MAX_PROCS])
{
    for (int i = 0; i < GS_REGION_MAX_EXPORTS; i++) {
        struct gs_region_export *e = &r->exports[i];
        for (int h = 0; h < GS_EXPORT_HOLDERS && usable(e); h++) {
            int s = e->holder[h].slot;
            if (e->holder[h].refs == 0 || !valid_slot(s) || !gone[s])
                continue;
            e->holder[h] = (struct gs_export_holder){ 0 };
            after_leaving_locked(r, e, s);
        }
        if (usable(e) && e->exporter >= 0 && e->exporter < GS_REGION_MAX_PROCS && gone[e->exporter])
            after_leaving_locked(r, e, e->exporter);
    }
}

int gs_region_exports_check(const struct gs_region *r, char *err, size_t errlen)
{
    for (int i = 0; i < GS_REGION_MAX_EXPORTS; i++) {
        const struct gs_region_export *e = &r->exports[i];
        uint64_t bytes = __atomic_load_n(&e->bytes, __ATOMIC_RELAXED);
        if (bytes == 0)
            continue; /* unused: nothing in it is read */
        int bad = bytes > GS_REGION_MAX_BYTES || e->dev < 0 || e->dev >= GS_REGION_MAX_DEVICES ||
                  !valid_slot(e->payer) || e->exporter < -1 || e->exporter >= GS_REGION_MAX_PROCS || e->pad != 0;
        for (int h = 0; h < GS_EXPORT_HOLDERS && !bad; h++)
            bad = e->holder[h].refs != 0 && !valid_slot(e->holder[h].slot);
        for (int k = 0; k < GS_EXPORT_KEYS && !bad; k++)
            bad = e->key[k].type > GS_EXPORT_KEY_FABRIC || e->key[k].pad != 0;
        if (bad) {
            snprintf(err, errlen, "has a corrupt export record %d", i);
            return -1;
        }
    }
    return 0;
}
