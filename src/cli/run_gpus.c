/* Limits that refer to GPUs that exist. --device names GPUs of the host (as
 * nvidia-smi numbers them, or by UUID); an INDEX= of --memory counts the GPUs
 * the command sees, after --device, as CUDA numbers them inside it. A limit
 * above the memory of its GPU would show the tenant a larger GPU than there is:
 * refused. The GPUs are counted through NVML (dlopen'd); where NVML cannot be
 * read, nothing can be checked and the run is refused. */
#include "host_gpus.h"
#include "run_checks.h"
#include "size_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct visible {
    unsigned count;
    unsigned host[GS_MAX_DEVICES]; /* host index of each visible GPU */
};

static int read_host_gpus(struct gs_host_gpus *g, const char *nvml)
{
    char err[512];
    int no_driver = 0;
    if (gs_host_gpus_read(g, nvml, &no_driver, err, sizeof err) != 0) {
        fprintf(stderr, "gpuslice run: %s: --memory and --device cannot be checked\n", err);
        if (no_driver)
            gs_run_hint_simulated();
        return -1;
    }
    if (g->count == 0) {
        fprintf(stderr, "gpuslice run: NVML sees no GPU on this host: --memory and --device have nothing to limit\n");
        return -1;
    }
    return 0;
}

/* One CUDA_VISIBLE_DEVICES entry: a host index, or a GPU UUID (or its
 * unambiguous start). Returns the host index or -1. */
static int host_index(const struct gs_host_gpus *g, const char *entry)
{
    char *end = NULL;
    if (entry[0] >= '0' && entry[0] <= '9') {
        long v = strtol(entry, &end, 10);
        return *end == '\0' && v >= 0 && v < (long)g->count ? (int)v : -1;
    }
    int found = -1;
    size_t n = strlen(entry);
    for (unsigned i = 0; i < g->count; i++)
        if (n >= 8 && strncmp(g->gpu[i].uuid, entry, n) == 0) {
            if (found >= 0)
                return -1;
            found = (int)i;
        }
    return found;
}

static int parse_visible(const struct gs_host_gpus *g, const char *list, const char *what, struct visible *v)
{
    char *copy = strdup(list);
    char *save = NULL;
    int rc = copy ? 0 : -1;
    v->count = 0;
    for (char *e = copy ? strtok_r(copy, ",", &save) : NULL; e && rc == 0; e = strtok_r(NULL, ",", &save)) {
        int h = host_index(g, e);
        int dup = 0;
        for (unsigned i = 0; i < v->count && h >= 0; i++)
            dup |= v->host[i] == (unsigned)h;
        if (h < 0 || dup || v->count == GS_MAX_DEVICES) {
            fprintf(stderr,
                    "gpuslice run: %s '%s': '%s' is %s; this host has %u GPU%s, numbered 0-%u as nvidia-smi "
                    "shows them (or give a GPU UUID)\n",
                    what, list, e, dup ? "given twice" : "not a GPU of this host", g->count, g->count == 1 ? "" : "s",
                    g->count - 1);
            rc = -1;
        } else {
            v->host[v->count++] = (unsigned)h;
        }
    }
    free(copy);
    return rc;
}

static void all_visible(const struct gs_host_gpus *g, struct visible *v)
{
    v->count = g->count < GS_MAX_DEVICES ? g->count : GS_MAX_DEVICES;
    for (unsigned i = 0; i < v->count; i++)
        v->host[i] = i;
}

static int check_size(const struct gs_host_gpus *g, const struct visible *v, unsigned idx, uint64_t limit,
                      const char *flag)
{
    unsigned h = v->host[idx];
    if (limit <= g->gpu[h].total)
        return 0;
    char want[GS_FORMAT_SIZE_MAX], have[GS_FORMAT_SIZE_MAX];
    gs_format_size(limit, want, sizeof want);
    gs_format_size(g->gpu[h].total, have, sizeof have);
    fprintf(stderr, "gpuslice run: --memory '%s': %s is more than GPU %u (%s) holds: %s\n", flag, want, h,
            g->gpu[h].uuid, have);
    return -1;
}

static int check_indexes(const struct gs_run_request *req, const struct visible *v)
{
    for (unsigned i = 0; i < GS_MAX_DEVICES; i++) {
        if (!(req->per_device_mask & (1U << i)) || i < v->count)
            continue;
        fprintf(stderr,
                "gpuslice run: --memory '%s': there is no GPU %u here: the command sees %u GPU%s, numbered "
                "0-%u (INDEX counts the GPUs the command sees, after --device)\n",
                req->memory_flag, i, v->count, v->count == 1 ? "" : "s", v->count ? v->count - 1 : 0);
        return -1;
    }
    return 0;
}

/* Where GPUs are named by index (--device, --memory INDEX=, an inherited
 * CUDA_VISIBLE_DEVICES), CUDA must number them as NVML does, by PCI bus:
 * by default it puts the fastest first, so on a host of mixed GPUs an index
 * checked here named another GPU in the command. */
static int pin_device_order(const struct gs_run_request *req, const char *visible)
{
    if (!req->device_flag && !req->per_device_mask && !visible)
        return 0;
    const char *order = getenv("CUDA_DEVICE_ORDER");
    if (order && strcmp(order, "PCI_BUS_ID") != 0) {
        fprintf(stderr,
                "gpuslice run: CUDA_DEVICE_ORDER='%s' numbers the GPUs otherwise than nvidia-smi, whose numbers "
                "%s follow%s: unset it\n",
                order,
                req->device_flag       ? "--device"
                : req->per_device_mask ? "--memory INDEX="
                                       : "CUDA_VISIBLE_DEVICES",
                req->device_flag || req->per_device_mask ? "" : "s");
        return -1;
    }
    return setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
}

int gs_run_check_gpus(const struct gs_run_request *req)
{
    const char *env = getenv("CUDA_VISIBLE_DEVICES");
    if (!req->memory_flag && !req->device_flag)
        return 0;
    if (pin_device_order(req, env) != 0)
        return -1;
    struct gs_host_gpus *g = calloc(1, sizeof *g);
    struct visible v = { 0 };
    int rc = g ? read_host_gpus(g, req->nvml) : -1;
    if (rc == 0 && env)
        rc = parse_visible(g, env, req->device_flag ? "--device" : "CUDA_VISIBLE_DEVICES", &v);
    else if (rc == 0)
        all_visible(g, &v);
    if (rc == 0 && req->memory_flag && v.count == 0) {
        fprintf(stderr, "gpuslice run: --memory '%s': the command sees no GPU\n", req->memory_flag);
        rc = -1;
    }
    if (rc == 0 && req->memory_flag)
        rc = check_indexes(req, &v);
    for (unsigned i = 0; rc == 0 && req->memory_flag && i < v.count; i++)
        if (req->mem_limit[i])
            rc = check_size(g, &v, i, req->mem_limit[i], req->memory_flag);
    free(g);
    return rc;
}
