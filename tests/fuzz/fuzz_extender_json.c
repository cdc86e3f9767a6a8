/* Fuzzes the extender's JSON entry points: ExtenderArgs through filter and
 * prioritize against a small cache (two GPU nodes, one assigned pod), and the
 * gpuslice.io/scheduling parser. Invariant: always a well-formed answer. */
#include <jansson.h>
#include <string.h>

#include "fuzz_target.h"
#include "podspec.h"
#include "state.h"
#include "verbs.h"

static struct ext_state g_st;

static void setup(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    ext_state_init(&g_st, GS_POLICY_BINPACK, GS_POLICY_BINPACK);
    const char *inv = "{\"v\":1,\"gpus\":[{\"uuid\":\"GPU-a\",\"model\":\"H100\",\"memory_mib\":"
                      "81920,\"replicas\":10,\"healthy\":true,\"numa\":0},{\"uuid\":\"GPU-b\","
                      "\"model\":\"H100\",\"memory_mib\":81920,\"replicas\":10,\"healthy\":true,"
                      "\"numa\":1}]}";
    for (int i = 0; i < 2; i++) {
        json_t *n = json_pack("{s:{s:s,s:s,s:{s:s}}}", "metadata", "name", i ? "n2" : "n1", "resourceVersion", "5",
                              "annotations", "gpuslice.io/gpu-inventory", inv);
        ext_state_node_event(&g_st, "ADDED", n, 0);
        json_decref(n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    struct gs_sched_opts o;
    char err[256];
    if (gs_sched_opts_parse((const char *)data, size, &o, err, sizeof err) != 0)
        FUZZ_CHECK(err[0] != '\0');
    json_t *args = json_loadb((const char *)data, size, 0, NULL);
    if (!args)
        return 0;
    int bad = 0;
    json_t *f = ext_filter(&g_st, args, &bad);
    FUZZ_CHECK(json_is_object(f) && json_is_string(json_object_get(f, "Error")));
    json_t *p = ext_prioritize(&g_st, args, &bad);
    FUZZ_CHECK(json_is_array(p) || (bad && json_is_object(p)));
    json_decref(f);
    json_decref(p);
    json_decref(args);
    return 0;
}
