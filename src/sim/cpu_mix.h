/* CPU-bound workload mixes: a pod list with CPU-only pods sampled from it
 * added until their CPU total is a multiple of the list's own, the way the
 * artifact's cpu-series lists vary the CPU-only share of the default list. */
#ifndef GPUSLICE_SIM_CPU_MIX_H
#define GPUSLICE_SIM_CPU_MIX_H

#include "trace_csv.h"

/* Parses "NAME+cpuX" (X > 1, e.g. "default+cpu2.5"): copies NAME to name
 * and sets *factor to X; a spec without "+cpu" keeps *factor at 0. Returns
 * 0, or -1 when the suffix is malformed or the name does not fit. */
int sim_cpu_mix_spec(const char *spec, char *name, size_t cap, double *factor);

/* Appends CPU-only pods drawn (fixed seed, with replacement) from the
 * list's own CPU-only pods until their CPU total reaches factor times what
 * the list had. Returns 0, or -1 (message in err) when the list has no
 * CPU-only pod or memory runs out. */
int sim_cpu_mix(trace_pods *pods, double factor, char *err, size_t errlen);

#endif
