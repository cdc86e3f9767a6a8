/* The gpuslice.io/assignment and /allocated parsers: good values parse to
 * the right fields, and every kind of bad value is refused with a message
 * naming the field. */
#include <stdio.h>
#include <string.h>

#include "annotation.h"
#include "check.h"

static int parse(const char *s, struct gs_assignment *a, char *err, size_t n)
{
    return gs_assignment_parse(s, strlen(s), a, err, n);
}

static void bad(const char *text, const char *needle)
{
    struct gs_assignment a;
    char err[512] = "";
    int rc = parse(text, &a, err, sizeof err);
    if (rc != -1 || !strstr(err, needle)) {
        fprintf(stderr, "input %s: rc=%d err='%s' (wanted '%s')\n", text, rc, err, needle);
        failures++;
    }
}

int main(void)
{
    struct gs_assignment a;
    char err[512];
    CHECK(parse("{\"v\":1,\"node\":\"n1\",\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":4096,"
                "\"cores\":30},{\"uuid\":\"GPU-b\",\"memory_mib\":1}],"
                "\"replicas\":[\"GPU-a::3\",\"GPU-b::0\"],\"mode\":\"share\"}",
                &a, err, sizeof err) == 0);
    CHECK(a.ngpus == 2 && strcmp(a.node, "n1") == 0 && a.share_mode == 1);
    CHECK(strcmp(a.gpus[0].uuid, "GPU-a") == 0 && a.gpus[0].memory_mib == 4096 && a.gpus[0].cores == 30 &&
          strcmp(a.gpus[0].replica, "GPU-a::3") == 0);
    CHECK(a.gpus[1].cores == 0 && strcmp(a.gpus[1].replica, "GPU-b::0") == 0);

    bad("", "not valid JSON");
    bad("{\"v\":1", "not valid JSON");
    bad("[1]", "must be a JSON object");
    bad("{\"gpus\":[]}", "\"v\"");
    bad("{\"v\":2,\"gpus\":[]}", "unsupported version v=2");
    bad("{\"v\":1,\"v\":1}", "not valid JSON"); /* duplicate keys */
    bad("{\"v\":1,\"gpus\":[],\"replicas\":[]}", "\"gpus\" must be an array");
    bad("{\"v\":1,\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":1}]}", "\"replicas\"");
    bad("{\"v\":1,\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":0}],\"replicas\":[\"GPU-a::0\"]}", "memory_mib");
    bad("{\"v\":1,\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":-5}],\"replicas\":[\"GPU-a::0\"]}", "memory_mib");
    bad("{\"v\":1,\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":\"4Gi\"}],\"replicas\":[\"GPU-a::0\"]}", "memory_mib");
    bad("{\"v\":1,\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":1,\"cores\":101}],"
        "\"replicas\":[\"GPU-a::0\"]}",
        "cores");
    bad("{\"v\":1,\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":1}],\"replicas\":[\"GPU-b::0\"]}",
        "not a replica of gpus[0]");
    bad("{\"v\":1,\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":1}],\"replicas\":[\"GPU-a::01\"]}", "replicas[0]");
    bad("{\"v\":1,\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":1}],\"replicas\":[\"GPU-a\"]}", "replicas[0]");
    bad("{\"v\":1,\"gpus\":[{\"uuid\":\"GPU a\",\"memory_mib\":1}],\"replicas\":[\"GPU a::0\"]}", "uuid");
    bad("{\"v\":1,\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":1},{\"uuid\":\"GPU-a\","
        "\"memory_mib\":1}],\"replicas\":[\"GPU-a::0\",\"GPU-a::1\"]}",
        "listed twice");
    bad("{\"v\":1,\"mode\":\"fast\",\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":1}],"
        "\"replicas\":[\"GPU-a::0\"]}",
        "\"mode\"");
    bad("{\"v\":1,\"node\":\"\",\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":1}],"
        "\"replicas\":[\"GPU-a::0\"]}",
        "\"node\"");
    /* Not NUL-terminated: the parser must stop at len. */
    const char buf[] = { '{', '"', 'v', '"', ':', '1', '}', 'X' };
    CHECK(gs_assignment_parse(buf, 7, &a, err, sizeof err) == -1 && strstr(err, "gpus"));

    char reps[4][GS_REPLICA_ID_MAX];
    CHECK(gs_allocated_parse("{\"v\":1,\"replicas\":[\"GPU-a::0\",\"GPU-b::9\"]}", 42, reps, 4, err, sizeof err) == 2);
    CHECK(strcmp(reps[1], "GPU-b::9") == 0);
    CHECK(gs_allocated_parse("{\"v\":1,\"replicas\":[]}", 21, reps, 4, err, sizeof err) == -1);
    char uuid[GS_UUID_MAX];
    unsigned k;
    CHECK(gs_replica_split("GPU-x::12", uuid, sizeof uuid, &k) == 0 && k == 12 && strcmp(uuid, "GPU-x") == 0);
    CHECK(gs_replica_split("::1", uuid, sizeof uuid, &k) == -1);
    CHECK(gs_replica_split("a::1::2", uuid, sizeof uuid, &k) == -1);
    CHECK(gs_replica_split("a::", uuid, sizeof uuid, &k) == -1);
    CHECK(gs_replica_split("a::123456", uuid, sizeof uuid, &k) == -1);
    /* gs_assignment_rebind: limits follow the GPU when it is named, else the
     * next entry for a GPU not held, in the assignment's order. */
    struct gs_assignment r3, out;
    CHECK(parse("{\"v\":1,\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":10,\"cores\":1},"
                "{\"uuid\":\"GPU-b\",\"memory_mib\":20,\"cores\":2},{\"uuid\":\"GPU-c\","
                "\"memory_mib\":30,\"cores\":3}],\"replicas\":[\"GPU-a::0\",\"GPU-b::0\","
                "\"GPU-c::0\"],\"mode\":\"share\"}",
                &r3, err, sizeof err) == 0);
    const char held[3][GS_REPLICA_ID_MAX] = { "GPU-d::4", "GPU-b::7", "GPU-e::1" };
    CHECK(gs_assignment_rebind(&r3, held, 3, &out, err, sizeof err) == 0);
    CHECK(out.ngpus == 3 && out.share_mode == 1);
    CHECK(strcmp(out.gpus[0].uuid, "GPU-d") == 0 && out.gpus[0].memory_mib == 10 && out.gpus[0].cores == 1 &&
          strcmp(out.gpus[0].replica, "GPU-d::4") == 0);
    CHECK(strcmp(out.gpus[1].uuid, "GPU-b") == 0 && out.gpus[1].memory_mib == 20 &&
          strcmp(out.gpus[1].replica, "GPU-b::7") == 0);
    CHECK(strcmp(out.gpus[2].uuid, "GPU-e") == 0 && out.gpus[2].memory_mib == 30);
    const char dup[3][GS_REPLICA_ID_MAX] = { "GPU-d::4", "GPU-d::5", "GPU-e::1" };
    CHECK(gs_assignment_rebind(&r3, dup, 3, &out, err, sizeof err) == -1 &&
          strstr(err, "two held replicas on GPU GPU-d"));
    CHECK(gs_assignment_rebind(&r3, held, 2, &out, err, sizeof err) == -1 &&
          strstr(err, "2 replicas held for an assignment of 3 GPUs"));
    const char junk[3][GS_REPLICA_ID_MAX] = { "GPU-d", "GPU-b::7", "GPU-e::1" };
    CHECK(gs_assignment_rebind(&r3, junk, 3, &out, err, sizeof err) == -1 && strstr(err, "is not a device ID"));
    return check_result("annotation parser");
}
