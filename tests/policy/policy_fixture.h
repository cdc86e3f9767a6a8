/* Hand-made clusters for policy tests. */
#ifndef GPUSLICE_TESTS_POLICY_FIXTURE_H
#define GPUSLICE_TESTS_POLICY_FIXTURE_H

#include "policy.h"

/* A node of num_gpus idle GPUs of the given model name (added if new). */
int fx_node(gs_cluster *c, const char *model, int64_t cpu_milli, int64_t mem_mib, int num_gpus);
/* Request helpers. */
gs_request fx_req(int64_t cpu_milli, int64_t mem_mib, int num_gpus, int gpu_milli);
/* Places r on node at the given GPUs (asserting success). */
void fx_put(gs_cluster *c, const gs_request *r, int node, int num_gpus, const int *gpus);

#endif
