/* The DRA driver's pure parts (src/deviceplugin/dra_claim.c, dra_objects.c,
 * container_edits.c), without gRPC, API server or files: a claim's results
 * summed per GPU and ordered by NVML index, its pin, the ResourceSlice's
 * devices (health, attributes, capacity), and the CDI spec of a claim. The
 * hostile claims and the objects' schemas are checked end to end in
 * test_dra.py and tests/deploy/test_dra_schemas.py. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "container_edits.h"
#include "dra_claim.h"
#include "dra_objects.h"

static struct gs_node_view node(void)
{
    struct gs_node_view v;
    memset(&v, 0, sizeof v);
    v.node = "n1";
    v.ngpus = 2;
    snprintf(v.gpus[0].uuid, sizeof v.gpus[0].uuid, "GPU-b");
    v.gpus[0].index = 3;
    v.gpus[0].mem_total_mib = 40960;
    v.gpus[0].healthy = 1;
    snprintf(v.gpus[1].uuid, sizeof v.gpus[1].uuid, "GPU-a");
    v.gpus[1].index = 0;
    v.gpus[1].mem_total_mib = 81920;
    v.gpus[1].healthy = 1;
    return v;
}

#define RES(dev, mem, cores)                                                                                           \
    "{\"request\":\"r\",\"driver\":\"gpu.gpuslice.io\",\"pool\":\"n1\",\"device\":\"" dev                              \
    "\",\"consumedCapacity\":{\"memory\":\"" mem "\",\"cores\":\"" cores "\"}}"
#define CLAIM(results)                                                                                                 \
    "{\"metadata\":{\"uid\":\"u1\"},\"status\":{\"allocation\":{\"devices\":{\"results\":[" results "]}}}}"

static void claims(void)
{
    struct gs_node_view v = node();
    struct gs_dra_alloc al;
    char err[512], pin[512];
    /* Two results on gpu-3, one on gpu-0: summed per GPU, NVML order. */
    const char *c = CLAIM(RES("gpu-3", "1Gi", "10") "," RES("gpu-0", "2048Mi", "0") "," RES("gpu-3", "3Gi", "20"));
    CHECK(gs_dra_claim_parse(c, strlen(c), GS_DRA_DRIVER_DEFAULT, &v, "u1", &al, err, sizeof err) == 0);
    CHECK(al.nresults == 3 && al.a.ngpus == 2);
    gs_dra_pin_text(&al, "u1", pin, sizeof pin);
    CHECK(strcmp(pin, "dra-claim u1\nmode cap\nGPU-a 2048 0\nGPU-b 4096 30\n") == 0);
    /* The limits file of the claim, as PreStartContainer writes one. */
    struct gs_holder h = { .ns = "default", .pod = "claim", .container = "dra" };
    char text[4096];
    gs_limits_text(&v, &h, "u1", &al.a, al.gpu, al.order, (size_t)al.a.ngpus, text, sizeof text);
    CHECK(strstr(text, "GPUSLICE_MEMORY_LIMIT_0=2048Mi\n") && strstr(text, "GPUSLICE_MEMORY_LIMIT_1=4096Mi\n"));
    CHECK(strstr(text, "GPUSLICE_CORES_1=30\n") && !strstr(text, "GPUSLICE_CORES_0"));
    CHECK(strstr(text, "the limits of default/claim/dra (uid u1)"));
    /* An unhealthy device is refused; the same claim on a healthy one is not. */
    v.gpus[0].healthy = 0;
    CHECK(gs_dra_claim_parse(c, strlen(c), GS_DRA_DRIVER_DEFAULT, &v, "u1", &al, err, sizeof err) == -1);
    CHECK(strstr(err, "unhealthy") != NULL);
    /* Whole cores only; 100 is the most; a result of another driver is skipped. */
    const char *frac = CLAIM(RES("gpu-0", "1Gi", "500m"));
    CHECK(gs_dra_claim_parse(frac, strlen(frac), GS_DRA_DRIVER_DEFAULT, &v, "u1", &al, err, sizeof err) == -1);
    const char *other = CLAIM(RES("gpu-0", "1Gi", "100") ",{\"request\":\"x\",\"driver\":\"x.io\",\"pool\":\"p\","
                                                         "\"device\":\"d\"}");
    CHECK(gs_dra_claim_parse(other, strlen(other), GS_DRA_DRIVER_DEFAULT, &v, "u1", &al, err, sizeof err) == 0);
    CHECK(al.nresults == 1 && al.a.gpus[0].cores == 100);
}

#define CFG(params) "{\"source\":\"FromClaim\",\"opaque\":{\"driver\":\"gpu.gpuslice.io\",\"parameters\":" params "}}"
#define SHARE "{\"apiVersion\":\"gpu.gpuslice.io/v1\",\"kind\":\"GpuConfig\",\"mode\":\"share\"}"
#define CAP "{\"apiVersion\":\"gpu.gpuslice.io/v1\",\"kind\":\"GpuConfig\",\"mode\":\"cap\"}"
#define CLAIM_CFG(results, configs)                                                                                    \
    "{\"metadata\":{\"uid\":\"u1\"},\"status\":{\"allocation\":{\"devices\":{\"results\":[" results                    \
    "],\"config\":[" configs "]}}}}"

/* The compute mode from the allocation's opaque configurations. */
static void configs(void)
{
    struct gs_node_view v = node();
    struct gs_dra_alloc al;
    char err[512], pin[512];
    static const struct {
        const char *claim;
        int ok, share;
    } cases[] = {
        { CLAIM_CFG(RES("gpu-0", "1Gi", "30"), CFG(SHARE)), 1, 1 },
        { CLAIM_CFG(RES("gpu-0", "1Gi", "30"), CFG(CAP)), 1, 0 },
        { CLAIM_CFG(RES("gpu-0", "1Gi", "30"), CFG(SHARE) "," CFG(SHARE)), 1, 1 },
        /* another driver's configuration is not ours to read */
        { CLAIM_CFG(RES("gpu-0", "1Gi", "30"), "{\"opaque\":{\"driver\":\"x.io\",\"parameters\":{\"a\":1}}}"), 1, 0 },
        { CLAIM_CFG(RES("gpu-0", "1Gi", "30"), CFG(SHARE) "," CFG(CAP)), 0, 0 },
        { CLAIM_CFG(RES("gpu-0", "1Gi", "30"),
                    CFG("{\"apiVersion\":\"gpu.gpuslice.io/v1\",\"kind\":\"GpuConfig\",\"mode\":\"fast\"}")),
          0, 0 },
        { CLAIM_CFG(RES("gpu-0", "1Gi", "30"), CFG("{\"apiVersion\":\"gpu.gpuslice.io/v1\",\"kind\":\"GpuConfig\","
                                                   "\"mode\":\"share\",\"weight\":1000}")),
          0, 0 },
        { CLAIM_CFG(RES("gpu-0", "1Gi", "30"),
                    CFG("{\"apiVersion\":\"v1\",\"kind\":\"GpuConfig\",\"mode\":\"share\"}")),
          0, 0 },
        { CLAIM_CFG(RES("gpu-0", "1Gi", "30"), CFG("\"share\"")), 0, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = gs_dra_claim_parse(cases[i].claim, strlen(cases[i].claim), GS_DRA_DRIVER_DEFAULT, &v, "u1", &al, err,
                                    sizeof err);
        CHECK((rc == 0) == cases[i].ok);
        if (rc == 0) {
            CHECK(al.a.share_mode == cases[i].share);
            gs_dra_pin_text(&al, "u1", pin, sizeof pin);
            CHECK(strstr(pin, cases[i].share ? "\nmode share\n" : "\nmode cap\n") != NULL);
        } else {
            CHECK(strstr(err, "config[") != NULL);
        }
    }
}

static const char *attr(json_t *dev, const char *name, const char *type)
{
    return json_string_value(json_object_get(json_object_get(json_object_get(dev, "attributes"), name), type));
}

static void slice(void)
{
    struct gs_nvml_gpu g[3];
    memset(g, 0, sizeof g);
    for (int i = 0; i < 3; i++) {
        g[i].index = (unsigned)i;
        snprintf(g[i].uuid, sizeof g[i].uuid, "GPU-%d", i);
        snprintf(g[i].model, sizeof g[i].model, "NVIDIA H100");
        g[i].mem_total = (81559ULL << 20) + 12345; /* not whole MiB: the capacity is */
        g[i].healthy = i != 1;
        g[i].numa = i == 2 ? -1 : 0;
        g[i].cc_major = i == 2 ? -1 : 9;
        g[i].cc_minor = i == 2 ? -1 : 0;
    }
    json_t *s = gs_dra_slice("n1", GS_DRA_DRIVER_DEFAULT, 7, g, 3, "580.65.06");
    json_t *spec = json_object_get(s, "spec"), *devs = json_object_get(spec, "devices");
    CHECK(strcmp(json_string_value(json_object_get(json_object_get(s, "metadata"), "name")), "n1-gpu.gpuslice.io") ==
          0);
    CHECK(json_integer_value(json_object_get(json_object_get(spec, "pool"), "generation")) == 7);
    CHECK(json_array_size(devs) == 2); /* GPU 1 is unhealthy: left out */
    json_t *d0 = json_array_get(devs, 0), *d2 = json_array_get(devs, 1);
    CHECK(strcmp(json_string_value(json_object_get(d2, "name")), "gpu-2") == 0);
    CHECK(json_is_true(json_object_get(d0, "allowMultipleAllocations")));
    CHECK(strcmp(attr(d0, "driverVersion", "version"), "580.65.6") == 0);
    CHECK(strcmp(attr(d0, "computeCapability", "version"), "9.0.0") == 0);
    CHECK(!json_object_get(json_object_get(d2, "attributes"), "computeCapability"));
    CHECK(!json_object_get(json_object_get(d2, "attributes"), "numaNode"));
    json_t *mem = json_object_get(json_object_get(d0, "capacity"), GS_DRA_CAP_MEMORY);
    CHECK(strcmp(json_string_value(json_object_get(mem, "value")), "81559Mi") == 0);
    json_decref(s);
    /* A driver version that is not numeric is left out, not mangled. */
    s = gs_dra_slice("n1", GS_DRA_DRIVER_DEFAULT, 1, g, 1, "580.65.06-open");
    CHECK(!json_object_get(
        json_object_get(json_array_get(json_object_get(json_object_get(s, "spec"), "devices"), 0), "attributes"),
        "driverVersion"));
    json_decref(s);
}

static void cdi(void)
{
    struct gs_alloc_dirs d = { .key = "a-1", .state_dir = "/st/a-1", .limits_dir = "/st/.limits/a-1" };
    const char *uuids[] = { "GPU-a" };
    struct gs_edits_in in = { .state_root = "/st",
                              .lib_host = "/h/lib.so",
                              .lib_container = "/c/lib.so",
                              .preload_host = "/h/preload",
                              .dirs = &d,
                              .uuids = uuids,
                              .n = 1,
                              .visible_env = 1 };
    static struct gs_container_edits e;
    char err[256];
    CHECK(gs_container_edits(&in, &e, err, sizeof err) == 0);
    json_t *spec = gs_dra_cdi_spec("u1", &e);
    char *text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK(strstr(text, "\"kind\":\"gpuslice.io/gpu\"") && strstr(text, "\"name\":\"u1\""));
    CHECK(strstr(text, "\"NVIDIA_VISIBLE_DEVICES=GPU-a\""));
    CHECK(strstr(text, "{\"containerPath\":\"/etc/gpuslice\",\"hostPath\":\"/st/.limits/a-1\",\"options\":[\"ro\","));
    CHECK(strstr(text, "{\"containerPath\":\"/var/run/gpuslice\",\"hostPath\":\"/st/a-1\",\"options\":[\"rw\","));
    CHECK(strstr(text, "\"containerPath\":\"/var/run/gpuslice-ledger/GPU-a.ledger\""));
    free(text);
    json_decref(spec);
}

int main(void)
{
    claims();
    configs();
    slice();
    cdi();
    return check_result("dra objects");
}
