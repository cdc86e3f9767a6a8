/* gpuslice inspect: per node and GPU, what the scheduler extender has
 * allocated, read from its GET /state endpoint (docs/extender.md). */
#include <curl/curl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "curl_buf.h"

#define INSPECT_DEFAULT_URL "http://127.0.0.1:8888"

static const char usage[] =
    "Usage: gpuslice inspect [--url URL] [--node NAME] [--pods] [--json]\n"
    "                        [--cacert FILE | --insecure] [--timeout S]\n"
    "\n"
    "Per node and GPU: memory allocated/total, compute allocated, replica slots used\n"
    "and pods, as the scheduler extender's usage cache sees them (GET <URL>/state).\n"
    "\n"
    "  --url URL      the extender (default $GPUSLICE_EXTENDER_URL, else " INSPECT_DEFAULT_URL ")\n"
    "  --node NAME    only this node\n"
    "  --pods         list each GPU's pods under it\n"
    "  --json         machine-readable output\n"
    "  --cacert FILE  CA for an https URL; --insecure skips verification\n"
    "  --timeout S    request timeout in seconds (10)\n"
    "\n"
    "Exit status: 0 success, 1 the extender could not be read, 2 usage error.\n";

static json_t *fetch_state(const char *base, const char *cacert, int insecure, long timeout)
{
    char url[2048];
    size_t bl = strlen(base);
    while (bl && base[bl - 1] == '/')
        bl--;
    if (bl == 0 || bl > sizeof url - 16) {
        fprintf(stderr, "gpuslice inspect: bad --url\n");
        return NULL;
    }
    snprintf(url, sizeof url, "%.*s/state", (int)bl, base);
    CURL *c = curl_easy_init();
    if (!c) {
        fprintf(stderr, "gpuslice inspect: cannot initialise libcurl\n");
        return NULL;
    }
    struct gs_curl_buf b = { 0 };
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, gs_curl_buf_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    if (cacert)
        curl_easy_setopt(c, CURLOPT_CAINFO, cacert);
    if (insecure) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    json_t *j = NULL;
    if (rc != CURLE_OK) {
        fprintf(stderr, "gpuslice inspect: cannot read %s: %s\n", url, cerr[0] ? cerr : curl_easy_strerror(rc));
    } else if (code != 200) {
        fprintf(stderr, "gpuslice inspect: %s answered HTTP %ld%s%.200s\n", url, code, b.data ? ": " : "",
                b.data ? b.data : "");
    } else {
        json_error_t je;
        j = json_loadb(b.data ? b.data : "", b.len, 0, &je);
        json_t *nodes = json_object_get(j, "nodes");
        if (!j) {
            fprintf(stderr, "gpuslice inspect: %s is not JSON (%s)\n", url, je.text);
        } else if (json_integer_value(json_object_get(j, "v")) != 1 || !json_is_array(nodes)) {
            fprintf(stderr,
                    "gpuslice inspect: %s is not an extender state document (v 1 "
                    "with a nodes array)\n",
                    url);
            json_decref(j);
            j = NULL;
        }
    }
    gs_curl_buf_free(&b);
    return j;
}

static const char *str_or(json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

static json_int_t int_of(json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static int by_name(const void *a, const void *b)
{
    return strcmp(str_or(*(json_t *const *)a, "name", ""), str_or(*(json_t *const *)b, "name", ""));
}

/* The summary: the state document reduced to what an operator reads. */
static json_t *summarise(json_t *state, const char *only)
{
    json_t *src = json_object_get(state, "nodes");
    size_t n = json_array_size(src);
    json_t **v = calloc(n ? n : 1, sizeof *v);
    json_t *nodes = json_array();
    if (!v || !nodes) {
        free(v);
        json_decref(nodes);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *nd = json_array_get(src, i);
        if (!json_is_object(nd) || json_is_true(json_object_get(nd, "deleted")))
            continue;
        if (only && strcmp(str_or(nd, "name", ""), only) != 0)
            continue;
        v[k++] = nd;
    }
    qsort(v, k, sizeof *v, by_name);
    for (size_t i = 0; i < k; i++) {
        json_t *gpus = json_array();
        json_t *sg = json_object_get(v[i], "gpus");
        for (size_t g = 0; g < json_array_size(sg); g++) {
            json_t *x = json_array_get(sg, g);
            json_t *pods = json_array();
            json_t *sp = json_object_get(x, "pods");
            for (size_t p = 0; p < json_array_size(sp); p++) {
                json_t *y = json_array_get(sp, p);
                json_array_append_new(
                    pods, json_pack("{s:s,s:I,s:f,s:I,s:b}", "pod", str_or(y, "pod", "?"), "memory_mib",
                                    int_of(y, "memory_mib"), "cores", (double)int_of(y, "milli") / 10.0, "replica",
                                    int_of(y, "replica"), "claim", json_is_true(json_object_get(y, "claim"))));
            }
            json_array_append_new(
                gpus, json_pack("{s:s,s:I,s:I,s:f,s:I,s:I,s:b,s:o}", "uuid", str_or(x, "uuid", "?"), "memory_mib",
                                int_of(x, "memory_mib"), "memory_allocated_mib", int_of(x, "memory_used_mib"),
                                "cores_allocated", (double)int_of(x, "milli_used") / 10.0, "replicas",
                                int_of(x, "replicas"), "replicas_used", int_of(x, "replicas_used"), "healthy",
                                json_is_true(json_object_get(x, "healthy")), "pods", pods));
        }
        json_array_append_new(nodes, json_pack("{s:s,s:s,s:o}", "name", str_or(v[i], "name", "?"), "model",
                                               str_or(v[i], "model", ""), "gpus", gpus));
    }
    free(v);
    return json_pack("{s:i,s:o}", "v", 1, "nodes", nodes);
}

static void print_table(json_t *sum, int show_pods)
{
    json_t *nodes = json_object_get(sum, "nodes");
    long long mem = 0, mem_used = 0, ngpus = 0;
    printf("%-20s %-40s %-24s %20s %7s %9s %5s %s\n", "NODE", "GPU", "MODEL", "MEMORY MiB (alloc)", "CORES", "REPLICAS",
           "PODS", "HEALTH");
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        json_t *nd = json_array_get(nodes, i);
        json_t *gpus = json_object_get(nd, "gpus");
        if (!json_array_size(gpus))
            printf("%-20.40s %-40s\n", str_or(nd, "name", "?"), "(no gpuslice inventory)");
        for (size_t g = 0; g < json_array_size(gpus); g++) {
            json_t *x = json_array_get(gpus, g);
            char m[48], r[24];
            long long tot = int_of(x, "memory_mib"), used = int_of(x, "memory_allocated_mib");
            snprintf(m, sizeof m, "%lld/%lld (%lld%%)", used, tot, tot ? used * 100 / tot : 0);
            snprintf(r, sizeof r, "%lld/%lld", (long long)int_of(x, "replicas_used"), (long long)int_of(x, "replicas"));
            json_t *pods = json_object_get(x, "pods");
            printf("%-20.40s %-40.60s %-24.40s %20s %6.1f%% %9s %5zu %s\n", g ? "" : str_or(nd, "name", "?"),
                   str_or(x, "uuid", "?"), str_or(nd, "model", ""), m,
                   json_real_value(json_object_get(x, "cores_allocated")), r, json_array_size(pods),
                   json_is_true(json_object_get(x, "healthy")) ? "ok" : "UNHEALTHY");
            for (size_t p = 0; show_pods && p < json_array_size(pods); p++) {
                json_t *y = json_array_get(pods, p);
                printf("    %-56.100s %8lld MiB %6.1f%%  replica %lld%s\n", str_or(y, "pod", "?"),
                       (long long)int_of(y, "memory_mib"), json_real_value(json_object_get(y, "cores")),
                       (long long)int_of(y, "replica"),
                       json_is_true(json_object_get(y, "claim")) ? " (claim, not yet seen)" : "");
            }
            mem += tot;
            mem_used += used;
            ngpus++;
        }
    }
    printf("\n%zu node(s), %lld GPU(s), %lld/%lld MiB GPU memory allocated\n", json_array_size(nodes), ngpus, mem_used,
           mem);
}

int gs_cmd_inspect(int argc, char **argv)
{
    static const struct option opts[] = { { "url", required_argument, 0, 'u' },
                                          { "node", required_argument, 0, 'n' },
                                          { "json", no_argument, 0, 'j' },
                                          { "pods", no_argument, 0, 'P' },
                                          { "cacert", required_argument, 0, 'C' },
                                          { "insecure", no_argument, 0, 'k' },
                                          { "timeout", required_argument, 0, 't' },
                                          { "help", no_argument, 0, 'h' },
                                          { 0, 0, 0, 0 } };
    const char *env = getenv("GPUSLICE_EXTENDER_URL");
    const char *url = env && *env ? env : INSPECT_DEFAULT_URL, *node = NULL, *cacert = NULL;
    int as_json = 0, insecure = 0, pods = 0, c;
    long timeout = 10;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hk", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'u': url = optarg; break;
        case 'n': node = optarg; break;
        case 'j': as_json = 1; break;
        case 'P': pods = 1; break;
        case 'C': cacert = optarg; break;
        case 'k': insecure = 1; break;
        case 't':
            timeout = strtol(optarg, &end, 10);
            if (!*optarg || *end || timeout < 1 || timeout > 3600)
                return gs_cli_usage_error("inspect", "--timeout '%s': expected whole seconds from 1 to 3600", optarg);
            break;
        case 'h': fputs(usage, stdout); return 0;
        default: return gs_cli_bad_option("inspect", c, argv, opts);
        }
    }
    if (optind < argc)
        return gs_cli_usage_error("inspect", "unexpected argument '%s'", argv[optind]);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "gpuslice inspect: cannot initialise libcurl\n");
        return 1;
    }
    json_t *state = fetch_state(url, cacert, insecure, timeout);
    json_t *sum = state ? summarise(state, node) : NULL;
    int rc = 1;
    if (sum && node && json_array_size(json_object_get(sum, "nodes")) == 0) {
        fprintf(stderr, "gpuslice inspect: node '%s' is not in the extender's cache\n", node);
    } else if (sum) {
        if (as_json) {
            char *s = json_dumps(sum, JSON_INDENT(2));
            if (s)
                puts(s);
            free(s);
        } else {
            print_table(sum, pods);
        }
        rc = fflush(stdout) == 0 ? 0 : 1;
    } else if (state) {
        fprintf(stderr, "gpuslice inspect: out of memory\n");
    }
    json_decref(sum);
    json_decref(state);
    curl_global_cleanup();
    return rc;
}
