/* Command-line options of `gpuslice sim`. */
#ifndef GPUSLICE_SIM_ARGS_H
#define GPUSLICE_SIM_ARGS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "policy.h"

#define SIM_MAX_SEEDS 1000
#define SIM_MAX_PODFILES 32
#define SIM_MAX_LOAD 1000

typedef struct sim_args {
    char trace_dir[1024];
    char installed_plot[PATH_MAX + 64]; /* the plot script of an installed gpuslice */
    char nodes[1024];
    bool nodes_given;
    const char *pods[SIM_MAX_PODFILES];
    int num_pods_files;
    char pods_buf[8192];
    gs_policy_kind policies[GS_POLICY_COUNT];
    int num_policies;
    uint64_t seeds[SIM_MAX_SEEDS];
    int num_seeds;
    int load_pct;
    const char *csv, *summary, *plot, *plot_script, *python, *label;
    bool quiet, help;
} sim_args;

/* Parses argv (argv[0] is the command name). Returns 0, or 2 after
 * printing a usage error to err. */
int sim_args_parse(int argc, char **argv, sim_args *a, FILE *err);
void sim_usage(FILE *out);

#endif
