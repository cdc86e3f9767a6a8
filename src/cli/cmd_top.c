/* gpuslice top: every container's GPU memory use against its limit, from a
 * private snapshot of each region (region_view.h: tenant files are hostile
 * input), counting only processes that are alive now. */
#define _GNU_SOURCE
#include "cli.h"
#include "config.h"
#include "simulated_gpu.h"
#include "top_gpus.h"
#include "region_view.h"
#include "size_parse.h"
#include "statedir.h"
#include "text_escape.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char top_usage[] = "Usage: gpuslice top [OPTIONS] [STATE_FILE...]\n"
                                "\n"
                                "Show this host's GPUs (index, name, total and free memory, the sum of\n"
                                "the containers' limits on each, OVERCOMMITTED where they add up past the\n"
                                "GPU), then GPU memory and compute use per container and per process\n"
                                "against the limits. Without STATE_FILEs, reads every container in the\n"
                                "state directory. The columns and the JSON schema: docs/cli.md.\n"
                                "\n"
                                "Options:\n"
                                "      --state-dir DIR   state directory (default as for 'gpuslice run')\n"
                                "      --json            print JSON instead of a table\n"
                                "      --simulated-gpu SIZE\n"
                                "                        the GPU rows show the simulated GPU that\n"
                                "                        'gpuslice run --simulated-gpu SIZE' runs on\n"
                                "  -w, --watch SECONDS   refresh every SECONDS until interrupted; into a pipe\n"
                                "                        (not a terminal), one table or JSON line each time\n"
                                "  -h, --help            show this help\n"
                                "\n"
                                "Exit status: 0 success, 1 the state directory or a container could not\n"
                                "be read, 2 usage error.\n";

static void fmt(uint64_t bytes, char *buf, size_t len)
{
    gs_format_size(bytes, buf, len);
}

/* Compute use against the limit, e.g. "31%/30%cap", "12%/w70" (share weight 70) or "-". */
static void fmt_compute(const struct gs_region *r, const struct gs_region_device *dv, char *buf, size_t len)
{
    const struct gs_lim_account *a = &dv->lim;
    if (__atomic_load_n(&a->configured, __ATOMIC_ACQUIRE) != 1) {
        /* Configured, but nothing launched yet: the cap or weight without a use. */
        if (dv->sm_limit)
            snprintf(buf, len, "-/%u%%cap", dv->sm_limit);
        else if (r->run.set && r->run.compute_mode == GS_COMPUTE_SHARE)
            snprintf(buf, len, "-/w%u", r->run.share_weight);
        else
            snprintf(buf, len, "-");
        return;
    }
    unsigned use = (__atomic_load_n(&a->use_ppm, __ATOMIC_RELAXED) + 5000) / 10000;
    if (a->mode == GS_LIM_SHARE)
        snprintf(buf, len, "%u%%/w%u", use, (unsigned)a->weight);
    else
        snprintf(buf, len, "%u%%/%u%%cap", use, a->limit_pct);
}

/* Names come from the tenant's region file (and its file name): shown as valid
 * UTF-8 with control characters as \xNN, so they cannot drive the terminal or
 * make the JSON unprintable (text_escape.h). */
struct shown_names {
    char container[4 * PATH_MAX + 1]; /* the container's name, else the region's path */
    char path[4 * PATH_MAX + 1];
    char uuid[GS_REGION_MAX_DEVICES][4 * GS_REGION_UUID_LEN + 1];
};

static struct shown_names *shown_names(const char *path, const struct gs_region *r)
{
    struct shown_names *n = malloc(sizeof *n);
    if (!n)
        return NULL;
    gs_escape_utf8(n->path, sizeof n->path, path, strlen(path));
    if (r->container[0])
        gs_escape_utf8(n->container, sizeof n->container, r->container, sizeof r->container);
    else
        memcpy(n->container, n->path, sizeof n->path);
    for (uint32_t d = 0; d < r->ndevices && d < GS_REGION_MAX_DEVICES; d++)
        gs_escape_utf8(n->uuid[d], sizeof n->uuid[d], r->dev[d].uuid, GS_REGION_UUID_LEN);
    return n;
}

static void print_table(const struct shown_names *names, const struct gs_region_view *v)
{
    const struct gs_region *r = &v->r;
    char used[32], limit[32];
    for (uint32_t d = 0; d < r->ndevices; d++) {
        int procs = 0;
        uint64_t u = gs_region_view_used(v, (int)d, &procs);
        fmt(u, used, sizeof used);
        if (r->dev[d].mem_limit)
            fmt(r->dev[d].mem_limit, limit, sizeof limit);
        else
            snprintf(limit, sizeof limit, "unlimited");
        char compute[40];
        fmt_compute(r, &r->dev[d], compute, sizeof compute);
        printf("%-20s %-42s %12s %12s %6d %14s\n", names->container, names->uuid[d], used, limit, procs, compute);
        for (int i = 0; i < GS_REGION_MAX_PROCS; i++) {
            const struct gs_region_proc *p = &r->proc[i];
            if (!gs_region_view_alive(v, i) || !p->mem_used[d])
                continue;
            char ctx[32];
            fmt(p->mem_used[d], used, sizeof used);
            fmt(p->ctx_overhead[d], ctx, sizeof ctx);
            printf("  pid %-15d %-42s %12s %12s\n", p->pid, "", used, "");
            printf("  %-19s %-42s %12s\n", "", "  of which context", ctx);
        }
    }
    int live = 0;
    gs_region_view_used(v, -1, &live);
    if (r->ndevices == 0) {
        /* Before the first GPU use the limit is the one its run set for every device. */
        if (r->default_limit_mib)
            fmt((uint64_t)r->default_limit_mib << 20, limit, sizeof limit);
        else
            snprintf(limit, sizeof limit, "-");
        printf("%-20s %-42s %12s %12s %6d\n", names->container, "(no GPU used yet)", "-", limit, live);
    }
    if (live == 0)
        printf("  (idle: no live process; 'gpuslice rm %s' removes it)\n", names->container);
}

/* bytes, or null for 0 (which means unlimited in a region). */
static json_t *bytes_or_null(uint64_t bytes)
{
    return bytes ? json_integer((json_int_t)bytes) : json_null();
}

static json_t *measured(int configured, uint64_t value)
{
    return configured ? json_integer((json_int_t)value) : json_null();
}

/* The compute fields of one device: its limit from the run before the first
 * launch, from the limiter's account after; measurements null until then. */
static void compute_json(json_t *dev, const struct gs_region *r, const struct gs_region_device *dv)
{
    const struct gs_lim_account *a = &dv->lim;
    int on = __atomic_load_n(&a->configured, __ATOMIC_ACQUIRE) == 1;
    int share = on ? a->mode == GS_LIM_SHARE : r->run.set && r->run.compute_mode == GS_COMPUTE_SHARE;
    unsigned cap = on ? a->limit_pct : dv->sm_limit;
    unsigned weight = on ? (unsigned)a->weight : r->run.share_weight;
    json_object_set_new(dev, "compute_mode", share ? json_string("share") : cap ? json_string("cap") : json_null());
    json_object_set_new(dev, "compute_limit_percent", !share && cap ? json_integer(cap) : json_null());
    json_object_set_new(dev, "compute_weight", share ? json_integer(weight) : json_null());
    json_object_set_new(dev, "compute_allowed_ppm", measured(on, __atomic_load_n(&a->rate_ppm, __ATOMIC_RELAXED)));
    json_object_set_new(dev, "compute_used_ppm", measured(on, __atomic_load_n(&a->use_ppm, __ATOMIC_RELAXED)));
    json_object_set_new(dev, "compute_correction_ppm",
                        measured(on, gs_lim_corr_of(__atomic_load_n(&a->corr_ppm, __ATOMIC_RELAXED))));
    json_object_set_new(dev, "compute_power_speed_ppm",
                        measured(on, gs_lim_speed_of(__atomic_load_n(&a->speed_ppm, __ATOMIC_RELAXED))));
    json_object_set_new(dev, "compute_charged_ns", measured(on, __atomic_load_n(&a->charged_ns, __ATOMIC_RELAXED)));
    json_object_set_new(dev, "compute_waited_ns", measured(on, __atomic_load_n(&a->wait_ns, __ATOMIC_RELAXED)));
}

static json_t *to_json(const struct shown_names *names, const struct gs_region_view *v)
{
    const struct gs_region *r = &v->r;
    json_t *devs = json_array(), *procs = json_array();
    for (uint32_t d = 0; d < r->ndevices; d++) {
        int n = 0;
        uint64_t u = gs_region_view_used(v, (int)d, &n);
        json_t *dev = json_pack("{s:s, s:o, s:I, s:i}", "uuid", names->uuid[d], "memory_limit_bytes",
                                bytes_or_null(r->dev[d].mem_limit), "memory_used_bytes", (json_int_t)u, "processes", n);
        compute_json(dev, r, &r->dev[d]);
        json_array_append_new(devs, dev);
    }
    for (int i = 0; i < GS_REGION_MAX_PROCS; i++) {
        const struct gs_region_proc *p = &r->proc[i];
        if (!gs_region_view_alive(v, i))
            continue;
        json_t *pd = json_array();
        for (uint32_t d = 0; d < r->ndevices; d++)
            json_array_append_new(pd, json_pack("{s:s, s:I, s:I}", "uuid", names->uuid[d], "memory_used_bytes",
                                                (json_int_t)p->mem_used[d], "context_bytes",
                                                (json_int_t)p->ctx_overhead[d]));
        json_array_append_new(procs, json_pack("{s:i, s:o, s:I, s:I}", "pid", p->pid, "devices", pd,
                                               "compute_charged_ns", (json_int_t)p->lim.charged_ns, "compute_waited_ns",
                                               (json_int_t)p->lim.wait_ns));
    }
    int live = 0;
    gs_region_view_used(v, -1, &live);
    return json_pack("{s:s, s:s, s:b, s:o, s:o, s:o}", "container", names->container, "state_file", names->path, "idle",
                     live == 0, "default_memory_limit_bytes", bytes_or_null((uint64_t)r->default_limit_mib << 20),
                     "devices", devs, "processes", procs);
}

struct region_list {
    char **paths;
    int n;
};

static int collect_region(const char *path, const char *key, void *arg)
{
    (void)key;
    struct region_list *l = arg;
    char **grown = realloc(l->paths, sizeof *l->paths * (size_t)(l->n + 1));
    if (!grown)
        return -1;
    l->paths = grown;
    l->paths[l->n] = strdup(path);
    if (!l->paths[l->n])
        return -1;
    l->n++;
    return 0;
}

static int unshown(const char *path)
{
    char shown[GS_ESCAPE_BUF];
    gs_escape_text(shown, sizeof shown, path, strlen(path), GS_ESCAPE_SHOW);
    fprintf(stderr, "gpuslice top: cannot show %s: out of memory\n", shown);
    return -1;
}

/* One container as a table row or a JSON object appended to all; -1, with a
 * message, when it cannot be shown (never dropped silently). */
static int show_one(json_t *all, const char *path, const struct gs_region_view *v, int as_json)
{
    struct shown_names *names = shown_names(path, &v->r);
    if (!names)
        return unshown(path);
    json_t *one = NULL;
    if (as_json)
        one = to_json(names, v);
    else
        print_table(names, v);
    free(names);
    if (as_json && (!one || json_array_append_new(all, one) != 0))
        return unshown(path);
    return 0;
}

/* Opens every region of list into views (a NULL where one cannot be read,
 * with a message); 1 if any could not be. */
static int open_views(char **list, int n, struct gs_region_view **views)
{
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char err[256];
        views[i] = gs_region_view_open(list[i], err, sizeof err);
        if (!views[i]) {
            char shown[4 * sizeof err + 4]; /* err quotes the path, which a tenant may have named */
            gs_escape_text(shown, sizeof shown, err, strlen(err), sizeof err);
            fprintf(stderr, "gpuslice top: %s\n", shown);
            rc = 1;
        }
    }
    return rc;
}

struct top_opts {
    const char *dir;
    const char *nvml; /* the simulated GPU's NVML, or NULL for the host's */
    int as_json, compact;
};

/* The regions to show: the files given, or the state directory's. -1 with a
 * message when the directory exists but cannot be read. */
static int list_regions(char **files, int nfiles, const char *dir, struct region_list *found)
{
    if (nfiles > 0)
        return 0;
    if (gs_statedir_each_region(dir, collect_region, found) == -1 && !found->paths && errno != ENOENT) {
        fprintf(stderr, "gpuslice top: cannot read state directory %s: %s\n", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* What one refresh shows: the containers' views (NULL where one could not be
 * read) and the host's GPUs with the limits on each. */
struct top_frame {
    int n;
    struct gs_region_view **views;
    struct gs_host_gpus host;
    struct top_gpu_sum sums[GS_HOST_MAX_GPUS];
};

/* The GPUs through NVML; none where there is no driver (containers are
 * still shown). */
static void read_gpus(const struct top_opts *o, struct top_frame *f)
{
    char err[256];
    int no_driver = 0;
    if (gs_host_gpus_read(&f->host, o->nvml, &no_driver, err, sizeof err) == 0)
        gs_top_gpus_sum(&f->host, f->views, f->n, f->sums);
    else
        f->host.count = 0;
}

static int print_frame(const struct top_opts *o, char **list, const struct top_frame *f)
{
    int rc = 0, shown = 0;
    json_t *all = json_array();
    for (int i = 0; i < f->n; i++)
        shown += f->views[i] != NULL;
    if (!o->as_json && f->host.count)
        gs_top_gpus_print(&f->host, f->sums);
    if (!o->as_json && shown)
        printf("%-20s %-42s %12s %12s %6s %14s\n", "CONTAINER", "DEVICE", "USED", "LIMIT", "PROCS", "COMPUTE");
    for (int i = 0; i < f->n; i++)
        if (f->views[i] && show_one(all, list[i], f->views[i], o->as_json) != 0)
            rc = 1;
    json_t *doc = json_pack("{s:i, s:o, s:o}", "schema_version", 1, "gpus", gs_top_gpus_json(&f->host, f->sums),
                            "containers", all);
    if (o->as_json) {
        json_dumpf(doc, stdout, o->compact ? JSON_COMPACT : JSON_INDENT(2));
        putchar('\n');
    } else if (shown == 0) {
        printf("no gpuslice containers in %s\n", o->dir);
    }
    json_decref(doc);
    return rc;
}

static int show(char **files, int nfiles, const struct top_opts *o)
{
    struct region_list found = { NULL, 0 };
    if (list_regions(files, nfiles, o->dir, &found) != 0)
        return 1;
    char **list = nfiles ? files : found.paths;
    struct top_frame *f = calloc(1, sizeof *f);
    int rc = 1;
    if (f) {
        f->n = nfiles ? nfiles : found.n;
        f->views = calloc((size_t)f->n + 1, sizeof *f->views);
    }
    if (!f || !f->views) {
        fprintf(stderr, "gpuslice top: out of memory\n");
    } else {
        rc = open_views(list, f->n, f->views);
        read_gpus(o, f);
        rc |= print_frame(o, list, f);
        for (int i = 0; i < f->n; i++)
            gs_region_view_free(f->views[i]);
        free(f->views);
    }
    free(f);
    for (int i = 0; i < found.n; i++)
        free(found.paths[i]);
    free(found.paths);
    fflush(stdout);
    return rc;
}

int gs_cmd_top(int argc, char **argv)
{
    static const struct option opts[] = { { "state-dir", required_argument, NULL, 'S' },
                                          { "json", no_argument, NULL, 'j' },
                                          { "watch", required_argument, NULL, 'w' },
                                          { "simulated-gpu", required_argument, NULL, 'X' },
                                          { "help", no_argument, NULL, 'h' },
                                          { NULL, 0, NULL, 0 } };
    char dir[PATH_MAX];
    const char *given = NULL;
    struct top_opts o = { dir, NULL, 0, 0 };
    const char *simulated = NULL;
    long watch = 0;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":w:h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'S': given = optarg; break;
        case 'j': o.as_json = 1; break;
        case 'X':
            if (gs_simgpu_size_ok("top", optarg) != 0) {
                gs_cli_usage_hint("top");
                return GS_EXIT_USAGE;
            }
            simulated = optarg;
            break;
        case 'w':
            watch = strtol(optarg, &end, 10);
            if (!end || *end || watch < 1 || watch > 3600)
                return gs_cli_usage_error("top", "--watch '%s': expected whole seconds from 1 to 3600", optarg);
            break;
        case 'h': fputs(top_usage, stdout); return 0;
        default: return gs_cli_bad_option("top", c, argv, opts);
        }
    }
    if (gs_cli_state_dir("top", given, 0, dir, sizeof dir) < 0)
        return 1;
    static struct gs_simgpu sim;
    if (simulated && gs_simgpu_select("top", simulated, dir, &sim) != 0)
        return 1;
    o.nvml = simulated ? sim.nvml : NULL;
    /* A terminal is redrawn in place; a pipe gets each refresh whole, the
     * JSON as one line per refresh, with no escapes. */
    int tty = isatty(STDOUT_FILENO);
    o.compact = watch && !tty;
    for (int first = 1;; first = 0) {
        if (watch && tty)
            printf("\033[H\033[2J");
        else if (watch && !first && !o.as_json)
            putchar('\n');
        int rc = show(argv + optind, argc - optind, &o);
        if (!watch)
            return rc;
        sleep((unsigned)watch);
    }
}
