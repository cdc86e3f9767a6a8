/*
 * gpuslice-node-agent: the device plugin (kubelet device-plugin API
 * v1beta1), GPU inventory and health, the node's inventory annotation and
 * the metrics endpoint. See docs/device-plugin.md.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent_state.h"
#include "config_keys.h"
#include "deviceplugin_v1beta1.pb-c.h"
#include "dra_claim.h"
#include "dra_plugin.h"
#include "flags.h"
#include "grpc_server.h"
#include "metrics.h"
#include "plugin.h"
#include "text_escape.h"

/* A node label that sets the node's power exponent (node_power_exponent). */
#define GS_LABEL_POWER_EXP "gpuslice.io/power-exponent"

static volatile int g_stop;

static void on_signal(int sig)
{
    g_stop = 1;
}

static void usage(FILE *f)
{
    fputs("usage: gpuslice-node-agent [options]\n"
          "  --node NAME             this node's name (default: $NODE_NAME)\n"
          "  --resource NAME         extended resource (default gpuslice.io/gpu)\n"
          "  --replicas N            schedulable replicas per GPU, 1..1000 (default 10)\n"
          "  --plugin-dir DIR        kubelet's device-plugin dir (default /var/lib/kubelet/device-plugins)\n"
          "  --endpoint NAME         our socket in that dir (default gpuslice.sock)\n"
          "  --api-server URL        API server base URL (development/tests)\n"
          "  --kubeconfig PATH       kubeconfig (default: $KUBECONFIG, else in-cluster)\n"
          "  --no-api                run without an API server (Allocate then fails closed)\n"
          "  --state-root DIR        per-allocation state dirs (default /var/lib/gpuslice/containers)\n"
          "  --assignment-key FILE   key (a Secret shared with the extender) that signs\n"
          "                          assignments; without it they are not verified\n"
          "  --pod-resources-socket PATH  kubelet's pod-resources API (default\n"
          "                          /var/lib/kubelet/pod-resources/kubelet.sock)\n"
          "  --lib-host PATH         interposer on the host (default /usr/local/gpuslice/lib/libgpuslice.so)\n"
          "  --lib-container PATH    where containers see it (default: same as --lib-host)\n"
          "  --preload-host PATH     file mounted as /etc/ld.so.preload (default /usr/local/gpuslice/ld.so.preload)\n"
          "  --cdi                   name devices with CDI (nvidia.com/gpu=<uuid>) instead of NVIDIA_VISIBLE_DEVICES\n"
          "  --dra                   be a DRA kubelet plugin (resource.k8s.io/v1) instead of a device plugin\n"
          "  --dra-driver NAME       DRA driver name (default " GS_DRA_DRIVER_DEFAULT ")\n"
          "  --dra-registry-dir DIR  kubelet's plugin registry (default /var/lib/kubelet/plugins_registry)\n"
          "  --dra-plugins-dir DIR   kubelet's plugins dir; the socket goes in DIR/<driver> (default\n"
          "                          /var/lib/kubelet/plugins)\n"
          "  --cdi-dir DIR           where DRA mode writes CDI specs (default /var/run/cdi)\n"
          "  --metrics-addr ADDR     metrics listen address (default 0.0.0.0)\n"
          "  --metrics-port PORT     metrics port, 0 = off (default 9400)\n"
          "  --recovery-seconds N    quiet time before an unhealthy GPU is healthy again (default 300)\n"
          "  --ignore-xids LIST      benign XIDs (default 13,31,43,45,68)\n"
          "  --power-exponent X      the compute limiter's power exponent pinned in every pod,\n"
          "                          0..1 (default: GPUSLICE_POWER_EXPONENT's, docs/compute.md); the\n"
          "                          node's label gpuslice.io/power-exponent, read at start, wins\n"
          "  --share-yield-us N      pinned in every pod: a share container borrowing a light\n"
          "                          neighbour's part keeps at most N us of GPU work queued, so\n"
          "                          the neighbour's kernels do not wait behind it; 0..100000,\n"
          "                          0 = off (default: GPUSLICE_SHARE_YIELD_US's, docs/compute.md)\n"
          "  --log-level L           error|warn|info|debug (default info)\n"
          "  --version\n"
          "  --help\n",
          f);
}

static int parse_xids(const char *s, struct gs_health_opts *h)
{
    h->nignore = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int v;
        if (h->nignore >= 32 || gs_flag_int("gpuslice-node-agent", "ignore-xids", t, 0, 100000, &v) != 0)
            return -1;
        h->ignore[h->nignore++] = (unsigned long long)v;
    }
    return 0;
}

static int do_register(const char *kubelet_sock, const char *endpoint, const char *resource, char *err, size_t errlen)
{
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    o.get_preferred_allocation_available = 1;
    V1beta1__RegisterRequest r = V1BETA1__REGISTER_REQUEST__INIT;
    r.version = "v1beta1";
    r.endpoint = (char *)endpoint;
    r.resource_name = (char *)resource;
    r.options = &o;
    size_t len = v1beta1__register_request__get_packed_size(&r);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return -1;
    v1beta1__register_request__pack(&r, buf);
    uint8_t *out = NULL;
    size_t outlen = 0;
    int st = gs_rpc_call(kubelet_sock, "/v1beta1.Registration/Register", buf, len, &out, &outlen, 5000, err, errlen);
    free(buf);
    free(out);
    return st;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static int publish_inventory(struct gs_plugin *p)
{
    json_t *inv = gs_inventory_json(p->inv, p->replicas);
    char *text = json_dumps(inv, JSON_COMPACT);
    json_decref(inv);
    if (!text)
        return -1;
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", GS_ANN_INVENTORY, text);
    free(text);
    char path[400], err[512];
    snprintf(path, sizeof path, "/api/v1/nodes/%s", p->node);
    int st = kube_merge_patch(p->kc, path, patch, NULL, err, sizeof err);
    json_decref(patch);
    if (st < 200 || st >= 300) {
        kube_log(KUBE_LOG_WARN, "node %s: cannot publish %s: %s", p->node, GS_ANN_INVENTORY, err);
        return -1;
    }
    kube_log(KUBE_LOG_INFO, "node %s: published %s", p->node, GS_ANN_INVENTORY);
    return 0;
}

/* Copies a flag's text into buf, or says it is too long (never cut short:
 * a cut path or name would be another one). 0, or -1. */
static int flag_text(const char *flag, const char *val, char *buf, size_t len)
{
    if (strlen(val) >= len) {
        fprintf(stderr, "gpuslice-node-agent: --%s '%.60s...': too long (at most %zu characters)\n", flag, val,
                len - 1);
        return -1;
    }
    memcpy(buf, val, strlen(val) + 1);
    return 0;
}

/* A node-wide value of the interposer's key (GS_KEY_POWER_EXP or
 * GS_KEY_SHARE_YIELD), checked by the interposer's own parser, into buf in
 * the form it is written to limits.conf. 0, or -1 with why set. */
static int node_pin_text(int key, const char *val, char *buf, size_t len, char *why, size_t whylen)
{
    int dev;
    const struct gs_cfg_key *k = gs_key_of_slot(key, &dev);
    unsigned n;
    if (k->parse(val, k, &n, why, whylen) != 0)
        return -1;
    if (key == GS_KEY_POWER_EXP)
        snprintf(buf, len, "%u.%03u", n / 1000 % 10, n % 1000); /* milli <= 1000: one digit */
    else
        snprintf(buf, len, "%u", n);
    return 0;
}

static int node_pin_flag(int key, const char *flag, const char *val, char *buf, size_t len)
{
    char why[128];
    if (node_pin_text(key, val, buf, len, why, sizeof why) != 0) {
        fprintf(stderr, "gpuslice-node-agent: --%s '%.60s': %s\n", flag, val, why);
        return -1;
    }
    return 0;
}

/* The node's own power exponent: its label GS_LABEL_POWER_EXP (set by the
 * cluster's admin for the node's cards, e.g. from
 * bench/compute/fit_exponent.py) beats --power-exponent. A label the
 * interposer would refuse is logged and the flag's value kept: a typo must
 * not take the node's GPUs away. Read at start. */
static void node_power_exponent(struct gs_plugin *p)
{
    char path[400], err[512];
    snprintf(path, sizeof path, "/api/v1/nodes/%s", p->node);
    json_t *node = NULL;
    const char *now = p->power_exp[0] ? p->power_exp : "the interposer's default";
    if (kube_get_json(p->kc, path, &node, err, sizeof err) != 200) {
        kube_log(KUBE_LOG_WARN, "node %s: cannot read its labels (%s); power exponent %s", p->node, err, now);
        return;
    }
    json_t *labels = json_object_get(json_object_get(node, "metadata"), "labels");
    const char *val = json_string_value(json_object_get(labels, GS_LABEL_POWER_EXP));
    char buf[sizeof p->power_exp], why[128], shown[GS_ESCAPE_BUF];
    if (!val) {
        /* nothing to say: the flag's value, or the default */
    } else if (node_pin_text(GS_KEY_POWER_EXP, val, buf, sizeof buf, why, sizeof why) != 0) {
        kube_log(KUBE_LOG_ERROR, "node %s: label %s='%s': %s; power exponent %s", p->node, GS_LABEL_POWER_EXP,
                 gs_escape_shown(shown, val), why, now);
    } else {
        memcpy(p->power_exp, buf, sizeof buf);
        kube_log(KUBE_LOG_INFO, "node %s: power exponent %s from its label %s", p->node, p->power_exp,
                 GS_LABEL_POWER_EXP);
    }
    json_decref(node);
}

/* The device plugin: serves and registers until g_stop, again whenever
 * kubelet restarts; publishes the inventory annotation on health changes. */
static void run_device_plugin(struct gs_plugin *p, const char *plugin_dir, const char *endpoint)
{
    char err[1024];
    char sock[256], kubelet_sock[256];
    snprintf(sock, sizeof sock, "%s/%s", plugin_dir, endpoint);
    snprintf(kubelet_sock, sizeof kubelet_sock, "%s/kubelet.sock", plugin_dir);
    struct gs_rpc_handlers h = { .ud = p,
                                 .unary = gs_plugin_unary,
                                 .stream_method = "/v1beta1.DevicePlugin/ListAndWatch",
                                 .stream_generation = gs_plugin_generation,
                                 .stream_message = gs_plugin_list };
    unsigned published_gen = 0;
    int published = 0;
    time_t next_publish = 0;
    while (!g_stop) {
        struct gs_rpc_server *srv = gs_rpc_server_start(sock, &h, err, sizeof err);
        if (!srv) {
            kube_log(KUBE_LOG_ERROR, "%s; retrying", err);
            sleep_ms(1000);
            continue;
        }
        kube_log(KUBE_LOG_INFO, "serving %s on %s (%d GPUs x %d replicas)", p->resource, sock, p->inv->ngpus,
                 p->replicas);
        int registered = 0, attempts = 0;
        struct stat kst;
        ino_t kubelet_ino = 0;
        while (!g_stop) {
            if (!registered) {
                char rerr[512];
                int st = stat(kubelet_sock, &kst) == 0
                             ? do_register(kubelet_sock, endpoint, p->resource, rerr, sizeof rerr)
                             : -1;
                if (st == 0) {
                    registered = 1;
                    kubelet_ino = kst.st_ino;
                    kube_log(KUBE_LOG_INFO, "registered %s with kubelet (%s)", p->resource, kubelet_sock);
                } else if (attempts++ % 50 == 0) {
                    kube_log(KUBE_LOG_WARN, "registration with kubelet failed: %s; retrying",
                             st == -1 ? "kubelet.sock not there yet" : rerr);
                }
            }
            struct stat ss;
            if (stat(sock, &ss) != 0) {
                kube_log(KUBE_LOG_WARN,
                         "our socket %s was removed (kubelet restarted?): serving and "
                         "registering again",
                         sock);
                break;
            }
            if (registered && (stat(kubelet_sock, &kst) != 0 || kst.st_ino != kubelet_ino)) {
                kube_log(KUBE_LOG_WARN, "kubelet.sock was recreated (kubelet restarted): registering again");
                /* kubelet forgets plugins when it restarts; a fresh server
                 * gives it fresh streams. */
                break;
            }
            if (p->kc && time(NULL) >= next_publish) {
                unsigned gen = gs_plugin_generation(p);
                if (!published || gen != published_gen) {
                    if (publish_inventory(p) == 0) {
                        published = 1;
                        published_gen = gen;
                    } else {
                        next_publish = time(NULL) + 2;
                    }
                }
            }
            sleep_ms(100);
        }
        gs_rpc_server_stop(srv);
    }
}

int main(int argc, char **argv)
{
    static struct gs_plugin plug;
    static struct gs_inventory inv;
    static struct gs_podcache pods;
    struct gs_plugin *p = &plug;
    const char *plugin_dir = "/var/lib/kubelet/device-plugins", *endpoint = "gpuslice.sock";
    const char *api = NULL, *kubeconfig = NULL, *metrics_addr = "0.0.0.0";
    const char *node = getenv("NODE_NAME");
    int no_api = 0, metrics_port = 9400;
    struct gs_health_opts hopts = { .recovery_s = 300 };
    parse_xids("13,31,43,45,68", &hopts);
    snprintf(p->resource, sizeof p->resource, "gpuslice.io/gpu");
    p->replicas = 10;
    snprintf(p->lib_host, sizeof p->lib_host, "/usr/local/gpuslice/lib/libgpuslice.so");
    snprintf(p->preload_host, sizeof p->preload_host, "/usr/local/gpuslice/ld.so.preload");
    snprintf(p->state_root, sizeof p->state_root, "/var/lib/gpuslice/containers");
    snprintf(p->podres_socket, sizeof p->podres_socket, "/var/lib/kubelet/pod-resources/kubelet.sock");
    const char *lib_container = NULL, *key_file = NULL;
    static struct gs_sig_key sigkey;
    static struct gs_dra dra;
    int dra_mode = 0;
    snprintf(dra.driver, sizeof dra.driver, GS_DRA_DRIVER_DEFAULT);
    snprintf(dra.registry_dir, sizeof dra.registry_dir, "/var/lib/kubelet/plugins_registry");
    snprintf(dra.plugins_dir, sizeof dra.plugins_dir, "/var/lib/kubelet/plugins");
    snprintf(dra.cdi_dir, sizeof dra.cdi_dir, "/var/run/cdi");
    kube_log_set_prefix("gpuslice-node-agent");
    static const struct option opts[] = { { "node", 1, 0, 'n' },
                                          { "resource", 1, 0, 'r' },
                                          { "replicas", 1, 0, 'R' },
                                          { "plugin-dir", 1, 0, 'd' },
                                          { "endpoint", 1, 0, 'e' },
                                          { "api-server", 1, 0, 'a' },
                                          { "kubeconfig", 1, 0, 'k' },
                                          { "no-api", 0, 0, 'N' },
                                          { "state-root", 1, 0, 's' },
                                          { "lib-host", 1, 0, 'l' },
                                          { "lib-container", 1, 0, 'L' },
                                          { "preload-host", 1, 0, 'p' },
                                          { "cdi", 0, 0, 'c' },
                                          { "metrics-addr", 1, 0, 'm' },
                                          { "metrics-port", 1, 0, 'M' },
                                          { "recovery-seconds", 1, 0, 'h' },
                                          { "ignore-xids", 1, 0, 'x' },
                                          { "log-level", 1, 0, 'v' },
                                          { "power-exponent", 1, 0, 'W' },
                                          { "share-yield-us", 1, 0, 'Y' },
                                          { "pod-resources-socket", 1, 0, 'P' },
                                          { "assignment-key", 1, 0, 'K' },
                                          { "dra", 0, 0, 'D' },
                                          { "dra-driver", 1, 0, 'E' },
                                          { "dra-registry-dir", 1, 0, 'G' },
                                          { "dra-plugins-dir", 1, 0, 'I' },
                                          { "cdi-dir", 1, 0, 'C' },
                                          { "version", 0, 0, 'V' },
                                          { "help", 0, 0, 'H' },
                                          { 0, 0, 0, 0 } };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'n': node = optarg; break;
        case 'V': gs_flag_print_version("gpuslice-node-agent"); return 0;
        case 'K': key_file = optarg; break;
        case 'r': snprintf(p->resource, sizeof p->resource, "%s", optarg); break;
        case 'R':
            if (gs_flag_int("gpuslice-node-agent", "replicas", optarg, 1, 1000, &p->replicas))
                return 2;
            break;
        case 'd': plugin_dir = optarg; break;
        case 'e': endpoint = optarg; break;
        case 'a': api = optarg; break;
        case 'k': kubeconfig = optarg; break;
        case 'N': no_api = 1; break;
        case 's': snprintf(p->state_root, sizeof p->state_root, "%s", optarg); break;
        case 'P': snprintf(p->podres_socket, sizeof p->podres_socket, "%s", optarg); break;
        case 'l': snprintf(p->lib_host, sizeof p->lib_host, "%s", optarg); break;
        case 'L': lib_container = optarg; break;
        case 'p': snprintf(p->preload_host, sizeof p->preload_host, "%s", optarg); break;
        case 'c': p->cdi = 1; break;
        case 'D': dra_mode = 1; break;
        case 'E':
            if (flag_text("dra-driver", optarg, dra.driver, sizeof dra.driver))
                return 2;
            break;
        case 'G':
            if (flag_text("dra-registry-dir", optarg, dra.registry_dir, sizeof dra.registry_dir))
                return 2;
            break;
        case 'I':
            if (flag_text("dra-plugins-dir", optarg, dra.plugins_dir, sizeof dra.plugins_dir))
                return 2;
            break;
        case 'C':
            if (flag_text("cdi-dir", optarg, dra.cdi_dir, sizeof dra.cdi_dir))
                return 2;
            break;
        case 'm': metrics_addr = optarg; break;
        case 'M':
            if (gs_flag_int("gpuslice-node-agent", "metrics-port", optarg, 0, 65535, &metrics_port))
                return 2;
            break;
        case 'h':
            if (gs_flag_int("gpuslice-node-agent", "recovery-seconds", optarg, 0, 86400, &hopts.recovery_s))
                return 2;
            break;
        case 'x':
            if (parse_xids(optarg, &hopts))
                return 2;
            break;
        case 'W':
            if (node_pin_flag(GS_KEY_POWER_EXP, "power-exponent", optarg, p->power_exp, sizeof p->power_exp))
                return 2;
            break;
        case 'Y':
            if (node_pin_flag(GS_KEY_SHARE_YIELD, "share-yield-us", optarg, p->share_yield_us,
                              sizeof p->share_yield_us))
                return 2;
            break;
        case 'v': {
            int l = kube_log_level_parse(optarg);
            if (l < 0) {
                fprintf(stderr,
                        "gpuslice-node-agent: --log-level '%s': use error, warn, info "
                        "or debug\n",
                        optarg);
                return 2;
            }
            kube_log_set_level(l);
            break;
        }
        case 'H': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpuslice-node-agent: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!node || !*node) {
        fprintf(stderr, "gpuslice-node-agent: no node name: pass --node or set NODE_NAME "
                        "(the DaemonSet sets it from spec.nodeName)\n");
        return 2;
    }
    if (strlen(endpoint) == 0 || strchr(endpoint, '/') || strlen(plugin_dir) + strlen(endpoint) + 2 > 200) {
        fprintf(stderr, "gpuslice-node-agent: --endpoint must be a short file name\n");
        return 2;
    }
    const char *lc = lib_container ? lib_container : p->lib_host;
    if (strlen(lc) >= sizeof p->lib_container) {
        fprintf(stderr, "gpuslice-node-agent: --lib-container path too long\n");
        return 2;
    }
    memcpy(p->lib_container, lc, strlen(lc) + 1);
    if (dra_mode) {
        char derr[300];
        if (gs_dra_check(&dra, derr, sizeof derr) != 0) {
            fprintf(stderr, "gpuslice-node-agent: %s\n", derr);
            return 2;
        }
        dra.p = p;
    }
    snprintf(p->node, sizeof p->node, "%s", node);
#ifdef GPUSLICE_TEST_HOOKS
    /* Only in builds with the tests (BUILD_TESTING): never in the images. */
    const char *delay = getenv("GPUSLICE_TEST_ALLOCATE_DELAY_MS");
    p->test_allocate_delay_ms = delay ? atoi(delay) : 0;
#endif
    pthread_mutex_init(&p->lock, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[1024];
    if (key_file) {
        if (gs_sig_key_load(key_file, &sigkey, err, sizeof err) != 0) {
            kube_log(KUBE_LOG_ERROR, "%s", err);
            return 1;
        }
        p->sigkey = &sigkey;
    } else if (!dra_mode) { /* DRA mode reads the scheduler's allocation, not assignments */
        kube_log(KUBE_LOG_ERROR,
                 "WARNING: no --assignment-key: the %s of a pod is NOT verified, so a "
                 "pod's owner who can edit its annotations can raise its limits before its "
                 "container first starts (a restart keeps the first one accepted); mount the "
                 "extender's signing key and pass --assignment-key",
                 GS_ANN_ASSIGNMENT);
    }
    if (gs_agent_state_init(p->state_root, err, sizeof err) != 0) {
        kube_log(KUBE_LOG_ERROR, "%s", err);
        return 1;
    }
    if (gs_inventory_init(&inv, err, sizeof err) != 0) {
        kube_log(KUBE_LOG_ERROR, "inventory: %s", err);
        return 1;
    }
    p->inv = &inv;
    {
        char uuids[GS_INV_MAX_GPUS][GS_UUID_MAX];
        for (int g = 0; g < inv.ngpus; g++)
            snprintf(uuids[g], sizeof uuids[g], "%s", inv.gpus[g].uuid);
        if (gs_agent_ledgers_init(p->state_root, (const char(*)[GS_UUID_MAX])uuids, inv.ngpus, err, sizeof err) != 0) {
            kube_log(KUBE_LOG_ERROR, "%s", err);
            return 1;
        }
    }
    pthread_t health;
    if (gs_health_start(&inv, &hopts, &g_stop, &health) != 0) {
        kube_log(KUBE_LOG_ERROR, "cannot start the health thread");
        return 1;
    }
    if (!no_api) {
        p->kc = kube_client_new_auto(api, kubeconfig, err, sizeof err);
        if (!p->kc) {
            kube_log(KUBE_LOG_ERROR, "API client: %s", err);
            g_stop = 1;
            pthread_join(health, NULL);
            return 1;
        }
        node_power_exponent(p);
        /* DRA mode reads claims, not pods: no pod watch. */
        if (!dra.p && gs_podcache_start(&pods, p->kc, p->node, &g_stop) != 0) {
            kube_log(KUBE_LOG_ERROR, "cannot start the pod watch");
            return 1;
        }
        if (!dra.p)
            p->pods = &pods;
    }
    struct gs_metrics *metrics = NULL;
    if (metrics_port > 0) {
        metrics = gs_metrics_start(metrics_addr, metrics_port, &inv, p->state_root, p->replicas, err, sizeof err);
        if (!metrics)
            kube_log(KUBE_LOG_ERROR, "%s (continuing without metrics)", err);
    }

    if (dra.p)
        gs_dra_run(&dra, &g_stop);
    else
        run_device_plugin(p, plugin_dir, endpoint);
    kube_log(KUBE_LOG_INFO, "stopping");
    gs_metrics_stop(metrics);
    pthread_join(health, NULL);
    if (p->pods)
        gs_podcache_join(&pods);
    kube_client_free(p->kc);
    return 0;
}
