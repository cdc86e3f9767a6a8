/* The node agent's pure decisions (src/deviceplugin/placement.c), without
 * gRPC, API server or files: ID checks and ordering, the state key, pod
 * matching, the preferred-allocation hint, PreStartContainer's rule and
 * its swap fit re-check, and the limits file. */
#include <stdio.h>
#include <string.h>

#include "placement.h"
#include "check.h"

static struct gs_node_view node(void)
{
    struct gs_node_view v;
    memset(&v, 0, sizeof v);
    v.node = "n1";
    v.replicas = 4;
    v.ngpus = 2;
    /* NVML order differs from the inventory order, as it may. */
    snprintf(v.gpus[0].uuid, sizeof v.gpus[0].uuid, "GPU-b");
    v.gpus[0].index = 1;
    v.gpus[0].mem_total_mib = 8000;
    snprintf(v.gpus[1].uuid, sizeof v.gpus[1].uuid, "GPU-a");
    v.gpus[1].index = 0;
    v.gpus[1].mem_total_mib = 8000;
    return v;
}

static struct gs_pod pod(const char *name, char *assignment, char *allocated, int seq)
{
    struct gs_pod p;
    memset(&p, 0, sizeof p);
    snprintf(p.ns, sizeof p.ns, "default");
    snprintf(p.name, sizeof p.name, "%s", name);
    snprintf(p.uid, sizeof p.uid, "uid-%s", name);
    p.bound_seq = (unsigned long long)seq;
    p.assignment = assignment;
    p.allocated = allocated;
    return p;
}

#define ONE(uuid, k, mem, cores)                                                                                       \
    "{\"v\":1,\"node\":\"n1\",\"gpus\":[{\"uuid\":\"" uuid "\",\"memory_mib\":" #mem ",\"cores\":" #cores              \
    "}],\"replicas\":[\"" uuid "::" #k "\"]}"

int main(void)
{
    struct gs_node_view v = node();
    char msg[512];
    int gpu[GS_ASSIGN_MAX_GPUS], order[GS_ASSIGN_MAX_GPUS];

    /* IDs: sorted into NVML order; bad ones refused with a reason. */
    char *two[] = { "GPU-b::1", "GPU-a::3" };
    CHECK(gs_ids_check(&v, "t", two, 2, gpu, order, msg, sizeof msg) == 0);
    CHECK(gpu[0] == 0 && gpu[1] == 1 && order[0] == 1 && order[1] == 0);
    char *same[] = { "GPU-a::1", "GPU-a::2" };
    CHECK(gs_ids_check(&v, "t", same, 2, gpu, order, msg, sizeof msg) == GS_ST_INVALID && strstr(msg, "same GPU"));
    char *far[] = { "GPU-a::4" };
    CHECK(gs_ids_check(&v, "t", far, 1, gpu, order, msg, sizeof msg) == GS_ST_FAILED_PRECONDITION &&
          strstr(msg, "not a device of node n1"));
    char *junk[] = { "GPU-a" };
    CHECK(gs_ids_check(&v, "t", junk, 1, gpu, order, msg, sizeof msg) == GS_ST_INVALID);

    /* The state key does not depend on the order kubelet lists IDs in. */
    char k1[32], k2[32];
    char *rev[] = { "GPU-a::3", "GPU-b::1" };
    gs_alloc_key(two, 2, k1, sizeof k1);
    gs_alloc_key(rev, 2, k2, sizeof k2);
    CHECK(strcmp(k1, k2) == 0 && strncmp(k1, "a-", 2) == 0 && strlen(k1) == 18);
    gs_alloc_key(far, 1, k2, sizeof k2);
    CHECK(strcmp(k1, k2) != 0);

    /* Matching: exact IDs, same GPUs, another node, malformed. */
    struct gs_pod pods[4] = {
        pod("p1", ONE("GPU-a", 1, 1000, 10), NULL, 2),
        pod("p2", ONE("GPU-a", 2, 2000, 20), NULL, 1),
        pod("far",
            "{\"v\":1,\"node\":\"n2\",\"gpus\":[{\"uuid\":\"GPU-a\",\"memory_mib\":1}],"
            "\"replicas\":[\"GPU-a::0\"]}",
            NULL, 3),
        pod("bad", "{\"v\":1,\"gpus\":[],\"replicas\":[\"GPU-a::1\"]}", NULL, 4),
    };
    struct gs_match m;
    char *a1[] = { "GPU-a::1" };
    gs_match_pods(&v, pods, 4, a1, 1, &m);
    CHECK(m.ngpu_matches == 2 && m.nmatches == 1 && strcmp(m.names, "default/p1") == 0);
    CHECK(strstr(m.bad, "default/bad") && m.bad_mentions);

    /* The hint: the first-bound pod (p2, bound_seq 1) gets its own replica;
     * with it taken, p2 gets another replica of its GPU. */
    struct gs_assignment as[4];
    int cand[4], ncand = 0;
    gs_prefer_candidates(&v, pods, 4, as, cand, &ncand);
    CHECK(ncand == 2 && cand[0] == 1 && cand[1] == 0);
    char *avail[] = { "GPU-a::0", "GPU-a::1", "GPU-a::2", "GPU-b::0" };
    char *chosen[1] = { NULL };
    CHECK(gs_prefer(pods, 4, as, cand, ncand, avail, 4, NULL, 0, 1, chosen) == 1 && strcmp(chosen[0], "GPU-a::2") == 0);
    char *avail2[] = { "GPU-a::3", "GPU-b::0" };
    CHECK(gs_prefer(pods, 4, as, cand, ncand, avail2, 2, NULL, 0, 1, chosen) == 1 &&
          strcmp(chosen[0], "GPU-a::3") == 0);
    char *avail3[] = { "GPU-b::0" };
    CHECK(gs_prefer(pods, 4, as, cand, ncand, avail3, 1, NULL, 0, 1, chosen) == 0);

    /* The swap re-check counts the other pods on the GPU (p1 + p2 use
     * 3000 of 8000 MiB and 30 % of cores). */
    struct gs_pod self = pod("new", NULL, NULL, 9);
    struct gs_assignment eff;
    char err[256], why[1000];
    CHECK(gs_assignment_parse(ONE("GPU-a", 3, 5000, 70), strlen(ONE("GPU-a", 3, 5000, 70)), &eff, err, sizeof err) ==
          0);
    CHECK(gs_fits_on_held(&v, pods, 4, &self, &eff, why, sizeof why) == 1);
    eff.gpus[0].memory_mib = 5001;
    CHECK(gs_fits_on_held(&v, pods, 4, &self, &eff, why, sizeof why) == 0 && strstr(why, "memory") &&
          strstr(why, "default/p2 2000Mi/20%"));
    eff.gpus[0].memory_mib = 10;
    eff.gpus[0].cores = 71;
    CHECK(gs_fits_on_held(&v, pods, 4, &self, &eff, why, sizeof why) == 0 && strstr(why, "cores"));

    /* PreStartContainer's rule: the pod may start on the replicas it names,
     * on other replicas of its GPUs, or where it is already recorded;
     * on other GPUs only after the fit re-check; never for another node or
     * another GPU count. */
    struct gs_assignment a;
    int recorded = -1;
    CHECK(gs_assignment_parse(pods[0].assignment, strlen(pods[0].assignment), &a, err, sizeof err) == 0);
    CHECK(gs_held_verdict_of(&v, &pods[0], &a, a1, 1, &eff, &recorded, why, sizeof why) == GS_HELD_AS_ASSIGNED &&
          !recorded && eff.gpus[0].memory_mib == 1000);
    char *other_replica[] = { "GPU-a::3" };
    CHECK(gs_held_verdict_of(&v, &pods[0], &a, other_replica, 1, &eff, &recorded, why, sizeof why) ==
              GS_HELD_AS_ASSIGNED &&
          strcmp(eff.gpus[0].replica, "GPU-a::3") == 0);
    char *other_gpu[] = { "GPU-b::0" };
    CHECK(gs_held_verdict_of(&v, &pods[0], &a, other_gpu, 1, &eff, &recorded, why, sizeof why) ==
              GS_HELD_ON_OTHER_GPUS &&
          !recorded && strcmp(eff.gpus[0].uuid, "GPU-b") == 0 && eff.gpus[0].memory_mib == 1000);
    struct gs_pod moved = pod("moved", pods[0].assignment, "{\"v\":1,\"replicas\":[\"GPU-b::0\"]}", 5);
    CHECK(gs_held_verdict_of(&v, &moved, &a, other_gpu, 1, &eff, &recorded, why, sizeof why) == GS_HELD_AS_ASSIGNED &&
          recorded);
    CHECK(gs_held_verdict_of(&v, &moved, &a, a1, 1, &eff, &recorded, why, sizeof why) == GS_HELD_AS_ASSIGNED &&
          !recorded);
    CHECK(gs_held_verdict_of(&v, &pods[0], &a, two, 2, &eff, &recorded, why, sizeof why) == GS_HELD_REFUSE &&
          strstr(why, "2 replicas held for an assignment of 1 GPUs"));
    CHECK(gs_assignment_parse(pods[2].assignment, strlen(pods[2].assignment), &a, err, sizeof err) == 0);
    char *far_held[] = { "GPU-a::0" };
    CHECK(gs_held_verdict_of(&v, &pods[2], &a, far_held, 1, &eff, &recorded, why, sizeof why) == GS_HELD_REFUSE &&
          strcmp(why, "another node") == 0);

    /* The limits file: GPU j in NVML order. */
    struct gs_assignment two_a;
    const char *t = "{\"v\":1,\"node\":\"n1\",\"gpus\":[{\"uuid\":\"GPU-b\",\"memory_mib\":300,"
                    "\"cores\":30},{\"uuid\":\"GPU-a\",\"memory_mib\":100}],\"replicas\":"
                    "[\"GPU-b::1\",\"GPU-a::3\"],\"mode\":\"share\"}";
    CHECK(gs_assignment_parse(t, strlen(t), &two_a, err, sizeof err) == 0);
    CHECK(gs_ids_check(&v, "t", two, 2, gpu, order, msg, sizeof msg) == 0);
    struct gs_holder h = { "default", "p", "main" };
    char text[1024];
    gs_limits_text(&v, &h, "uid-p", &two_a, gpu, order, 2, text, sizeof text);
    CHECK(strstr(text, "GPUSLICE_CONTAINER=default/p/main\nGPUSLICE_COMPUTE_MODE=share\n"));
    CHECK(strstr(text, "GPUSLICE_MEMORY_LIMIT_0=100Mi\nGPUSLICE_MEMORY_LIMIT_1=300Mi\n"
                       "GPUSLICE_CORES_1=30\n"));
    /* Issue 27, findings 6 and 7: what the pod's environment could override
     * is pinned (the file's value wins for node-rule keys). */
    CHECK(strstr(text, "\nGPUSLICE_REGION=/var/run/gpuslice/region\n"));
    CHECK(strstr(text, "\nGPUSLICE_LEDGER_DIR=/var/run/gpuslice-ledger\n"));
    CHECK(strstr(text, "\nGPUSLICE_ROSTER_DIR=/var/run/gpuslice-roster\n"));
    /* The roster's weights: the cap in cap mode, else the weight's ceiling. */
    struct gs_roster_entry on_b = gs_roster_entry_of(&two_a, "GPU-b");
    CHECK(on_b.weight == 100 && !on_b.capped);
    two_a.share_mode = 0;
    on_b = gs_roster_entry_of(&two_a, "GPU-b");
    struct gs_roster_entry on_a = gs_roster_entry_of(&two_a, "GPU-a");
    CHECK(on_b.weight == 30 && on_b.capped && on_a.weight == 100 && !on_a.capped);
    two_a.share_mode = 1;
    CHECK(strstr(text, "\nGPUSLICE_CTX_OVERHEAD=auto\n"));
    CHECK(strstr(text, "\nGPUSLICE_SHARE_WEIGHT=100\n"));
    CHECK(strstr(text, "\nGPUSLICE_POWER_EXPONENT=0.480\n"));
    CHECK(strstr(text, "\nGPUSLICE_SHARE_YIELD_US=0\n"));
    /* A node's own exponent (--power-exponent) replaces the default. */
    v.power_exp = "0.400";
    gs_limits_text(&v, &h, "uid-p", &two_a, gpu, order, 2, text, sizeof text);
    CHECK(strstr(text, "\nGPUSLICE_POWER_EXPONENT=0.400\n") && !strstr(text, "0.480"));
    v.power_exp = NULL;
    /* And a node's share yield (--share-yield-us) its default. */
    v.share_yield_us = "300";
    gs_limits_text(&v, &h, "uid-p", &two_a, gpu, order, 2, text, sizeof text);
    CHECK(strstr(text, "\nGPUSLICE_SHARE_YIELD_US=300\n") && !strstr(text, "YIELD_US=0\n"));
    CHECK(strstr(text, "\nGPUSLICE_POWER_EXPONENT=0.480\n"));
    v.share_yield_us = NULL;
    CHECK(!gs_k8s_name_ok("a\nb", 10) && !gs_k8s_name_ok("", 10) && gs_k8s_name_ok("a-b.c", 10));

    /* The region's owner: the container's uid over the pod's, fsGroup
     * over runAsGroup; nothing known (or a user namespace) -> 0666. */
    struct gs_pod sp = pod("sec", NULL, NULL, 0);
    sp.run_as_user = 1000;
    sp.run_as_group = 1001;
    sp.fs_group = GS_ID_UNSET;
    sp.ncontainers = 1;
    snprintf(sp.containers[0].name, sizeof sp.containers[0].name, "main");
    sp.containers[0].run_as_user = GS_ID_UNSET;
    sp.containers[0].run_as_group = GS_ID_UNSET;
    struct gs_region_owner o;
    gs_region_owner_of(&sp, "main", &o);
    CHECK(o.uid == 1000 && o.gid == 1001 && o.mode == 0660);
    sp.containers[0].run_as_user = 2000;
    sp.fs_group = 3000;
    gs_region_owner_of(&sp, "main", &o);
    CHECK(o.uid == 2000 && o.gid == 3000 && o.mode == 0660);
    gs_region_owner_of(&sp, "other", &o); /* not in the spec: cannot know */
    CHECK(o.uid == 0 && o.gid == 0 && o.mode == 0666);
    sp.host_users_false = 1;
    gs_region_owner_of(&sp, "main", &o);
    CHECK(o.uid == 0 && o.gid == 0 && o.mode == 0666);
    sp.host_users_false = 0;
    sp.run_as_user = sp.run_as_group = sp.fs_group = GS_ID_UNSET;
    sp.containers[0].run_as_user = sp.containers[0].run_as_group = GS_ID_UNSET;
    gs_region_owner_of(&sp, "main", &o);
    CHECK(o.uid == 0 && o.gid == 0 && o.mode == 0666);

    return check_result("placement");
}
