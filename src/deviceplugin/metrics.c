/*
 * Metrics, Prometheus text format 0.0.4:
 *   per GPU (NVML): memory total/used bytes, utilisation %, health, SMs;
 *   per container (a private snapshot of its region, region_view.h): memory used
 *   and limit bytes, compute limit %, compute used (the limiter's measured
 *   share) and charged GPU seconds, live processes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpd.h"
#include "kube_client.h"
#include "metrics.h"
#include "region_view.h"
#include "statedir.h"
#include "text_escape.h"

struct gs_metrics {
    struct gs_httpd *srv; /* the one bounded server (src/k8s/httpd.c) */
    struct gs_inventory *inv;
    char root[512];
    int replicas;
};

struct out {
    char *s;
    size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        size_t room = o->cap - o->len;
        va_start(ap, fmt);
        int n = o->s ? vsnprintf(o->s + o->len, room, fmt, ap) : -1;
        va_end(ap);
        if (n >= 0 && (size_t)n < room) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap ? o->cap * 2 : 8192;
        char *s = realloc(o->s, cap);
        if (!s)
            return;
        o->s = s;
        o->cap = cap;
    }
}

/* Label values: escape backslash, quote and newline (Prometheus text format). */
static void esc(const char *in, char *out, size_t len)
{
    size_t j = 0;
    for (; *in && j + 3 < len; in++) {
        if (*in == '\\' || *in == '"') {
            out[j++] = '\\';
            out[j++] = *in;
        } else if (*in == '\n') {
            out[j++] = '\\';
            out[j++] = 'n';
        } else {
            out[j++] = *in;
        }
    }
    out[j] = '\0';
}

/* A label value from text a tenant may have written (a region's names, file
 * names): first valid UTF-8 without control characters (text_escape.h: one
 * invalid byte would make Prometheus reject the whole scrape), then escaped
 * for the text format. The first inlen bytes of in, up to a NUL. */
static void label(const char *in, size_t inlen, char *out, size_t len)
{
    char safe[4 * 256 + 1]; /* room for 256 bytes escaped: callers pass at most that */
    gs_escape_utf8(safe, sizeof safe, in, inlen);
    esc(safe, out, len);
}

/* One container's lines, from a snapshot of its region: the file is the
 * tenant's, so it is read and checked, never mapped or locked. */
struct region_scrape {
    struct out *o;
    const char *root;
};

static int scrape_region(const char *path, const char *key, void *arg)
{
    struct region_scrape *rs = arg;
    struct out *o = rs->o;
    char err[256];
    struct gs_region_view *v = gs_region_view_open(path, err, sizeof err);
    if (!v)
        return 0;
    const struct gs_region *r = &v->r;
    char cont[2 * 4 * sizeof r->container + 4], pod[2 * 4 * 256 + 4];
    label(r->container, sizeof r->container, cont, sizeof cont);
    /* The pod that owns the allocation, as PreStartContainer recorded
     * it (docs/device-plugin.md); else the directory's name. */
    char uid[KUBE_POD_UID_MAX] = "", upath[1024];
    if (gs_statedir_agent_limits_dir(upath, sizeof upath - 16, rs->root, key) == 0) {
        strcat(upath, "/pod_uid");
        FILE *uf = fopen(upath, "re");
        if (uf) {
            size_t ul = fread(uid, 1, sizeof uid - 1, uf);
            uid[ul] = '\0';
            fclose(uf);
        }
    }
    label(uid[0] ? uid : key, 256, pod, sizeof pod);
    for (unsigned i = 0; i < r->ndevices; i++) {
        char u[2 * 4 * GS_REGION_UUID_LEN + 4];
        if (!r->dev[i].uuid[0])
            continue;
        label(r->dev[i].uuid, GS_REGION_UUID_LEN, u, sizeof u);
        int live = 0;
        uint64_t used = gs_region_view_used(v, (int)i, &live);
        char lab[sizeof cont + sizeof pod + sizeof u + 64];
        snprintf(lab, sizeof lab, "container=\"%s\",pod_uid=\"%s\",gpu=\"%s\"", cont, pod, u);
        put(o, "gpuslice_container_memory_used_bytes{%s} %llu\n", lab, (unsigned long long)used);
        put(o, "gpuslice_container_memory_limit_bytes{%s} %llu\n", lab, (unsigned long long)r->dev[i].mem_limit);
        put(o, "gpuslice_container_compute_limit_percent{%s} %u\n", lab, r->dev[i].sm_limit);
        put(o, "gpuslice_container_compute_used_ratio{%s} %.6f\n", lab,
            __atomic_load_n(&r->dev[i].lim.use_ppm, __ATOMIC_RELAXED) / 1e6);
        put(o, "gpuslice_container_compute_charged_seconds_total{%s} %.6f\n", lab,
            (double)__atomic_load_n(&r->dev[i].lim.charged_ns, __ATOMIC_RELAXED) / 1e9);
        put(o, "gpuslice_container_processes{%s} %d\n", lab, live);
    }
    gs_region_view_free(v);
    return 0;
}

char *gs_metrics_render(struct gs_inventory *inv, const char *state_root, int replicas)
{
    struct out o = { 0 };
    gs_inventory_refresh(inv);
    put(&o, "# HELP gpuslice_gpu_memory_total_bytes GPU memory (NVML).\n"
            "# TYPE gpuslice_gpu_memory_total_bytes gauge\n"
            "# HELP gpuslice_gpu_memory_used_bytes GPU memory in use, all processes (NVML).\n"
            "# TYPE gpuslice_gpu_memory_used_bytes gauge\n"
            "# HELP gpuslice_gpu_utilization_percent GPU busy time (NVML).\n"
            "# TYPE gpuslice_gpu_utilization_percent gauge\n"
            "# HELP gpuslice_gpu_healthy 1 if the GPU is healthy (XID events).\n"
            "# TYPE gpuslice_gpu_healthy gauge\n"
            "# HELP gpuslice_gpu_replicas Schedulable replicas of the GPU.\n"
            "# TYPE gpuslice_gpu_replicas gauge\n");
    pthread_mutex_lock(&inv->lock);
    for (int i = 0; i < inv->ngpus; i++) {
        const struct gs_nvml_gpu *g = &inv->gpus[i];
        char model[2 * 4 * 96 + 4];
        label(g->model, 96, model, sizeof model);
        char lab[sizeof model + sizeof g->uuid + 64];
        snprintf(lab, sizeof lab, "gpu=\"%s\",index=\"%u\",model=\"%s\"", g->uuid, g->index, model);
        put(&o, "gpuslice_gpu_memory_total_bytes{%s} %llu\n", lab, (unsigned long long)g->mem_total);
        put(&o, "gpuslice_gpu_memory_used_bytes{%s} %llu\n", lab, (unsigned long long)g->mem_used);
        put(&o, "gpuslice_gpu_utilization_percent{%s} %u\n", lab, g->util_gpu);
        put(&o, "gpuslice_gpu_healthy{%s} %d\n", lab, g->healthy);
        put(&o, "gpuslice_gpu_replicas{%s} %d\n", lab, replicas);
    }
    pthread_mutex_unlock(&inv->lock);
    put(&o, "# HELP gpuslice_container_memory_used_bytes Memory charged to the container "
            "(live processes, its region).\n"
            "# TYPE gpuslice_container_memory_used_bytes gauge\n"
            "# HELP gpuslice_container_memory_limit_bytes The container's memory limit "
            "(0 = none).\n"
            "# TYPE gpuslice_container_memory_limit_bytes gauge\n"
            "# HELP gpuslice_container_compute_limit_percent The container's compute limit "
            "(0 = none).\n"
            "# TYPE gpuslice_container_compute_limit_percent gauge\n"
            "# HELP gpuslice_container_compute_used_ratio The container's measured share of the "
            "GPU's time over the limiter's last interval (0..1).\n"
            "# TYPE gpuslice_container_compute_used_ratio gauge\n"
            "# HELP gpuslice_container_compute_charged_seconds_total GPU time charged to the "
            "container by its compute limiter.\n"
            "# TYPE gpuslice_container_compute_charged_seconds_total counter\n"
            "# HELP gpuslice_container_processes Live processes using the GPU.\n"
            "# TYPE gpuslice_container_processes gauge\n");
    struct region_scrape rs = { &o, state_root };
    if (state_root)
        gs_statedir_each_region(state_root, scrape_region, &rs);
    return o.s;
}

static int answer(void *ud, const char *method, const char *url, const char *body, size_t len, char **out,
                  const char **ctype)
{
    struct gs_metrics *m = ud;
    (void)body;
    (void)len;
    *ctype = "text/plain";
    if (strcmp(method, "GET") == 0 && strcmp(url, "/healthz") == 0) {
        *out = strdup("ok\n");
        return 200;
    }
    if (strcmp(method, "GET") != 0 || strcmp(url, "/metrics") != 0) {
        *out = strdup("not found: try /metrics\n");
        return 404;
    }
    *ctype = "text/plain; version=0.0.4";
    *out = gs_metrics_render(m->inv, m->root, m->replicas);
    if (!*out) {
        *ctype = "text/plain";
        *out = strdup("out of memory\n");
        return 500;
    }
    return 200;
}

struct gs_metrics *gs_metrics_start(const char *addr, int port, struct gs_inventory *inv, const char *state_root,
                                    int replicas, char *err, size_t errlen)
{
    struct gs_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->inv = inv;
    m->replicas = replicas;
    snprintf(m->root, sizeof m->root, "%s", state_root);
    char why[256];
    m->srv = gs_httpd_start(addr, port, NULL, NULL, 1, answer, m, why, sizeof why);
    if (!m->srv) {
        snprintf(err, errlen, "metrics: %s", why);
        free(m);
        return NULL;
    }
    return m;
}

void gs_metrics_stop(struct gs_metrics *m)
{
    if (!m)
        return;
    gs_httpd_stop(m->srv);
    free(m);
}
