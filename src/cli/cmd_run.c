/* gpuslice run: start a command with the interposer preloaded and limits
 * set, wait for it, and return its status. All processes started with the
 * same --name share one set of limits (one "container"). */
#define _GNU_SOURCE
#include "cli.h"
#include "config.h"
#include "flags.h"
#include "limiter.h"
#include "run_checks.h"
#include "run_region.h"
#include "simulated_gpu.h"
#include "statedir.h"
#include "size_parse.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char run_usage[] = "Usage: gpuslice run [OPTIONS] -- COMMAND [ARGS...]\n"
                                "\n"
                                "Run COMMAND with libgpuslice.so preloaded, so that it and every process it\n"
                                "starts share the limits below. Runs started with the same --name share\n"
                                "one limit, like the processes of one container.\n"
                                "\n"
                                "Options:\n"
                                "  -m, --memory SIZE        GPU memory limit for every visible device, e.g.\n"
                                "                           4GiB, 512MiB, 8g; or per device: 0=4GiB,1=2GiB,\n"
                                "                           where an index counts the GPUs COMMAND sees (after\n"
                                "                           --device: with --device 1 that GPU is 0=); a limit\n"
                                "                           above the GPU's memory is refused\n"
                                "  -c, --cores PERCENT      compute limit, 1-100 (% of the GPU's time)\n"
                                "      --mode cap|share     cap: never above PERCENT; share: a weight under\n"
                                "                           contention, idle time usable (default cap)\n"
                                "      --weight N           share-mode weight, 1-10000 (default 100)\n"
                                "  -d, --device LIST        GPUs to expose: host indexes as nvidia-smi shows\n"
                                "                           them, or UUIDs (CUDA_VISIBLE_DEVICES syntax)\n"
                                "  -n, --name NAME          container name; runs with one name share limits\n"
                                "                           (default: run-<pid>, private to this run)\n"
                                "      --managed count|ignore  count managed memory against the limit (count)\n"
                                "      --state-dir DIR      where shared state lives (default: $GPUSLICE_STATE_DIR,\n"
                                "                           /run/gpuslice as root, else /tmp/gpuslice-<uid>)\n"
                                "      --lib PATH           interposer to preload (default: ../lib/libgpuslice.so\n"
                                "                           next to this program, or $GPUSLICE_LIB)\n"
                                "      --simulated-gpu SIZE run COMMAND on gpuslice's simulated driver, a GPU of\n"
                                "                           SIZE (e.g. 80GiB), for trying gpuslice without one;\n"
                                "                           runs naming one SIZE share one simulated GPU\n"
                                "  -h, --help               show this help\n"
                                "\n"
                                "Limits come from these options only: a GPUSLICE_* or CUDA_DEVICE_* limit\n"
                                "variable inherited from the environment (GPUSLICE_MEMORY_LIMIT_0, GPUSLICE_MANAGED,\n"
                                "...) is refused, and so is GPUSLICE_CTX_OVERHEAD=0. GPUs are counted through\n"
                                "NVML: --memory and --device must name GPUs that exist, and are refused where\n"
                                "NVML cannot be read. The library must be gpuslice's interposer. A --name run\n"
                                "with other limits than the container's is refused while it is in use.\n"
                                "\n"
                                "SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 are passed on to COMMAND; if gpuslice\n"
                                "run itself is killed, COMMAND gets SIGTERM.\n"
                                "\n"
                                "Exit status: COMMAND's own (128+N if killed by signal N); 2 bad options;\n"
                                "125 gpuslice could not set up; 126 COMMAND not executable; 127 not found.\n";

static volatile sig_atomic_t child_pid;

static void forward_signal(int sig)
{
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.'))
            return 0;
    }
    return s[0] != '.';
}

#define GS_MIB (1ULL << 20)

/* A byte count in the largest binary unit that holds it whole ("1GiB" for
 * 1073741824), for the hint to a bare number; -1 below 1 MiB or not whole. */
static int exact_unit(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = { "TiB", "GiB", "MiB" };
    for (int i = 0; i < 3; i++) {
        uint64_t unit = GS_MIB << (10 * (2 - i));
        if (bytes % unit == 0) {
            snprintf(buf, len, "%llu%s", (unsigned long long)(bytes / unit), units[i]);
            return 0;
        }
    }
    return -1;
}

/* One --memory size, checked here so that the message names the flag the
 * user typed. A bare number is refused: "--memory 4" is far more likely a
 * forgotten unit than a 4-byte limit ("4B" says bytes). */
static int check_memory_size(const char *size)
{
    char err[256];
    uint64_t bytes;
    size_t n = strlen(size);
    if (gs_parse_size(size, &bytes, err, sizeof err) != 0) {
        fprintf(stderr, "gpuslice run: --memory '%s': %s\n", size, err);
        return -1;
    }
    if (bytes == 0) {
        fprintf(stderr, "gpuslice run: --memory '%s': a limit must be above 0 (leave --memory out for none)\n", size);
        return -1;
    }
    if (n && size[n - 1] >= '0' && size[n - 1] <= '9') {
        char unit[GS_FORMAT_SIZE_MAX];
        if (bytes >= GS_MIB && exact_unit(bytes, unit, sizeof unit) == 0)
            fprintf(stderr, "gpuslice run: --memory '%s': no unit; if you meant %s bytes, write %s (or %sB)\n", size,
                    size, unit, size);
        else
            fprintf(stderr, "gpuslice run: --memory '%s': no unit; write %sGiB or %sMiB (%sB for bytes)\n", size, size,
                    size, size);
        return -1;
    }
    return 0;
}

/* "4GiB" -> GPUSLICE_MEMORY_LIMIT; "0=4GiB,1=2GiB" -> GPUSLICE_MEMORY_LIMIT_<i>,
 * with the indexes given in *mask. */
static int set_memory(const char *spec, unsigned *mask)
{
    if (!strchr(spec, '=')) {
        if (check_memory_size(spec) != 0)
            return -1;
        return setenv("GPUSLICE_MEMORY_LIMIT", spec, 1);
    }
    unsigned seen = 0;
    char *copy = strdup(spec);
    char *save = NULL;
    int rc = 0;
    for (char *item = strtok_r(copy, ",", &save); item && rc == 0; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        char *end = NULL;
        long idx = eq ? strtol(item, &end, 10) : -1;
        if (!eq || end != eq || eq == item || idx < 0 || idx >= GS_MAX_DEVICES) {
            fprintf(stderr, "gpuslice run: --memory item '%s': expected INDEX=SIZE with INDEX 0-%d\n", item,
                    GS_MAX_DEVICES - 1);
            rc = -1;
        } else if (seen & (1U << idx)) {
            fprintf(stderr, "gpuslice run: --memory '%s': device %ld is given twice\n", spec, idx);
            rc = -1;
        } else if (check_memory_size(eq + 1) != 0) {
            rc = -1;
        } else {
            seen |= 1U << idx;
            char var[64];
            snprintf(var, sizeof var, "GPUSLICE_MEMORY_LIMIT_%ld", idx);
            rc = setenv(var, eq + 1, 1);
        }
    }
    free(copy);
    *mask = seen;
    return rc;
}

static int set_cores(const char *text)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || !end || *end || end == text || v < 1 || v > 100) {
        fprintf(stderr, "gpuslice run: --cores '%s': expected a whole percentage from 1 to 100\n", text);
        return -1;
    }
    return setenv("GPUSLICE_CORES", text, 1);
}

static int set_weight(const char *text)
{
    int weight;
    if (gs_flag_int("gpuslice run", "weight", text, 1, (int)GS_LIM_MAX_WEIGHT, &weight) != 0)
        return -1;
    return setenv("GPUSLICE_SHARE_WEIGHT", text, 1);
}

static int find_lib(const char *given, char *out, size_t len)
{
    const char *env = getenv("GPUSLICE_LIB");
    if (given)
        snprintf(out, len, "%s", given);
    else if (env && *env)
        snprintf(out, len, "%s", env);
    else {
        char dir[PATH_MAX];
        if (gs_cli_self_dir(dir, sizeof dir) != 0 ||
            (size_t)snprintf(out, len, "%.*s/../lib/libgpuslice.so", (int)(len - 32), dir) >= len)
            return -1;
    }
    char resolved[PATH_MAX];
    if (!realpath(out, resolved) || access(resolved, R_OK) != 0) {
        fprintf(stderr, "gpuslice run: interposer library not found at %s (use --lib or GPUSLICE_LIB)\n", out);
        return -1;
    }
    snprintf(out, len, "%s", resolved);
    return 0;
}

static int run_child(char **cmd, const char *region_path, int private_region, int lock_fd)
{
    struct sigaction sa = { .sa_handler = forward_signal };
    sigemptyset(&sa.sa_mask);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("gpuslice run: fork");
        return GS_EXIT_SETUP;
    }
    if (pid == 0) {
        /* If gpuslice run itself is killed (SIGKILL cannot be forwarded), the
         * job must not live on unsupervised: it gets SIGTERM. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(GS_EXIT_SETUP); /* the parent died before prctl took effect */
        execvp(cmd[0], cmd);
        int e = errno;
        fprintf(stderr, "gpuslice run: cannot run '%s': %s\n", cmd[0], strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    child_pid = pid;
    /* The terminal signals the whole process group; the child gets those
     * itself. Signals sent to us alone are passed on. */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("gpuslice run: waitpid");
            return GS_EXIT_SETUP;
        }
    }
    close(lock_fd); /* our hold on the region: its processes are gone */
    if (private_region) {
        /* Once the last process of a private run has gone, its state goes too. */
        char err[512];
        gs_cli_remove_unused_region(region_path, NULL, err, sizeof err);
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

struct run_opts {
    const char *name, *state_dir, *lib, *simulated;
    int have_limit, share, cores_given, weight_given;
    struct gs_run_request req;
};

/* One option; 0, 1 for --help (printed), or -1 (an error printed). */
static int take_option(int c, struct run_opts *o)
{
    switch (c) {
    case 'm':
        if (o->req.memory_flag) {
            /* each --memory sets its own variables: a second one would
             * leave the first one's limits on devices it does not check */
            fprintf(stderr,
                    "gpuslice run: --memory given twice ('%s', then '%s'): give every device's limit in one, "
                    "e.g. --memory 0=4GiB,1=2GiB\n",
                    o->req.memory_flag, optarg);
            return -1;
        }
        if (set_memory(optarg, &o->req.per_device_mask) != 0)
            return -1;
        o->req.memory_flag = optarg;
        o->have_limit = 1;
        return 0;
    case 'c': o->cores_given = o->have_limit = 1; return set_cores(optarg);
    case 'd': o->req.device_flag = optarg; return setenv("CUDA_VISIBLE_DEVICES", optarg, 1);
    case 'n':
        if (!valid_name(optarg)) {
            fprintf(stderr, "gpuslice run: --name '%s': use 1-64 letters, digits, '.', '_' or '-'\n", optarg);
            return -1;
        }
        o->name = optarg;
        return 0;
    case 'M':
        if (strcmp(optarg, "cap") != 0 && strcmp(optarg, "share") != 0) {
            fprintf(stderr, "gpuslice run: --mode '%s': expected cap or share\n", optarg);
            return -1;
        }
        o->share = strcmp(optarg, "share") == 0;
        o->have_limit = 1;
        return setenv("GPUSLICE_COMPUTE_MODE", optarg, 1);
    case 'G':
        if (strcmp(optarg, "count") != 0 && strcmp(optarg, "ignore") != 0) {
            fprintf(stderr, "gpuslice run: --managed '%s': expected count or ignore\n", optarg);
            return -1;
        }
        return setenv("GPUSLICE_MANAGED", optarg, 1);
    case 'W': o->weight_given = o->have_limit = 1; return set_weight(optarg);
    case 'S': o->state_dir = optarg; return 0;
    case 'L': o->lib = optarg; return 0;
    case 'X': o->simulated = optarg; return gs_simgpu_size_ok("run", optarg);
    case 'h': fputs(run_usage, stdout); return 1;
    default: return -1; /* reported by parse_options */
    }
}

/* 0 to go on, else the exit status (help: 0 after printing). */
static int parse_options(int argc, char **argv, struct run_opts *o, int *status)
{
    static const struct option opts[] = {
        { "memory", required_argument, NULL, 'm' }, { "cores", required_argument, NULL, 'c' },
        { "device", required_argument, NULL, 'd' }, { "name", required_argument, NULL, 'n' },
        { "mode", required_argument, NULL, 'M' },   { "managed", required_argument, NULL, 'G' },
        { "weight", required_argument, NULL, 'W' }, { "state-dir", required_argument, NULL, 'S' },
        { "lib", required_argument, NULL, 'L' },    { "simulated-gpu", required_argument, NULL, 'X' },
        { "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 }
    };
    optind = 1;
    int c;
    *status = GS_EXIT_USAGE;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:m:c:d:n:h", opts, NULL)) != -1) {
        if (c == '?' || c == ':') {
            gs_cli_bad_option("run", c, argv, opts);
            return -1;
        }
        int rc = take_option(c, o);
        if (rc < 0)
            gs_cli_usage_hint("run");
        if (rc != 0) {
            *status = rc > 0 ? 0 : GS_EXIT_USAGE;
            return -1;
        }
    }
    if (optind >= argc) {
        gs_cli_usage_error("run", "no command given (gpuslice run [OPTIONS] -- COMMAND [ARGS...])");
        return -1;
    }
    if (o->share && o->cores_given) {
        gs_cli_usage_error("run", "--cores sets a cap, --mode share a weight: give one of them "
                                  "(--mode share --weight N)");
        return -1;
    }
    if (o->weight_given && !o->share) {
        gs_cli_usage_error("run", "--weight applies only with --mode share");
        return -1;
    }
    return 0;
}

/* The state directory and the region path of the run's container. */
static int region_path(struct run_opts *o, char *auto_name, size_t auto_len, char *region, size_t len)
{
    char dir[PATH_MAX];
    if (gs_cli_state_dir("run", o->state_dir, 1, dir, sizeof dir) != 0)
        return GS_EXIT_SETUP;
    if (!o->name) {
        snprintf(auto_name, auto_len, "run-%d", (int)getpid());
        o->name = auto_name;
    }
    if (o->name == auto_name)
        gs_cli_sweep_private_regions(dir);
    if (gs_statedir_region_path(region, len, dir, o->name) != 0) {
        fprintf(stderr, "gpuslice run: --name '%s' makes a path too long under %s\n", o->name, dir);
        return GS_EXIT_USAGE;
    }
    return 0;
}

/* The simulated driver for --simulated-gpu, its state beside the region;
 * else a note when there is no driver at all. */
static int choose_driver(struct run_opts *o, const char *region)
{
    if (!o->simulated) {
        if (!o->req.memory_flag && !o->req.device_flag) /* else the GPU check says it */
            gs_run_note_no_driver();
        return 0;
    }
    char dir[PATH_MAX + 80];
    snprintf(dir, sizeof dir, "%s", region);
    char *slash = strrchr(dir, '/'); /* region_path made it DIR/NAME.region */
    if (slash)
        *slash = '\0';
    return gs_run_use_simulated(o->simulated, dir, &o->req);
}

/* Check the whole configuration exactly as the interposer will, so a bad
 * value stops us here, and the interposer and the GPUs it would limit. */
static int check_setup(const char *lib, struct gs_config *cfg, struct gs_run_request *req)
{
    char err[512];
    extern char **environ;
    if (gs_config_load(cfg, gs_getenv_process, NULL, err, sizeof err) != 0 ||
        gs_config_check_unknown(environ, err, sizeof err) != 0) {
        /* err reads "gpuslice: VAR='value': why", the interposer's words */
        fprintf(stderr, "gpuslice run: %s\n", gs_cli_drop_prefix(err));
        return GS_EXIT_USAGE;
    }
    memcpy(req->mem_limit, cfg->mem_limit, sizeof req->mem_limit);
    if (gs_run_check_gpus(req) != 0)
        return GS_EXIT_USAGE;
    if (gs_run_verify_lib(lib) != 0)
        return GS_EXIT_SETUP;
    return 0;
}

int gs_cmd_run(int argc, char **argv)
{
    extern char **environ;
    struct run_opts o = { 0 };
    int status = 0;
    if (gs_run_refuse_inherited(environ) != 0)
        return GS_EXIT_USAGE;
    if (parse_options(argc, argv, &o, &status) != 0)
        return status;
    if (!o.have_limit)
        fprintf(stderr, "gpuslice run: note: no --memory or --cores given; usage is tracked, not limited\n");

    char region[PATH_MAX + 80], lib[PATH_MAX], auto_name[32];
    int private_region = o.name == NULL;
    int rc = region_path(&o, auto_name, sizeof auto_name, region, sizeof region);
    if (rc)
        return rc;
    rc = choose_driver(&o, region);
    if (rc)
        return rc;
    if (find_lib(o.lib, lib, sizeof lib) != 0)
        return GS_EXIT_SETUP;
    if (setenv("GPUSLICE_REGION", region, 1) || setenv("GPUSLICE_CONTAINER", o.name, 1))
        return GS_EXIT_SETUP;
    struct gs_config cfg;
    rc = check_setup(lib, &cfg, &o.req);
    if (rc)
        return rc;
    if (gs_run_prepend_preload(lib) != 0)
        return GS_EXIT_SETUP;
    int lock_fd = -1;
    rc = gs_run_attach_region(region, o.name, &cfg, &lock_fd);
    if (rc)
        return rc;
    return run_child(argv + optind, region, private_region, lock_fd);
}
