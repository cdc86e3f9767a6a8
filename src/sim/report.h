/* Result outputs: per-seed curves as CSV, summary table as Markdown. */
#ifndef GPUSLICE_SIM_REPORT_H
#define GPUSLICE_SIM_REPORT_H

#include <stdio.h>

#include "protocol.h"

void report_csv_header(FILE *out);
void report_csv_rows(FILE *out, const char *workload, const char *policy, unsigned long long seed, const sim_result *r);

typedef struct report_stats {
    double mean, sd;
} report_stats;

/* Mean and sample standard deviation of alloc_pct[k] over n results. */
report_stats report_alloc_stats(const sim_result *runs, int n, int k);

typedef struct report_row {
    const char *workload;
    const char *policy;
    const sim_result *runs; /* one per seed */
    int num_runs;
} report_row;

void report_summary(FILE *out, const char *title_extra, int load_pct, const report_row *rows, int num_rows);

#endif
