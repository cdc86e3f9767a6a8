/* Prometheus counters and latency histograms of the extender's decisions. */
#ifndef GPUSLICE_EXT_METRICS_H
#define GPUSLICE_EXT_METRICS_H

#include <stdint.h>

enum ext_verb { EXT_V_FILTER = 0, EXT_V_PRIORITIZE, EXT_V_BIND, EXT_V_COUNT };

void ext_metrics_observe(enum ext_verb v, double seconds, int error);
void ext_metrics_filter_nodes(uint64_t passed, uint64_t failed);
void ext_metrics_bind_conflict(void);
/* Prometheus text; malloc'd. */
char *ext_metrics_render(uint64_t nodes, uint64_t generation, int ready);

#endif
