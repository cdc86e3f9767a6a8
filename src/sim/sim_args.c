/* Flag parsing for `gpuslice sim`: every bad value is reported by name. */
#include "sim_args.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_mix.h"
#include "suggest.h"

#ifndef GPUSLICE_TRACE_DIR
#define GPUSLICE_TRACE_DIR "../shared/traces/openb"
#endif
#ifndef GPUSLICE_PLOT_SCRIPT
#define GPUSLICE_PLOT_SCRIPT "bench/sim/plot_sim.py"
#endif

void sim_usage(FILE *out)
{
    fputs("NAME\n"
          "    gpuslice sim - replay a GPU cluster trace under scheduling policies\n"
          "\n"
          "SYNOPSIS\n"
          "    gpuslice sim [--trace-dir DIR] [--nodes FILE] [--pods LIST[,LIST...]]\n"
          "                 [--policy NAME[,NAME...]] [--seeds A-B|A,B,...] [--load PCT]\n"
          "                 [--csv OUT] [--summary OUT] [--plot OUT.png] [--label TEXT]\n"
          "                 [--plot-script PATH] [--python PATH] [--quiet]\n"
          "\n"
          "DESCRIPTION\n"
          "    Follows the FGD artifact's protocol (USENIX ATC'23): shuffle the pod list with\n"
          "    the seed, append pods sampled with replacement while the GPU request stays\n"
          "    within PCT % of the cluster's GPU capacity (a list asking for more loses\n"
          "    random pods), order the nodes at random, schedule in order with no\n"
          "    departures (a pod that fits nowhere is dropped). A pod's GPU request is\n"
          "    num_gpu x 1000 milli-GPU, or gpu_milli for a shared GPU. Node CPU and\n"
          "    memory bind; gpu_spec restricts the GPU model. The allocated share at k %\n"
          "    is the mean over the pods whose arrival brings the GPU request to k % of\n"
          "    capacity (rounded). A summary (mean and sd over seeds at 100 % and PCT %)\n"
          "    goes to stdout.\n"
          "\n"
          "OPTIONS (--opt value or --opt=value)\n"
          "    --trace-dir DIR   directory of the openb CSVs (default: $GPUSLICE_TRACE_DIR,\n"
          "                      else ../shared/traces/openb beside the repository:\n"
          "                      " GPUSLICE_TRACE_DIR ")\n"
          "    --nodes FILE      node list (default: DIR/openb_node_list_gpu_node.csv)\n"
          "    --pods LISTS      pod lists, comma-separated: a short name (default,\n"
          "                      gpushare40, ...) or file name in DIR, or a path with '/';\n"
          "                      NAME+cpuX adds CPU-only pods sampled from the list until\n"
          "                      their CPU is X times the list's own (default: default)\n"
          "    --policy NAMES    binpack, spread, bestfit, fgd, fraglook, or 'all'\n"
          "                      (default: all)\n"
          "    --seeds SPEC      seed range A-B or list A,B,C (default: 42-51)\n"
          "    --load PCT        arrived GPU request to reach, % of capacity (default 130)\n"
          "    --csv OUT         per-seed curves: workload,policy,seed,arrived_pct,alloc_pct\n"
          "    --summary OUT     also write the summary table (Markdown) to OUT\n"
          "    --plot OUT.png    plot the mean curves per policy (runs the plot script)\n"
          "    --label TEXT      line put at the top of the summary (date, machine, commit)\n"
          "    --plot-script P   plot script (default: " GPUSLICE_PLOT_SCRIPT ")\n"
          "    --python PATH     Python with matplotlib (default: /usr/bin/python3)\n"
          "    --quiet           no progress on stderr\n"
          "    --help            this text\n"
          "\n"
          "EXIT STATUS\n"
          "    0 success, 1 runtime error (unreadable or malformed file), 2 usage error.\n",
          out);
}

/* what + quoted arg, e.g. "unknown option '--x'". */
#define SIM_HINT "Try 'gpuslice sim --help' for more information.\n"

static int usage_error(FILE *err, const char *what, const char *arg)
{
    fprintf(err, "gpuslice sim: %s '%s'\n" SIM_HINT, what, arg);
    return 2;
}

/* The options, for "did you mean" only: the parser below decides. */
static const char *const sim_flags[] = { "--trace-dir", "--nodes", "--pods",        "--policy", "--seeds",
                                         "--load",      "--csv",   "--summary",     "--plot",   "--label",
                                         "--python",    "--quiet", "--plot-script", "--help",   NULL };

static int unknown_option(FILE *err, const char *flag)
{
    const char *near = gs_suggest(flag, strlen(flag), sim_flags);
    if (!near)
        return usage_error(err, "unknown option", flag);
    fprintf(err, "gpuslice sim: unknown option '%s'; did you mean %s?\n" SIM_HINT, flag, near);
    return 2;
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_seeds(const char *spec, sim_args *a)
{
    char buf[4096];
    if (strlen(spec) >= sizeof(buf) || !*spec)
        return -1;
    strcpy(buf, spec);
    a->num_seeds = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *dash = strchr(tok, '-');
        uint64_t lo, hi;
        if (dash) {
            *dash = '\0';
            if (parse_u64(tok, &lo) || parse_u64(dash + 1, &hi) || hi < lo)
                return -1;
        } else if (parse_u64(tok, &lo)) {
            return -1;
        } else {
            hi = lo;
        }
        for (uint64_t s = lo; s <= hi; s++) {
            if (a->num_seeds == SIM_MAX_SEEDS)
                return -1;
            a->seeds[a->num_seeds++] = s;
            if (s == UINT64_MAX)
                break;
        }
    }
    return a->num_seeds > 0 ? 0 : -1;
}

static int parse_policies(const char *spec, sim_args *a)
{
    char buf[512];
    if (strlen(spec) >= sizeof(buf) || !*spec)
        return -1;
    strcpy(buf, spec);
    a->num_policies = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "all") == 0) {
            for (int i = 0; i < GS_POLICY_COUNT && a->num_policies < GS_POLICY_COUNT; i++)
                a->policies[a->num_policies++] = (gs_policy_kind)i;
            continue;
        }
        gs_policy_kind k;
        if (gs_policy_parse(tok, &k) != 0 || a->num_policies == GS_POLICY_COUNT)
            return -1;
        a->policies[a->num_policies++] = k;
    }
    return a->num_policies > 0 ? 0 : -1;
}

static int parse_pods(const char *spec, sim_args *a)
{
    if (strlen(spec) >= sizeof(a->pods_buf) || !*spec)
        return -1;
    strcpy(a->pods_buf, spec);
    a->num_pods_files = 0;
    char *save = NULL;
    for (char *tok = strtok_r(a->pods_buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char name[1024];
        double mix;
        if (a->num_pods_files == SIM_MAX_PODFILES || sim_cpu_mix_spec(tok, name, sizeof(name), &mix) != 0)
            return -1;
        a->pods[a->num_pods_files++] = tok;
    }
    return a->num_pods_files > 0 ? 0 : -1;
}

static int set_path(char *dst, size_t cap, const char *src)
{
    if (strlen(src) >= cap || !*src)
        return -1;
    strcpy(dst, src);
    return 0;
}

/* An installed gpuslice (cmake --install) finds its plot script and trace
 * folder in <prefix>/share/gpuslice beside <prefix>/bin; a build tree's
 * gpuslice, which has none there, uses the checkout's (the #defines above). */
static void set_installed_paths(sim_args *a)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    if ((size_t)snprintf(a->installed_plot, sizeof a->installed_plot, "%s/../share/gpuslice/plot_sim.py", exe) >=
            sizeof a->installed_plot ||
        access(a->installed_plot, R_OK) != 0)
        return;
    if ((size_t)snprintf(a->trace_dir, sizeof a->trace_dir, "%.*s/../share/gpuslice/traces/openb",
                         (int)(sizeof a->trace_dir - 64), exe) < sizeof a->trace_dir)
        a->plot_script = a->installed_plot;
    else
        snprintf(a->trace_dir, sizeof(a->trace_dir), "%s", GPUSLICE_TRACE_DIR);
}

static void set_defaults(sim_args *a)
{
    memset(a, 0, sizeof(*a));
    snprintf(a->trace_dir, sizeof(a->trace_dir), "%s", GPUSLICE_TRACE_DIR);
    a->plot_script = GPUSLICE_PLOT_SCRIPT;
    set_installed_paths(a);
    const char *env = getenv("GPUSLICE_TRACE_DIR");
    if (env && *env)
        snprintf(a->trace_dir, sizeof(a->trace_dir), "%s", env);
    a->load_pct = 130;
    a->python = "/usr/bin/python3";
    parse_policies("all", a);
    parse_seeds("42-51", a);
}

int sim_args_parse(int argc, char **argv, sim_args *a, FILE *err)
{
    set_defaults(a);
    const char *pods = "default";
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
            a->help = true;
            return 0;
        }
        if (strcmp(flag, "--quiet") == 0) {
            a->quiet = true;
            continue;
        }
        if (strncmp(flag, "--", 2) != 0)
            return usage_error(err, "unexpected argument", flag);
        /* --opt=value and --opt value alike. */
        char name[64];
        const char *v;
        const char *eq = strchr(flag, '=');
        if (eq) {
            if ((size_t)(eq - flag) >= sizeof(name))
                return unknown_option(err, flag);
            memcpy(name, flag, (size_t)(eq - flag));
            name[eq - flag] = '\0';
            flag = name;
            v = eq + 1;
        } else if (i + 1 >= argc) {
            return usage_error(err, "missing value for option", flag);
        } else {
            v = argv[++i];
        }
        int bad = 0;
        if (strcmp(flag, "--trace-dir") == 0)
            bad = set_path(a->trace_dir, sizeof(a->trace_dir), v);
        else if (strcmp(flag, "--nodes") == 0) {
            bad = set_path(a->nodes, sizeof(a->nodes), v);
            a->nodes_given = !bad;
        } else if (strcmp(flag, "--pods") == 0)
            pods = v;
        else if (strcmp(flag, "--policy") == 0)
            bad = parse_policies(v, a);
        else if (strcmp(flag, "--seeds") == 0)
            bad = parse_seeds(v, a);
        else if (strcmp(flag, "--load") == 0) {
            uint64_t pct;
            bad = parse_u64(v, &pct) || pct < 100 || pct > SIM_MAX_LOAD;
            a->load_pct = bad ? a->load_pct : (int)pct;
        } else if (strcmp(flag, "--csv") == 0)
            a->csv = v;
        else if (strcmp(flag, "--summary") == 0)
            a->summary = v;
        else if (strcmp(flag, "--plot") == 0)
            a->plot = v;
        else if (strcmp(flag, "--plot-script") == 0)
            a->plot_script = v;
        else if (strcmp(flag, "--python") == 0)
            a->python = v;
        else if (strcmp(flag, "--label") == 0)
            a->label = v;
        else
            return unknown_option(err, flag);
        if (bad) {
            fprintf(err, "gpuslice sim: bad value '%s' for %s", v, flag);
            if (strcmp(flag, "--policy") == 0)
                fputs(" (names: binpack, spread, bestfit, fgd, fraglook, all)", err);
            else if (strcmp(flag, "--seeds") == 0)
                fputs(" (use A-B or A,B,C; at most 1000 seeds)", err);
            else if (strcmp(flag, "--load") == 0)
                fputs(" (an integer percent, 100-1000)", err);
            fputs("\n" SIM_HINT, err);
            return 2;
        }
    }
    if (parse_pods(pods, a) != 0)
        return usage_error(err, "bad value for --pods (LIST[+cpuX][,...], X > 1):", pods);
    if (!a->nodes[0] &&
        snprintf(a->nodes, sizeof(a->nodes), "%s/openb_node_list_gpu_node.csv", a->trace_dir) >= (int)sizeof(a->nodes))
        return usage_error(err, "trace directory path too long:", a->trace_dir);
    return 0;
}
