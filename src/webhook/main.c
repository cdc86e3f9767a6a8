/* gpuslice-webhook: mutating + validating admission webhook for GPU pods,
 * over HTTPS (the API server only calls webhooks over TLS). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admission.h"
#include "flags.h"
#include "httpd.h"

static volatile sig_atomic_t g_quit;
static int g_verbose;

static void on_signal(int sig)
{
    g_quit = sig;
}

#define PROG "gpuslice-webhook"

static const char usage[] = "usage: gpuslice-webhook --tls-cert FILE --tls-key FILE [options]\n"
                            "  --addr A --port P          listen address (default 0.0.0.0:8443)\n"
                            "  --tls-cert F --tls-key F   PEM serving certificate and key (required)\n"
                            "  --scheduler-name NAME      set on GPU pods that name no scheduler or default-scheduler\n"
                            "                             (default " GS_WH_DEFAULT_SCHEDULER ")\n"
                            "  --default-gpu-cores N      gpu-cores filled in when gpu-memory is given without it,\n"
                            "                             1..100; 0 = leave it absent (default 10)\n"
                            "  --annotation-writer USER   a user (userInfo.username) that may write gpuslice.io/\n"
                            "                             annotations; repeat for each; default gpuslice's own\n"
                            "                             service accounts (the extender's and the node agent's)\n"
                            "  --threads N                HTTP worker threads (2)\n"
                            "  --max-connections N        connections open at once, all clients (8192)\n"
                            "  --max-connections-per-client N\n"
                            "                             connections open at once from one client address (1024);\n"
                            "                             more from that address are closed at once\n"
                            "  -v                         log every decision\n"
                            "  --version                  print the version\n"
                            "Endpoints: POST /mutate, POST /validate (AdmissionReview v1); GET /healthz\n";

static int handle(void *ud, const char *method, const char *url, const char *body, size_t len, char **out,
                  const char **ctype)
{
    const struct gs_wh_config *cfg = ud;
    *ctype = "application/json";
    if (strcmp(method, "GET") == 0 && strcmp(url, "/healthz") == 0) {
        *ctype = "text/plain; charset=utf-8";
        *out = strdup("ok\n");
        return 200;
    }
    int mutate = strcmp(url, "/mutate") == 0;
    if (strcmp(method, "POST") != 0 || (!mutate && strcmp(url, "/validate") != 0)) {
        *out = strdup("{\"error\":\"unknown endpoint; POST /mutate or /validate\"}");
        return 404;
    }
    int st = gs_admission_review(cfg, mutate ? GS_WH_MUTATE : GS_WH_VALIDATE, body, len, out);
    if (!*out) {
        *out = strdup("{\"error\":\"out of memory\"}");
        return 500;
    }
    if (g_verbose || st != 200)
        fprintf(stderr, "gpuslice-webhook: %s %d %.300s\n", url, st, *out);
    return st;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = { { "addr", required_argument, 0, 'A' },
                                          { "port", required_argument, 0, 'p' },
                                          { "tls-cert", required_argument, 0, 'c' },
                                          { "tls-key", required_argument, 0, 'K' },
                                          { "scheduler-name", required_argument, 0, 's' },
                                          { "default-gpu-cores", required_argument, 0, 'C' },
                                          { "threads", required_argument, 0, 't' },
                                          { "help", no_argument, 0, 'h' },
                                          { "version", no_argument, 0, 'V' },
                                          { "annotation-writer", required_argument, 0, 'W' },
                                          { "max-connections", required_argument, 0, 'M' },
                                          { "max-connections-per-client", required_argument, 0, 'P' },
                                          { 0, 0, 0, 0 } };
    const char *addr = NULL, *cert = NULL, *key = NULL;
    static const char *const default_writers[] = GS_WH_DEFAULT_WRITERS;
    static const char *writers[16];
    size_t nwriters = 0;
    static struct gs_wh_config cfg = { GS_WH_DEFAULT_SCHEDULER, GS_WH_DEFAULT_CORES, default_writers,
                                       sizeof default_writers / sizeof default_writers[0] };
    int port = 8443, threads = 2, max_conn = GS_HTTPD_MAX_CONNECTIONS, per_client = GS_HTTPD_MAX_PER_CLIENT, c;
    while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
        switch (c) {
        case 'A': addr = optarg; break;
        case 'c': cert = optarg; break;
        case 'K': key = optarg; break;
        case 'v': g_verbose = 1; break;
        case 'W':
            if (strncmp(optarg, "system:serviceaccount:", 22) != 0 || strlen(optarg) > 300 ||
                nwriters == sizeof writers / sizeof writers[0]) {
                fprintf(stderr,
                        PROG ": --annotation-writer '%s': expected a service account as "
                             "system:serviceaccount:NAMESPACE:NAME, at most %zu of them\n",
                        optarg, sizeof writers / sizeof writers[0]);
                return 2;
            }
            writers[nwriters++] = optarg;
            cfg.annotation_writers = writers;
            cfg.n_annotation_writers = nwriters;
            break;
        case 's':
            if (!*optarg || strlen(optarg) > 253) {
                fprintf(stderr, "gpuslice-webhook: bad --scheduler-name '%s'\n", optarg);
                return 2;
            }
            cfg.scheduler_name = optarg;
            break;
        case 'p':
            if (gs_flag_int(PROG, "port", optarg, 0, 65535, &port) != 0)
                return 2;
            break;
        case 't':
            if (gs_flag_int(PROG, "threads", optarg, 1, 64, &threads) != 0)
                return 2;
            break;
        case 'M':
            if (gs_flag_int(PROG, "max-connections", optarg, 16, 65535, &max_conn) != 0)
                return 2;
            break;
        case 'P':
            if (gs_flag_int(PROG, "max-connections-per-client", optarg, 1, 65535, &per_client) != 0)
                return 2;
            break;
        case 'C':
            if (gs_flag_int(PROG, "default-gpu-cores", optarg, 0, 100, &cfg.default_cores) != 0)
                return 2;
            break;
        case 'V': gs_flag_print_version(PROG); return 0;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpuslice-webhook: unexpected argument '%s'\n%s", argv[optind], usage);
        return 2;
    }
    if (!cert || !key) {
        fprintf(stderr, "gpuslice-webhook: --tls-cert and --tls-key are required (the API "
                        "server calls webhooks over HTTPS only)\n");
        return 2;
    }
    if (gs_flag_readable(PROG, "tls-cert", cert) != 0 || gs_flag_readable(PROG, "tls-key", key) != 0)
        return 2;
    char err[512];
    /* Before the server answers anyone: a SIGTERM right after it is up must
     * still shut it down cleanly. */
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGPIPE, SIG_IGN);
    const struct gs_httpd_opts http = { { cert, key, NULL }, threads, (unsigned)max_conn, (unsigned)per_client };
    struct gs_httpd *srv = gs_httpd_start_opts(addr, port, &http, handle, &cfg, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "gpuslice-webhook: %s\n", err);
        return 1;
    }
    fprintf(stderr,
            "gpuslice-webhook: listening on %s:%d (https), scheduler %s, default "
            "gpu-cores %d, %zu annotation writer(s), first %s; at most %d connections, %d per client address\n",
            addr ? addr : "0.0.0.0", gs_httpd_port(srv), cfg.scheduler_name, cfg.default_cores,
            cfg.n_annotation_writers, cfg.annotation_writers[0], max_conn, per_client);
    while (!g_quit)
        sleep(1); /* a signal ends it early; pause() could miss one that came just before */
    fprintf(stderr, "gpuslice-webhook: signal %d: shutting down\n", (int)g_quit);
    gs_httpd_stop(srv);
    return 0;
}
