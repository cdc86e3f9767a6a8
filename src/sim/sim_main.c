/* `gpuslice sim`: load the trace, run every pod list x policy x seed,
 * write curves, summary and plot. */
#define _GNU_SOURCE
#include "sim_main.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu_mix.h"
#include "progress.h"
#include "protocol.h"
#include "report.h"
#include "sim_args.h"
#include "trace_csv.h"

typedef struct progress_ctx {
    const char *workload, *policy;
    unsigned long long seed;
    bool tty;
    size_t run, runs;    /* this run, 1-based, of how many */
    double seconds_done; /* the runs before this one took */
} progress_ctx;

static void progress_cb(void *ctx, size_t done, size_t total)
{
    const progress_ctx *p = ctx;
    if (!p->tty)
        return;
    char eta[32];
    sim_format_eta(eta, sizeof eta, sim_eta_s(p->seconds_done, p->run - 1, p->runs));
    fprintf(stderr, "\rsim: [%zu/%zu] %s %s seed %llu: %zu/%zu pods, %s", p->run, p->runs, p->workload, p->policy,
            p->seed, done, total, eta);
}

/* Pod list prefix of the openb file names, left out of short names. */
#define OPENB_POD_PREFIX "openb_pod_list_"

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* "gpushare40" -> DIR/openb_pod_list_gpushare40.csv (or DIR/gpushare40.csv
 * when that exists); anything with a '/' is used as given. */
static void pod_path(const sim_args *a, const char *name, char *path, size_t cap)
{
    if (strchr(name, '/')) {
        snprintf(path, cap, "%s", name);
        return;
    }
    const char *ext = strstr(name, ".csv") ? "" : ".csv";
    snprintf(path, cap, "%s/%s%s", a->trace_dir, name, ext);
    if (!is_file(path) && strncmp(name, OPENB_POD_PREFIX, strlen(OPENB_POD_PREFIX)) != 0)
        snprintf(path, cap, "%s/" OPENB_POD_PREFIX "%s%s", a->trace_dir, name, ext);
}

/* Workload label: the short list name (no directory, prefix or ".csv"),
 * plus the mix suffix. */
static void workload_name(const char *path, double mix, char *out, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, OPENB_POD_PREFIX, strlen(OPENB_POD_PREFIX)) == 0)
        base += strlen(OPENB_POD_PREFIX);
    size_t n = strlen(base);
    if (n >= 4 && strcmp(base + n - 4, ".csv") == 0)
        n -= 4;
    if (mix > 0.0)
        snprintf(out, cap, "%.*s+cpu%g", (int)n, base, mix);
    else
        snprintf(out, cap, "%.*s", (int)n, base);
}

/* Runs the plot script on the curves; it says itself what went wrong. */
static int run_plot(const sim_args *a, const char *csv, int seeds)
{
    char nseeds[16];
    snprintf(nseeds, sizeof(nseeds), "%d", seeds);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gpuslice sim: fork for plot: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        char *argv[] = { (char *)a->python, (char *)a->plot_script, (char *)csv, (char *)a->plot, nseeds, NULL };
        execvp(a->python, argv);
        fprintf(stderr, "gpuslice sim: cannot run %s: %s\n", a->python, strerror(errno));
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "gpuslice sim: no plot written: %s %s failed (the reason is above)\n", a->python,
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
    const char *csv_path; /* --csv, or tmp_csv for a plot without one */
    char tmp_csv[64];
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
    if (s->tmp_csv[0])
        unlink(s->tmp_csv);
}

/* Where the trace comes from, for the message when it is missing. */
static void trace_help(const sim_args *a)
{
    fprintf(stderr,
            "gpuslice sim: no trace in %s\n"
            "The openb trace (Alibaba cluster-trace-gpu-v2023, folder csv: openb_node_list_gpu_node.csv\n"
            "and openb_pod_list_*.csv, published with the FGD paper, USENIX ATC'23) is expected in\n"
            "../shared/traces/openb beside the repository. Copy it there, or point --trace-dir DIR or\n"
            "$GPUSLICE_TRACE_DIR at a directory that has it.\n",
            a->trace_dir);
}

static int load_inputs(const sim_args *a, sim_state *s)
{
    char err[1400];
    gs_cluster_init(&s->cluster);
    struct stat st;
    if (!a->nodes_given && stat(a->trace_dir, &st) != 0) {
        trace_help(a);
        return 1;
    }
    if (trace_load_nodes(a->nodes, &s->cluster, err, sizeof(err)) != 0) {
        fprintf(stderr, "gpuslice sim: %s\n", err);
        return 1;
    }
    if (gs_cluster_gpu_capacity(&s->cluster) <= 0) {
        fprintf(stderr, "gpuslice sim: %s: the cluster has no GPUs\n", a->nodes);
        return 1;
    }
    for (int f = 0; f < a->num_pods_files; f++) {
        char name[1024], path[2304];
        double mix;
        if (sim_cpu_mix_spec(a->pods[f], name, sizeof(name), &mix) != 0) {
            fprintf(stderr, "gpuslice sim: bad pod list '%s' (a list name, optionally with +cpuX, X > 1)\n",
                    a->pods[f]);
            return 2;
        }
        pod_path(a, name, path, sizeof(path));
        workload_name(path, mix, s->names[f], sizeof(s->names[f]));
        if (trace_load_pods(path, &s->cluster, &s->pods[f], err, sizeof(err)) != 0) {
            fprintf(stderr, "gpuslice sim: %s\n", err);
            return 1;
        }
        if (mix > 0.0 && sim_cpu_mix(&s->pods[f], mix, err, sizeof(err)) != 0) {
            fprintf(stderr, "gpuslice sim: %s: %s\n", path, err);
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
    progress_ctx pc = { .tty = !a->quiet && isatty(STDERR_FILENO), .runs = nruns };
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
                pc.run = at + 1;
                sim_result *r = &s->runs[at];
                if (sim_run(&s->cluster, s->pods[f].pods, s->pods[f].count, a->policies[p], a->seeds[k], a->load_pct,
                            a->quiet ? NULL : progress_cb, &pc, r)) {
                    fputs("gpuslice sim: out of memory during the run\n", stderr);
                    return 1;
                }
                pc.seconds_done += r->seconds;
                char eta[32];
                sim_format_eta(eta, sizeof eta, sim_eta_s(pc.seconds_done, pc.run, nruns));
                if (!a->quiet)
                    fprintf(stderr,
                            "%ssim: [%zu/%zu] %s %s seed %llu: alloc %.2f%% @100, %.2f%% @%d, "
                            "%zu/%zu placed, %.2f s, p99 %.0f us, %s\n",
                            pc.tty ? "\r" : "", pc.run, nruns, row->workload, row->policy, pc.seed, r->alloc_pct[100],
                            r->alloc_pct[a->load_pct], a->load_pct, r->placed, r->arrived, r->seconds,
                            r->decision_p99_us, eta);
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
            fprintf(stderr, "gpuslice sim: writing %s failed\n", s->csv_path);
            return 1;
        }
    }
    return a->plot ? run_plot(a, s->csv_path, a->num_seeds) : 0;
}

/* An output the run ends with (the plot, the summary) must be writable before
 * the simulation starts, not found unwritable minutes later. */
static int check_output(const char *path, const char *flag)
{
    char dir[PATH_MAX];
    struct stat st;
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    const char *why = NULL;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        why = "its directory does not exist";
    else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        why = "it is a directory";
    else if (access(path, F_OK) == 0 ? access(path, W_OK) != 0 : access(dir, W_OK | X_OK) != 0)
        why = "it cannot be written";
    if (!why)
        return 0;
    fprintf(stderr, "gpuslice sim: %s '%s': %s; nothing was simulated\n", flag, path, why);
    return 2;
}

static int check_outputs(const sim_args *a)
{
    if (a->plot && check_output(a->plot, "--plot") != 0)
        return 2;
    if (a->plot && access(a->plot_script, R_OK) != 0) {
        fprintf(stderr, "gpuslice sim: plot script %s: %s (give --plot-script)\n", a->plot_script, strerror(errno));
        return 2;
    }
    return a->summary ? check_output(a->summary, "--summary") : 0;
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
    rc = check_outputs(a);
    if (rc != 0) {
        free(a);
        return rc;
    }
    sim_state s;
    memset(&s, 0, sizeof(s));
    rc = load_inputs(a, &s);
    s.csv_path = a->csv;
    if (rc == 0 && a->plot && !a->csv) { /* the plot is drawn from the curves */
        snprintf(s.tmp_csv, sizeof(s.tmp_csv), "/tmp/gpuslice-sim-XXXXXX.csv");
        int fd = mkstemps(s.tmp_csv, 4);
        if (fd < 0) {
            fprintf(stderr, "gpuslice sim: cannot create a file for the plot's curves: %s\n", strerror(errno));
            s.tmp_csv[0] = '\0';
            rc = 1;
        } else {
            close(fd);
            s.csv_path = s.tmp_csv;
        }
    }
    if (rc == 0 && s.csv_path) {
        s.csv = fopen(s.csv_path, "w");
        if (!s.csv) {
            fprintf(stderr, "gpuslice sim: cannot write %s: %s\n", s.csv_path, strerror(errno));
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
