#include "top_gpus.h"
#include "size_parse.h"
#include "text_escape.h"

#include <stdio.h>
#include <string.h>

void gs_top_gpus_sum(const struct gs_host_gpus *g, struct gs_region_view *const *views, int n, struct top_gpu_sum *sums)
{
    memset(sums, 0, sizeof *sums * g->count);
    for (unsigned i = 0; i < g->count; i++) {
        struct top_gpu_sum *s = &sums[i];
        for (int v = 0; v < n; v++) {
            if (!views[v])
                continue; /* could not be read */
            const struct gs_region *r = &views[v]->r;
            for (uint32_t d = 0; d < r->ndevices; d++) {
                if (strncmp(r->dev[d].uuid, g->gpu[i].uuid, GS_REGION_UUID_LEN) != 0)
                    continue;
                s->containers++;
                s->unlimited += r->dev[d].mem_limit == 0;
                s->limits += r->dev[d].mem_limit;
            }
        }
        s->overcommitted = s->limits > g->gpu[i].total || (s->unlimited && s->containers > 1);
    }
}

void gs_top_gpus_print(const struct gs_host_gpus *g, const struct top_gpu_sum *sums)
{
    printf("%-4s %-28s %12s %12s %12s %10s\n", "GPU", "NAME", "TOTAL", "FREE", "LIMITS", "CONTAINERS");
    for (unsigned i = 0; i < g->count; i++) {
        char name[4 * sizeof g->gpu[i].name + 1], total[32], free[32], limits[32];
        gs_escape_utf8(name, sizeof name, g->gpu[i].name, strnlen(g->gpu[i].name, sizeof g->gpu[i].name));
        gs_format_size(g->gpu[i].total, total, sizeof total);
        gs_format_size(g->gpu[i].free, free, sizeof free);
        if (sums[i].unlimited)
            snprintf(limits, sizeof limits, "unlimited");
        else
            gs_format_size(sums[i].limits, limits, sizeof limits);
        printf("%-4u %-28s %12s %12s %12s %10d%s\n", i, name, total, free, limits, sums[i].containers,
               sums[i].overcommitted ? "  OVERCOMMITTED" : "");
    }
    putchar('\n');
}

json_t *gs_top_gpus_json(const struct gs_host_gpus *g, const struct top_gpu_sum *sums)
{
    json_t *gpus = json_array();
    for (unsigned i = 0; i < g->count; i++) {
        const struct gs_host_gpu *h = &g->gpu[i];
        char name[4 * sizeof h->name + 1], uuid[4 * sizeof h->uuid + 1];
        gs_escape_utf8(name, sizeof name, h->name, strnlen(h->name, sizeof h->name));
        gs_escape_utf8(uuid, sizeof uuid, h->uuid, strnlen(h->uuid, sizeof h->uuid));
        json_array_append_new(gpus,
                              json_pack("{s:i, s:s, s:s, s:I, s:I, s:o, s:i, s:i, s:b}", "index", (int)i, "uuid", uuid,
                                        "name", name, "memory_total_bytes", (json_int_t)h->total, "memory_free_bytes",
                                        (json_int_t)h->free, "memory_limits_bytes",
                                        sums[i].unlimited ? json_null() : json_integer((json_int_t)sums[i].limits),
                                        "containers", sums[i].containers, "unlimited_containers", sums[i].unlimited,
                                        "overcommitted", sums[i].overcommitted));
    }
    return gpus;
}
