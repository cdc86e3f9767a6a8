/* Writes curves and the per-policy summary table. */
#include "report.h"

#include <math.h>

void report_csv_header(FILE *out)
{
    fputs("workload,policy,seed,arrived_pct,alloc_pct\n", out);
}

void report_csv_rows(FILE *out, const char *workload, const char *policy, unsigned long long seed, const sim_result *r)
{
    for (int k = 1; k <= r->load_pct; k++)
        if (!isnan(r->alloc_pct[k]))
            fprintf(out, "%s,%s,%llu,%d,%.4f\n", workload, policy, seed, k, r->alloc_pct[k]);
}

report_stats report_alloc_stats(const sim_result *runs, int n, int k)
{
    report_stats s = { NAN, NAN };
    double sum = 0.0;
    int count = 0;
    for (int i = 0; i < n; i++) {
        if (!isnan(runs[i].alloc_pct[k])) {
            sum += runs[i].alloc_pct[k];
            count++;
        }
    }
    if (count == 0)
        return s;
    s.mean = sum / count;
    double sq = 0.0;
    for (int i = 0; i < n; i++)
        if (!isnan(runs[i].alloc_pct[k]))
            sq += (runs[i].alloc_pct[k] - s.mean) * (runs[i].alloc_pct[k] - s.mean);
    s.sd = count > 1 ? sqrt(sq / (count - 1)) : 0.0;
    return s;
}

/* "mean ± sd", or the value alone for one run (no spread to show). */
static void format_stat(report_stats s, int runs, char *buf, size_t cap)
{
    if (runs > 1)
        snprintf(buf, cap, "%.2f ± %.2f", s.mean, s.sd);
    else
        snprintf(buf, cap, "%.2f", s.mean);
}

void report_summary(FILE *out, const char *title_extra, int load_pct, const report_row *rows, int num_rows)
{
    fputs("# gpuslice sim summary\n\n", out);
    if (title_extra && *title_extra)
        fprintf(out, "%s\n\n", title_extra);
    fprintf(out,
            "Allocated GPU share (%% of capacity) when the arrived GPU request reaches 100 %% "
            "and %d %% of capacity; mean ± sd over the seeds when there are several.\n\n",
            load_pct);
    fprintf(out,
            "| pod list | policy | seeds | alloc @100 %% | alloc @%d %% | failed pods | "
            "s/seed | decision p99 µs |\n",
            load_pct);
    fputs("|---|---|---|---|---|---|---|---|\n", out);
    for (int i = 0; i < num_rows; i++) {
        const report_row *row = &rows[i];
        report_stats a = report_alloc_stats(row->runs, row->num_runs, 100);
        report_stats b = report_alloc_stats(row->runs, row->num_runs, load_pct);
        double failed = 0.0, secs = 0.0, p99 = 0.0;
        for (int s = 0; s < row->num_runs; s++) {
            failed += (double)row->runs[s].failed;
            secs += row->runs[s].seconds;
            p99 = fmax(p99, row->runs[s].decision_p99_us);
        }
        int n = row->num_runs > 0 ? row->num_runs : 1;
        char at100[32], atload[32];
        format_stat(a, row->num_runs, at100, sizeof(at100));
        format_stat(b, row->num_runs, atload, sizeof(atload));
        fprintf(out, "| %s | %s | %d | %s | %s | %.0f | %.2f | %.0f |\n", row->workload, row->policy, row->num_runs,
                at100, atload, failed / n, secs / n, p99);
    }
}
