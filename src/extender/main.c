/* gpuslice-extender: kube-scheduler extender v1 (filter, prioritize, bind)
 * backed by the gpuslice policy engine and a list+watch usage cache. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "assign_sig.h"
#include "ext.h"
#include "flags.h"
#include "httpd.h"
#include "metrics.h"
#include "verbs.h"

#define PROG "gpuslice-extender"

static volatile sig_atomic_t g_quit;
/* --status-port given: the read-only endpoints live on their own listener
 * and the main one answers the scheduler's verbs only. */
static int g_status_apart;

static void on_signal(int sig)
{
    g_quit = sig;
}

static const char usage[] =
    "usage: gpuslice-extender [options]\n"
    "  --api-server URL      Kubernetes API server (else --kubeconfig, $KUBECONFIG, in-cluster)\n"
    "  --kubeconfig PATH\n"
    "  --addr A --port P     listen address (default 0.0.0.0:8888)\n"
    "  --tls-cert F --tls-key F   serve HTTPS (TLS 1.2+)\n"
    "  --client-ca FILE      mutual TLS: filter/prioritize/bind only from clients whose\n"
    "                        certificate this CA issued (kube-scheduler's tlsConfig)\n"
    "  --status-addr A --status-port P  /healthz, /readyz, /metrics and /state on their own\n"
    "                        listener (TLS with the same certificate, no client certificate);\n"
    "                        the main listener then answers the verbs only\n"
    "  --policy NAME         default node policy: fraglook binpack spread bestfit fgd (fraglook)\n"
    "  --gpu-policy NAME     default GPU policy on the chosen node (fraglook)\n"
    "  --threads N           HTTP worker threads (4)\n"
    "  --claim-ttl S         seconds an in-flight node claim counts without its pod (300)\n"
    "  --assignment-key FILE key (a Secret shared with the node agents) that signs each\n"
    "                        assignment; pods whose signature does not verify are not counted\n"
    "  -v                    more logging (repeatable)\n"
    "  --version             print the version\n"
    "Endpoints: POST <prefix>/filter, /prioritize, /bind; GET /healthz, /readyz, /metrics, /state\n";

static int not_found(char **out, const char **ctype)
{
    *ctype = "text/plain; charset=utf-8";
    *out = strdup("not found\n");
    return 404;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *verb_of(const char *url)
{
    const char *s = strrchr(url, '/');
    return s ? s + 1 : url;
}

/* The read-only endpoints (GET). */
static int handle_status(void *ud, const char *method, const char *url, const char *body, size_t len, char **out,
                         const char **ctype)
{
    struct ext_ctx *x = ud;
    (void)body;
    (void)len;
    if (strcmp(method, "GET") == 0) {
        *ctype = "text/plain; charset=utf-8";
        if (strcmp(url, "/healthz") == 0) {
            *out = strdup("ok\n");
            return 200;
        }
        if (strcmp(url, "/readyz") == 0) {
            *out = strdup(x->ready ? "ok\n" : "cache not synced yet\n");
            return x->ready ? 200 : 503;
        }
        if (strcmp(url, "/metrics") == 0) {
            pthread_mutex_lock(&x->st.mu);
            uint64_t n = x->st.cl.num_nodes, g = x->st.generation;
            pthread_mutex_unlock(&x->st.mu);
            *ctype = "text/plain; version=0.0.4";
            *out = ext_metrics_render(n, g, x->ready);
            return 200;
        }
        if (strcmp(url, "/state") == 0) {
            pthread_mutex_lock(&x->st.mu);
            json_t *j = ext_state_json(&x->st);
            pthread_mutex_unlock(&x->st.mu);
            *ctype = "application/json";
            *out = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
            json_decref(j);
            return 200;
        }
    }
    return not_found(out, ctype);
}

/* The scheduler's verbs (POST), and the read-only endpoints unless they
 * have their own listener. */
static int handle(void *ud, const char *method, const char *url, const char *body, size_t len, char **out,
                  const char **ctype)
{
    struct ext_ctx *x = ud;
    const char *v = verb_of(url);
    if (strcmp(method, "GET") == 0)
        return g_status_apart ? not_found(out, ctype) : handle_status(ud, method, url, body, len, out, ctype);
    *ctype = "application/json";
    enum ext_verb verb = strcmp(v, "filter") == 0       ? EXT_V_FILTER
                         : strcmp(v, "prioritize") == 0 ? EXT_V_PRIORITIZE
                         : strcmp(v, "bind") == 0       ? EXT_V_BIND
                                                        : EXT_V_COUNT;
    if (strcmp(method, "POST") != 0 || verb == EXT_V_COUNT) {
        *out = strdup("{\"Error\":\"unknown endpoint; POST .../filter, .../prioritize or "
                      ".../bind\"}");
        return 404;
    }
    double t0 = now_s();
    int bad = 0, failed = 0;
    if (verb != EXT_V_BIND && ext_verb_text(&x->st, verb == EXT_V_PRIORITIZE, body, len, out, &bad, &failed) == 0) {
        ext_metrics_observe(verb, now_s() - t0, failed);
        return bad ? 400 : 200;
    }
    json_error_t je;
    json_t *args = json_loadb(body, len, 0, &je);
    json_t *res;
    if (!args) {
        char msg[300];
        snprintf(msg, sizeof msg, "request body is not JSON (line %d column %d: %s)", je.line, je.column, je.text);
        res = json_pack("{s:s}", "Error", msg);
        bad = 1;
    } else if (verb == EXT_V_FILTER) {
        res = ext_filter(&x->st, args, &bad);
    } else if (verb == EXT_V_PRIORITIZE) {
        res = ext_prioritize(&x->st, args, &bad);
    } else {
        res = ext_bind(x, args, &bad);
    }
    const char *e = json_string_value(json_object_get(res, "Error"));
    ext_metrics_observe(verb, now_s() - t0, bad || (e && *e));
    *out = json_dumps(res, JSON_COMPACT);
    json_decref(res);
    json_decref(args);
    return bad ? 400 : 200;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = { { "api-server", required_argument, 0, 'a' },
                                          { "kubeconfig", required_argument, 0, 'k' },
                                          { "addr", required_argument, 0, 'A' },
                                          { "port", required_argument, 0, 'p' },
                                          { "tls-cert", required_argument, 0, 'c' },
                                          { "tls-key", required_argument, 0, 'K' },
                                          { "policy", required_argument, 0, 'P' },
                                          { "gpu-policy", required_argument, 0, 'G' },
                                          { "threads", required_argument, 0, 't' },
                                          { "claim-ttl", required_argument, 0, 'T' },
                                          { "assignment-key", required_argument, 0, 'S' },
                                          { "client-ca", required_argument, 0, 'C' },
                                          { "status-addr", required_argument, 0, 'B' },
                                          { "status-port", required_argument, 0, 'Q' },
                                          { "version", no_argument, 0, 'V' },
                                          { "help", no_argument, 0, 'h' },
                                          { 0, 0, 0, 0 } };
    const char *url = NULL, *kcfg = NULL, *addr = NULL, *cert = NULL, *key = NULL;
    const char *sig_file = NULL, *client_ca = NULL, *status_addr = NULL;
    int port = 8888, status_port = -1, threads = 4, ttl = 300, verbose = KUBE_LOG_INFO, c;
    gs_policy_kind pol = GS_POLICY_FRAGLOOK, gpol = GS_POLICY_FRAGLOOK;
    while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
        switch (c) {
        case 'a': url = optarg; break;
        case 'k': kcfg = optarg; break;
        case 'A': addr = optarg; break;
        case 'c': cert = optarg; break;
        case 'K': key = optarg; break;
        case 'S': sig_file = optarg; break;
        case 'C': client_ca = optarg; break;
        case 'B': status_addr = optarg; break;
        case 'Q':
            if (gs_flag_int(PROG, "status-port", optarg, 0, 65535, &status_port) != 0)
                return 2;
            break;
        case 'v': verbose++; break;
        case 'p':
            if (gs_flag_int(PROG, "port", optarg, 0, 65535, &port) != 0)
                return 2;
            break;
        case 't':
            if (gs_flag_int(PROG, "threads", optarg, 1, 64, &threads) != 0)
                return 2;
            break;
        case 'T':
            if (gs_flag_int(PROG, "claim-ttl", optarg, 1, 86400, &ttl) != 0)
                return 2;
            break;
        case 'V': gs_flag_print_version(PROG); return 0;
        case 'P':
        case 'G':
            if (gs_policy_parse(optarg, c == 'P' ? &pol : &gpol) != 0) {
                fprintf(stderr, PROG ": --%s '%s': unknown policy\n", c == 'P' ? "policy" : "gpu-policy", optarg);
                return 2;
            }
            break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n%s", argv[optind], usage);
        return 2;
    }
    if ((cert && gs_flag_readable(PROG, "tls-cert", cert) != 0) ||
        (key && gs_flag_readable(PROG, "tls-key", key) != 0) ||
        (sig_file && gs_flag_readable(PROG, "assignment-key", sig_file) != 0) ||
        (client_ca && gs_flag_readable(PROG, "client-ca", client_ca) != 0))
        return 2;
    if (client_ca && !cert) {
        fprintf(stderr, PROG ": --client-ca needs --tls-cert and --tls-key (mutual TLS)\n");
        return 2;
    }
    if (status_addr && status_port < 0) {
        fprintf(stderr, PROG ": --status-addr needs --status-port\n");
        return 2;
    }
    kube_log_set_prefix("gpuslice-extender");
    kube_log_set_level(verbose);
    static struct ext_ctx x;
    if (ext_state_init(&x.st, pol, gpol) != 0) {
        fprintf(stderr, "gpuslice-extender: out of memory\n");
        return 1;
    }
    x.st.claim_ttl = ttl;
    static struct gs_sig_key sigkey;
    char kerr[600];
    if (sig_file) {
        if (gs_sig_key_load(sig_file, &sigkey, kerr, sizeof kerr) != 0) {
            fprintf(stderr, "gpuslice-extender: %s\n", kerr);
            return 1;
        }
        x.st.sigkey = &sigkey;
    } else {
        kube_log(KUBE_LOG_ERROR, "WARNING: no --assignment-key: assignments are written unsigned and every "
                                 "pod's gpuslice.io/assignment is counted as it stands, so a pod's owner who can "
                                 "edit it can inflate the accounting; mount the signing key and pass "
                                 "--assignment-key (the same key as the node agents)");
    }
    for (int i = 0; i < EXT_BIND_LOCKS; i++)
        pthread_mutex_init(&x.bind_mu[i], NULL);
    char err[512];
    if (!(x.kc = kube_client_new_auto(url, kcfg, err, sizeof err))) {
        fprintf(stderr, "gpuslice-extender: %s\n", err);
        return 1;
    }
    if (!client_ca)
        kube_log(KUBE_LOG_ERROR,
                 "WARNING: no --client-ca: anyone who can reach port %d can call /bind, which "
                 "binds any pod to any node with this extender's permissions; give "
                 "kube-scheduler a client certificate and pass its CA as --client-ca",
                 port);
    signal(SIGTERM, on_signal); /* before the server answers anyone */
    signal(SIGINT, on_signal);
    signal(SIGPIPE, SIG_IGN);
    const struct gs_httpd_tls tls = { cert, key, client_ca }, status_tls = { cert, key, NULL };
    struct gs_httpd *srv = gs_httpd_start_tls(addr, port, &tls, threads, handle, &x, err, sizeof err);
    struct gs_httpd *status = NULL;
    g_status_apart = status_port >= 0;
    if (srv && g_status_apart)
        status = gs_httpd_start_tls(status_addr, status_port, &status_tls, 1, handle_status, &x, err, sizeof err);
    if (!srv || (g_status_apart && !status)) {
        fprintf(stderr, "gpuslice-extender: %s\n", err);
        return 1;
    }
    if (ext_sync_start(&x) != 0) {
        fprintf(stderr, "gpuslice-extender: cannot start the sync thread\n");
        return 1;
    }
    kube_log(KUBE_LOG_INFO, "listening on %s:%d (%s), policy %s, gpu policy %s", addr ? addr : "0.0.0.0",
             gs_httpd_port(srv),
             client_ca ? "mutual TLS"
             : cert    ? "https"
                       : "http",
             gs_policy_name(pol), gs_policy_name(gpol));
    if (status)
        kube_log(KUBE_LOG_INFO, "status endpoints on %s:%d", status_addr ? status_addr : "0.0.0.0",
                 gs_httpd_port(status));
    while (!g_quit)
        sleep(1); /* a signal ends it early; pause() could miss one that came just before */
    kube_log(KUBE_LOG_INFO, "signal %d: shutting down", (int)g_quit);
    gs_httpd_stop(srv);
    gs_httpd_stop(status);
    ext_sync_stop(&x);
    kube_client_free(x.kc);
    ext_state_free(&x.st);
    return 0;
}
