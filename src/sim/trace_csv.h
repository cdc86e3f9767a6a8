/* Loading openb-format node and pod lists (CSV with a header row). */
#ifndef GPUSLICE_SIM_TRACE_CSV_H
#define GPUSLICE_SIM_TRACE_CSV_H

#include <stddef.h>

#include "policy.h"

/* Column positions found in a pod list's header; -1 = absent. */
typedef struct trace_pod_cols {
    int cpu, mem, num_gpu, gpu_milli, gpu_spec;
    int count; /* columns every row must have */
} trace_pod_cols;

typedef struct trace_node_cols {
    int name, cpu, mem, gpu, model;
    int count;
} trace_node_cols;

/* Parses a header line; returns 0 or -1 with a message naming the missing column. */
int trace_pod_header(const char *line, trace_pod_cols *cols, char *err, size_t errlen);
int trace_node_header(const char *line, trace_node_cols *cols, char *err, size_t errlen);

/* Parses one pod row (without newline) into a request. gpu_spec names are
 * looked up in the cluster's model table. Returns 0, or -1 with a message
 * naming the field. A pod's GPU request is num_gpu * 1000 milli-GPU, or
 * gpu_milli for a shared GPU (num_gpu = 1, gpu_milli < 1000). */
int trace_parse_pod_row(const char *line, const trace_pod_cols *cols, const gs_cluster *models, gs_request *out,
                        char *err, size_t errlen);

/* Parses one node row and adds the node (and its GPU model) to the cluster. */
int trace_parse_node_row(const char *line, const trace_node_cols *cols, gs_cluster *cluster, char *err, size_t errlen);

typedef struct trace_pods {
    gs_request *pods;
    size_t count;
} trace_pods;

/* Whole-file loaders; errors are "FILE:LINE: message". */
int trace_load_nodes(const char *path, gs_cluster *cluster, char *err, size_t errlen);
int trace_load_pods(const char *path, const gs_cluster *models, trace_pods *out, char *err, size_t errlen);
void trace_pods_free(trace_pods *p);

#endif
