/* Fuzzes the region snapshot check (gs_region_view_parse), which is all that
 * stands between a viewer (gpuslice top, the node agent, a sibling's
 * limiter) and a file a tenant writes. A region is 467 KiB, so the input is
 * a list of patches onto a valid one: records of [u32 offset, little
 * endian][u8 length][length bytes], each clipped to the image. Invariants:
 * no crash; an image of any other length is refused; a refusal gives a
 * one-line reason; an accepted image has every field the readers use in
 * range, and reading it as a viewer (names, usage sums) stays in bounds
 * and cannot wrap. */
#include <string.h>

#include "fuzz_target.h"
#include "region_export.h"
#include "region_view.h"

static void base_region(struct gs_region *r)
{
    memset(r, 0, sizeof *r);
    r->magic = GS_REGION_MAGIC;
    r->version = GS_REGION_VERSION;
    r->size = (uint32_t)sizeof *r;
    r->ndevices = 1;
    strcpy(r->dev[0].uuid, "GPU-00000000-0000-0000-0000-000000000000");
    r->dev[0].mem_limit = 1ULL << 30;
    r->proc[0].pid = 1;
    r->proc[0].mem_used[0] = 1ULL << 20;
    /* One shared allocation, held by slots 0 and 1, so patches reach a live record. */
    struct gs_region_export *e = &r->exports[0];
    e->bytes = 1ULL << 20;
    e->exporter = -1;
    e->holder[0] = (struct gs_export_holder){ .slot = 0, .refs = 1 };
    e->holder[1] = (struct gs_export_holder){ .slot = 1, .refs = 2 };
    e->key[0].type = GS_EXPORT_KEY_FILE;
}

/* What the viewers read from an accepted region. */
static void read_as_viewer(const struct gs_region_view *v)
{
    const struct gs_region *r = &v->r;
    FUZZ_CHECK(r->ndevices <= GS_REGION_MAX_DEVICES);
    FUZZ_CHECK(strlen(r->container) < sizeof r->container);
    int live_all = 0;
    (void)gs_region_view_used(v, -1, &live_all);
    for (uint32_t d = 0; d < r->ndevices; d++) {
        FUZZ_CHECK(strlen(r->dev[d].uuid) < GS_REGION_UUID_LEN);
        FUZZ_CHECK(r->dev[d].sm_limit <= 100);
        int live = 0;
        uint64_t used = gs_region_view_used(v, (int)d, &live);
        FUZZ_CHECK(used <= (uint64_t)GS_REGION_MAX_PROCS * GS_REGION_MAX_BYTES);
        FUZZ_CHECK(live == live_all);
    }
    for (int i = 0; i < GS_REGION_MAX_PROCS; i++)
        FUZZ_CHECK(r->proc[i].pid >= 0 && r->proc[i].pid <= GS_REGION_MAX_PID);
    /* Every index an export record gives is one the interposer may follow. */
    for (int i = 0; i < GS_REGION_MAX_EXPORTS; i++) {
        const struct gs_region_export *e = &r->exports[i];
        if (e->bytes == 0)
            continue;
        FUZZ_CHECK(e->bytes <= GS_REGION_MAX_BYTES);
        FUZZ_CHECK(e->dev >= 0 && e->dev < GS_REGION_MAX_DEVICES);
        FUZZ_CHECK(e->payer >= 0 && e->payer < GS_REGION_MAX_PROCS);
        FUZZ_CHECK(e->exporter >= -1 && e->exporter < GS_REGION_MAX_PROCS);
        for (int h = 0; h < GS_EXPORT_HOLDERS; h++)
            FUZZ_CHECK(e->holder[h].refs == 0 || (e->holder[h].slot >= 0 && e->holder[h].slot < GS_REGION_MAX_PROCS));
        for (int k = 0; k < GS_EXPORT_KEYS; k++)
            FUZZ_CHECK(e->key[k].type <= GS_EXPORT_KEY_FABRIC);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gs_region image;
    static struct gs_region_view view;
    char err[256];

    if (size != sizeof image)
        FUZZ_CHECK(gs_region_view_parse(&view.r, data, size, err, sizeof err) == -1);
    base_region(&image);
    for (size_t at = 0; at + 5 <= size;) {
        uint32_t off = (uint32_t)data[at] | (uint32_t)data[at + 1] << 8 | (uint32_t)data[at + 2] << 16 |
                       (uint32_t)data[at + 3] << 24;
        size_t len = data[at + 4];
        at += 5;
        if (len > size - at)
            len = size - at;
        off %= (uint32_t)sizeof image;
        if (len > sizeof image - off)
            len = sizeof image - off;
        memcpy((char *)&image + off, data + at, len);
        at += len;
    }
    view.fd = -1; /* no file: every taken slot counts as live */
    int rc = gs_region_view_parse(&view.r, &image, sizeof image, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == -1);
    if (rc != 0)
        fuzz_check_refusal(err, sizeof err);
    else
        read_as_viewer(&view);
    return 0;
}
