/* Prometheus text endpoint (/metrics, /healthz) on the shared gs_httpd. */
#ifndef GPUSLICE_DP_METRICS_H
#define GPUSLICE_DP_METRICS_H

#include <stddef.h>

#include "inventory.h"

struct gs_metrics;
/* Renders the metrics text (malloc'd) from the inventory and the regions
 * under state_root/<pod uid>/region. */
char *gs_metrics_render(struct gs_inventory *inv, const char *state_root, int replicas);
struct gs_metrics *gs_metrics_start(const char *addr, int port, struct gs_inventory *inv, const char *state_root,
                                    int replicas, char *err, size_t errlen);
void gs_metrics_stop(struct gs_metrics *m);

#endif
