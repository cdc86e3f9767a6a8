/* gpuslice run: start a command with the interposer preloaded and limits
 * set, wait for it, and return its status. All processes started with the
 * same --name share one set of limits (one "container"). */
#define _GNU_SOURCE
#include "cli.h"
#include "config.h"
#include "flags.h"
#include "region.h"
#include "region_view.h"
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
                                "                           4GiB, 512MiB, 8g; or per device: 0=4GiB,1=2GiB\n"
                                "  -c, --cores PERCENT      compute limit, 1-100 (% of the GPU's time)\n"
                                "      --mode cap|share     cap: never above PERCENT; share: a weight under\n"
                                "                           contention, idle time usable (default cap)\n"
                                "      --weight N           share-mode weight, 1-10000 (default 100)\n"
                                "  -d, --device LIST        devices to expose (CUDA_VISIBLE_DEVICES syntax)\n"
                                "  -n, --name NAME          container name; runs with one name share limits\n"
                                "                           (default: run-<pid>, private to this run)\n"
                                "      --managed count|ignore  count managed memory against the limit (count)\n"
                                "      --state-dir DIR      where shared state lives (default: $GPUSLICE_STATE_DIR,\n"
                                "                           /run/gpuslice as root, else /tmp/gpuslice-<uid>)\n"
                                "      --lib PATH           interposer to preload (default: ../lib/libgpuslice.so\n"
                                "                           next to this program, or $GPUSLICE_LIB)\n"
                                "  -h, --help               show this help\n"
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
        fprintf(stderr, "gpuslice run: --memory '%s': no unit; write %sGiB or %sMiB (%sB for bytes)\n", size, size,
                size, size);
        return -1;
    }
    return 0;
}

/* "4GiB" -> GPUSLICE_MEMORY_LIMIT; "0=4GiB,1=2GiB" -> GPUSLICE_MEMORY_LIMIT_<i>. */
static int set_memory(const char *spec)
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
    if (gs_flag_int("gpuslice run", "weight", text, 1, 10000, &weight) != 0)
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

static int prepend_preload(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    if (!old || !*old)
        return setenv("LD_PRELOAD", lib, 1);
    if (strstr(old, lib))
        return 0;
    size_t n = strlen(lib) + strlen(old) + 2;
    char *v = malloc(n);
    if (!v)
        return -1;
    snprintf(v, n, "%s:%s", lib, old);
    int rc = setenv("LD_PRELOAD", v, 1);
    free(v);
    return rc;
}

/* A named container's limits are those of the run that created it. A later
 * run with other limits starts it afresh when no process uses it, and is
 * refused while one does: two limits for one container cannot both hold.
 * A run with the same limits joins it, even one started a moment after the
 * first (whose processes may not hold a slot yet). */
/* 1 when every device has the same memory limit (and, with cores, the same
 * compute cap) as device 0: limits a region can compare or record. */
static int same_on_every_device(const struct gs_config *cfg, int cores)
{
    for (int i = 1; i < GS_MAX_DEVICES; i++)
        if (cfg->mem_limit[i] != cfg->mem_limit[0] || (cores && cfg->sm_limit[i] != cfg->sm_limit[0]))
            return 0;
    return 1;
}

static int limits_differ(const struct gs_region_view *v, const struct gs_config *cfg, char *what, size_t len)
{
    if (!same_on_every_device(cfg, 1))
        return 0; /* per-device limits: ordinals are the process's own, not comparable here */
    for (uint32_t d = 0; d < v->r.ndevices; d++) {
        const struct gs_region_device *dv = &v->r.dev[d];
        if (dv->mem_limit != cfg->mem_limit[0]) {
            char have[GS_FORMAT_SIZE_MAX] = "none", want[GS_FORMAT_SIZE_MAX] = "none";
            if (dv->mem_limit)
                gs_format_size(dv->mem_limit, have, sizeof have);
            if (cfg->mem_limit[0])
                gs_format_size(cfg->mem_limit[0], want, sizeof want);
            snprintf(what, len, "a memory limit of %s on %s; this run asks for %s", have, dv->uuid, want);
            return 1;
        }
        if (cfg->compute_mode == GS_COMPUTE_CAP && dv->sm_limit != cfg->sm_limit[0]) {
            snprintf(what, len, "a compute cap of %u%% on %s; this run asks for %u%%",
                     dv->sm_limit ? dv->sm_limit : 100, dv->uuid, cfg->sm_limit[0] ? cfg->sm_limit[0] : 100);
            return 1;
        }
    }
    return 0;
}

static int reconcile_named(const char *path, const char *name, const struct gs_config *cfg)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    char err[512], what[300];
    struct gs_region_view *v = gs_region_view_open(path, err, sizeof err);
    if (!v) {
        fprintf(stderr, "gpuslice run: %s\n  If no process uses container '%s', remove the file and run again.\n", err,
                name);
        return GS_EXIT_SETUP;
    }
    int differ = limits_differ(v, cfg, what, sizeof what);
    gs_region_view_free(v);
    if (!differ)
        return 0;
    int live = 0;
    if (gs_cli_remove_unused_region(path, &live, err, sizeof err) != 0) {
        fprintf(stderr, "gpuslice run: %s\n", err);
        return GS_EXIT_SETUP;
    }
    if (!live)
        return 0; /* removed: this run sets the limits */
    fprintf(stderr,
            "gpuslice run: container '%s' is in use by %d process%s with %s.\n"
            "  Run it with the same limits, stop the container's processes to change them, or use another --name.\n",
            name, live, live == 1 ? "" : "es", what);
    return GS_EXIT_USAGE;
}

/* The state directory holds the regions whose limits every run trusts. One that
 * another user owns or may write (a /tmp/gpuslice-<uid> created before ours, or a
 * symbolic link to one) would let that user set our limits: refuse it. */
static int check_state_dir(const char *dir)
{
    struct stat st;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (fd < 0) {
        int e = errno;

        fprintf(stderr, "gpuslice run: state directory %s: %s\n", dir,
                e == ELOOP || e == ENOTDIR ? "not a directory (a symbolic link or a file); remove it" : strerror(e));
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        fprintf(stderr, "gpuslice run: state directory %s: %s\n", dir, strerror(errno));
        close(fd);
        return -1;
    }
    close(fd);
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        fprintf(stderr,
                "gpuslice run: state directory %s is owned by uid %u, mode %04o, not by you (uid %u) "
                "or root; another user may have made it to control your limits: remove it or set "
                "GPUSLICE_STATE_DIR\n",
                dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        fprintf(stderr,
                "gpuslice run: state directory %s (owner uid %u) has mode %04o, which lets other users "
                "write to it: chmod go-w it or set GPUSLICE_STATE_DIR\n",
                dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        return -1;
    }
    return 0;
}

static int run_child(char **cmd, const char *region_path, int private_region)
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
    if (private_region) {
        /* Once the last process of a private run has gone, its state goes too. */
        char err[512];
        gs_cli_remove_unused_region(region_path, NULL, err, sizeof err);
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

int gs_cmd_run(int argc, char **argv)
{
    static const struct option opts[] = { { "memory", required_argument, NULL, 'm' },
                                          { "cores", required_argument, NULL, 'c' },
                                          { "device", required_argument, NULL, 'd' },
                                          { "name", required_argument, NULL, 'n' },
                                          { "mode", required_argument, NULL, 'M' },
                                          { "managed", required_argument, NULL, 'G' },
                                          { "weight", required_argument, NULL, 'W' },
                                          { "state-dir", required_argument, NULL, 'S' },
                                          { "lib", required_argument, NULL, 'L' },
                                          { "help", no_argument, NULL, 'h' },
                                          { NULL, 0, NULL, 0 } };
    const char *name = NULL, *state_dir = NULL, *lib_arg = NULL;
    int have_limit = 0, share = 0, cores_given = 0, weight_given = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "+m:c:d:n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (set_memory(optarg) != 0)
                return GS_EXIT_USAGE;
            have_limit = 1;
            break;
        case 'c':
            if (set_cores(optarg) != 0)
                return GS_EXIT_USAGE;
            cores_given = 1;
            have_limit = 1;
            break;
        case 'd': setenv("CUDA_VISIBLE_DEVICES", optarg, 1); break;
        case 'n':
            if (!valid_name(optarg)) {
                fprintf(stderr, "gpuslice run: --name '%s': use 1-64 letters, digits, '.', '_' or '-'\n", optarg);
                return GS_EXIT_USAGE;
            }
            name = optarg;
            break;
        case 'M':
            if (strcmp(optarg, "cap") != 0 && strcmp(optarg, "share") != 0) {
                fprintf(stderr, "gpuslice run: --mode '%s': expected cap or share\n", optarg);
                return GS_EXIT_USAGE;
            }
            setenv("GPUSLICE_COMPUTE_MODE", optarg, 1);
            share = strcmp(optarg, "share") == 0;
            have_limit = 1;
            break;
        case 'G':
            if (strcmp(optarg, "count") != 0 && strcmp(optarg, "ignore") != 0) {
                fprintf(stderr, "gpuslice run: --managed '%s': expected count or ignore\n", optarg);
                return GS_EXIT_USAGE;
            }
            setenv("GPUSLICE_MANAGED", optarg, 1);
            break;
        case 'W':
            if (set_weight(optarg) != 0)
                return GS_EXIT_USAGE;
            weight_given = 1;
            have_limit = 1;
            break;
        case 'S': state_dir = optarg; break;
        case 'L': lib_arg = optarg; break;
        case 'h': fputs(run_usage, stdout); return 0;
        default: fputs(run_usage, stderr); return GS_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "gpuslice run: no command given\n\n%s", run_usage);
        return GS_EXIT_USAGE;
    }
    if (share && cores_given) {
        fprintf(stderr, "gpuslice run: --cores sets a cap, --mode share a weight: give one of them "
                        "(--mode share --weight N)\n");
        return GS_EXIT_USAGE;
    }
    if (weight_given && !share) {
        fprintf(stderr, "gpuslice run: --weight applies only with --mode share\n");
        return GS_EXIT_USAGE;
    }
    if (!have_limit)
        fprintf(stderr, "gpuslice run: note: no --memory or --cores given; usage is tracked, not limited\n");

    char dir[PATH_MAX], region[PATH_MAX + 80], lib[PATH_MAX], auto_name[32];
    if (state_dir)
        snprintf(dir, sizeof dir, "%s", state_dir);
    else
        gs_statedir_default(dir, sizeof dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "gpuslice run: cannot create state directory %s: %s\n", dir, strerror(errno));
        return GS_EXIT_SETUP;
    }
    if (check_state_dir(dir) != 0)
        return GS_EXIT_SETUP;
    int private_region = name == NULL;
    if (!name) {
        snprintf(auto_name, sizeof auto_name, "run-%d", (int)getpid());
        name = auto_name;
    }
    if (gs_statedir_region_path(region, sizeof region, dir, name) != 0) {
        fprintf(stderr, "gpuslice run: --name '%s' makes a path too long under %s\n", name, dir);
        return GS_EXIT_USAGE;
    }
    if (find_lib(lib_arg, lib, sizeof lib) != 0)
        return GS_EXIT_SETUP;
    if (setenv("GPUSLICE_REGION", region, 1) || setenv("GPUSLICE_CONTAINER", name, 1) || prepend_preload(lib))
        return GS_EXIT_SETUP;

    /* Check the whole configuration exactly as the interposer will, so a bad
     * value (ours or one inherited from the environment) stops us here. */
    struct gs_config cfg;
    char err[512];
    extern char **environ;
    if (gs_config_load(&cfg, gs_getenv_process, NULL, err, sizeof err) != 0 ||
        gs_config_check_unknown(environ, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err); /* already says "gpuslice: VAR='value': why" */
        return GS_EXIT_USAGE;
    }
    if (!private_region) {
        int rc = reconcile_named(region, name, &cfg);
        if (rc)
            return rc;
    }
    struct gs_region *r = gs_region_open(region, 1, NULL, err, sizeof err);
    if (!r) {
        fprintf(stderr, "gpuslice run: %s\n", err);
        return GS_EXIT_SETUP;
    }
    if (!r->container[0])
        snprintf(r->container, sizeof r->container, "%s", name);
    /* What `gpuslice top` shows before the first process touches a GPU. */
    if (same_on_every_device(&cfg, 0) && !r->default_limit_mib && cfg.mem_limit[0] >> 20 <= UINT32_MAX)
        r->default_limit_mib = (uint32_t)(cfg.mem_limit[0] >> 20);
    gs_region_close(r, -1);
    return run_child(argv + optind, region, private_region);
}
