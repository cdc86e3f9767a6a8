/* `gpuslice sim`: load the trace, run every pod list x policy x seed,
 * write curves, summary and plot. */
#define _GNU_SOURCE
#include "sim_main.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "protocol.h"
#include "report.h"
#include "sim_args.h"
#include "trace_csv.h"

typedef struct progress_ctx {
    const char *workload, *policy;
    unsigned long long seed;
    bool tty;
} progress_ctx;

static void progress_cb(void *ctx, size_t done, size_t total)
{
    const progress_ctx *p = ctx;
    if (p->tty)
        fprintf(stderr, "\rsim: %s %s seed %llu: %zu/%zu pods", p->workload, p->policy, p->seed,
                done, total);
}

/* "name" -> DIR/name.csv; anything with a '/' is used as given. */
static void pod_path(const sim_args *a, const char *spec, char *path, size_t cap)
{
    if (strchr(spec, '/'))
        snprintf(path, cap, "%s", spec);
    else
        snprintf(path, cap, "%s/%s%s", a->trace_dir, spec,
                 strstr(spec, ".csv") ? "" : ".csv");
}

/* Workload label: file name without directory and ".csv". */
static void workload_name(const char *path, char *out, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base) < cap - 1 ? strlen(base) : cap - 1;
    memcpy(out, base, n);
    out[n] = '\0';
    char *dot = strstr(out, ".csv");
    if (dot && dot[4] == '\0')
        *dot = '\0';
}

static int run_plot(const sim_args *a)
{
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gpuslice sim: fork for plot: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        char *argv[] = {(char *)a->python, (char *)a->plot_script, (char *)a->csv, (char *)a->plot,
                        NULL};
        execv(a->python, argv);
        fprintf(stderr, "gpuslice sim: cannot run %s: %s\n", a->python, strerror(errno));
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "gpuslice sim: plot script %s failed (needs matplotlib; see --python)\n",
                a->plot_script);
        return 1;
    }
    return 0;
}

typedef struct sim_state {
    gs_cluster cluster;
    trace_pods pods[SIM_MAX_PODFILES];
    char names[SIM_MAX_PODFILES][256];
    sim_result *runs; /* [file][policy][seed] */
    report_row *rows;
    FILE *csv;
} sim_state;

static void state_free(sim_state *s)
{
    gs_cluster_free(&s->cluster);
    for (int i = 0; i < SIM_MAX_PODFILES; i++)
        trace_pods_free(&s->pods[i]);
    free(s->runs);
    free(s->rows);
    if (s->csv)
        fclose(s->csv);
}

static int load_inputs(const sim_args *a, sim_state *s)
{
    char err[1400];
    gs_cluster_init(&s->cluster);
    if (trace_load_nodes(a->nodes, &s->cluster, err, sizeof(err)) != 0) {
        fprintf(stderr, "gpuslice sim: %s\n", err);
        return 1;
    }
    if (gs_cluster_gpu_capacity(&s->cluster) <= 0) {
        fprintf(stderr, "gpuslice sim: %s: the cluster has no GPUs\n", a->nodes);
        return 1;
    }
    for (int f = 0; f < a->num_pods_files; f++) {
        char path[1400];
        pod_path(a, a->pods[f], path, sizeof(path));
        workload_name(path, s->names[f], sizeof(s->names[f]));
        if (trace_load_pods(path, &s->cluster, &s->pods[f], err, sizeof(err)) != 0) {
            fprintf(stderr, "gpuslice sim: %s\n", err);
            return 1;
        }
    }
    return 0;
}

static int run_all(const sim_args *a, sim_state *s)
{
    size_t nruns = (size_t)a->num_pods_files * a->num_policies * a->num_seeds;
    s->runs = calloc(nruns, sizeof(*s->runs));
    s->rows = calloc((size_t)a->num_pods_files * a->num_policies, sizeof(*s->rows));
    if (!s->runs || !s->rows) {
        fputs("gpuslice sim: out of memory\n", stderr);
        return 1;
    }
    progress_ctx pc = {.tty = !a->quiet && isatty(STDERR_FILENO)};
    size_t at = 0;
    for (int f = 0; f < a->num_pods_files; f++) {
        for (int p = 0; p < a->num_policies; p++) {
            report_row *row = &s->rows[f * a->num_policies + p];
            row->workload = s->names[f];
            row->policy = gs_policy_name(a->policies[p]);
            row->runs = &s->runs[at];
            row->num_runs = a->num_seeds;
            for (int k = 0; k < a->num_seeds; k++, at++) {
                pc.workload = row->workload;
                pc.policy = row->policy;
                pc.seed = (unsigned long long)a->seeds[k];
                sim_result *r = &s->runs[at];
                if (sim_run(&s->cluster, s->pods[f].pods, s->pods[f].count, a->policies[p],
                            a->seeds[k], a->load_pct, a->quiet ? NULL : progress_cb, &pc, r)) {
                    fputs("gpuslice sim: out of memory during the run\n", stderr);
                    return 1;
                }
                if (!a->quiet)
                    fprintf(stderr, "%ssim: %s %s seed %llu: alloc %.2f%% @100, %.2f%% @%d, "
                                    "%zu/%zu placed, %.2f s, p99 %.0f us\n",
                            pc.tty ? "\r" : "", row->workload, row->policy, pc.seed,
                            r->alloc_pct[100], r->alloc_pct[a->load_pct], a->load_pct, r->placed,
                            r->arrived, r->seconds, r->decision_p99_us);
                if (s->csv) {
                    report_csv_rows(s->csv, row->workload, row->policy, pc.seed, r);
                    fflush(s->csv);
                }
            }
        }
    }
    return 0;
}

static int write_outputs(const sim_args *a, sim_state *s)
{
    int nrows = a->num_pods_files * a->num_policies;
    report_summary(stdout, a->label, a->load_pct, s->rows, nrows);
    if (a->summary) {
        FILE *out = fopen(a->summary, "w");
        if (!out) {
            fprintf(stderr, "gpuslice sim: cannot write %s: %s\n", a->summary, strerror(errno));
            return 1;
        }
        report_summary(out, a->label, a->load_pct, s->rows, nrows);
        if (fclose(out) != 0) {
            fprintf(stderr, "gpuslice sim: writing %s failed\n", a->summary);
            return 1;
        }
    }
    if (s->csv) {
        int bad = ferror(s->csv) | fclose(s->csv);
        s->csv = NULL;
        if (bad) {
            fprintf(stderr, "gpuslice sim: writing %s failed\n", a->csv);
            return 1;
        }
    }
    return a->plot ? run_plot(a) : 0;
}

int gpuslice_sim_main(int argc, char **argv)
{
    sim_args *a = calloc(1, sizeof(*a));
    if (!a) {
        fputs("gpuslice sim: out of memory\n", stderr);
        return 1;
    }
    int rc = sim_args_parse(argc, argv, a, stderr);
    if (rc != 0 || a->help) {
        if (a->help)
            sim_usage(stdout);
        free(a);
        return rc;
    }
    if (a->plot && !a->csv) {
        fputs("gpuslice sim: --plot needs --csv (the plot is drawn from it)\n"
              "Try 'gpuslice sim --help'.\n",
              stderr);
        free(a);
        return 2;
    }
    sim_state s;
    memset(&s, 0, sizeof(s));
    rc = load_inputs(a, &s);
    if (rc == 0 && a->csv) {
        s.csv = fopen(a->csv, "w");
        if (!s.csv) {
            fprintf(stderr, "gpuslice sim: cannot write %s: %s\n", a->csv, strerror(errno));
            rc = 1;
        } else {
            report_csv_header(s.csv);
        }
    }
    if (rc == 0)
        rc = run_all(a, &s);
    if (rc == 0)
        rc = write_outputs(a, &s);
    state_free(&s);
    free(a);
    return rc;
}
