/* `gpuslice top`'s GPU rows: each GPU of the host with its memory, and the
 * limits the containers using it add up to, marked when they add up to more
 * than the GPU holds. */
#ifndef GPUSLICE_CLI_TOP_GPUS_H
#define GPUSLICE_CLI_TOP_GPUS_H

#include "host_gpus.h"
#include "region_view.h"

#include <jansson.h>

struct top_gpu_sum {
    uint64_t limits;   /* bytes, over the containers with a limit on it */
    int containers;    /* containers that have used it */
    int unlimited;     /* of which without a memory limit */
    int overcommitted; /* the limits add up past its memory, or one is unlimited beside another */
};

/* Sums the limits of the n views (NULL ones skipped) per GPU of g, matched by UUID. */
void gs_top_gpus_sum(const struct gs_host_gpus *g, struct gs_region_view *const *views, int n,
                     struct top_gpu_sum *sums);

void gs_top_gpus_print(const struct gs_host_gpus *g, const struct top_gpu_sum *sums);

/* The "gpus" array of top --json. */
json_t *gs_top_gpus_json(const struct gs_host_gpus *g, const struct top_gpu_sum *sums);

#endif
