/* Placement decisions on clusters where the right answer is known. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "policy.h"
#include "policy_fixture.h"

static gs_placement decide(gs_policy_kind kind, const gs_cluster *c, const gs_request *r, const gs_request *workload,
                           int num_workload)
{
    gs_engine *e = gs_engine_new(kind);
    assert_non_null(e);
    for (int i = 0; i < num_workload; i++)
        assert_int_equal(gs_engine_add_workload(e, &workload[i], 1.0), 0);
    gs_placement p;
    memset(&p, -1, sizeof(p));
    assert_true(gs_engine_decide(e, c, r, &p));
    gs_engine_free(e);
    return p;
}

/* Node 0 idle, node 1 half full; GPU 0 of node 1 partly used. */
static void two_nodes(gs_cluster *c)
{
    gs_cluster_init(c);
    fx_node(c, "G2", 96000, 393216, 4);
    int busy = fx_node(c, "G2", 96000, 393216, 4);
    gs_request whole = fx_req(1000, 1024, 1, 1000), part = fx_req(1000, 1024, 1, 300);
    fx_put(c, &whole, busy, 1, (int[]){ 1 });
    fx_put(c, &part, busy, 1, (int[]){ 0 });
}

static void binpack_fills_busiest_node_and_gpu(void **state)
{
    (void)state;
    gs_cluster c;
    two_nodes(&c);
    gs_request r = fx_req(1000, 1024, 1, 500);
    gs_placement p = decide(GS_POLICY_BINPACK, &c, &r, NULL, 0);
    assert_int_equal(p.node, 1);
    assert_int_equal(p.gpus[0], 0); /* the partly used GPU */
    gs_cluster_free(&c);
}

static void spread_picks_emptiest_node_and_gpu(void **state)
{
    (void)state;
    gs_cluster c;
    two_nodes(&c);
    gs_request r = fx_req(1000, 1024, 1, 500);
    gs_placement p = decide(GS_POLICY_SPREAD, &c, &r, NULL, 0);
    assert_int_equal(p.node, 0);
    /* On the busy node alone, spread takes an idle GPU, binpack the used one. */
    c.nodes[0].healthy = false;
    p = decide(GS_POLICY_SPREAD, &c, &r, NULL, 0);
    assert_int_equal(p.node, 1);
    assert_true(p.gpus[0] == 2 || p.gpus[0] == 3);
    gs_cluster_free(&c);
}

static void bestfit_prefers_least_leftover(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    fx_node(&c, "T4", 104000, 524288, 2);
    fx_node(&c, "T4", 16000, 65536, 2); /* smaller node: less left after placement */
    gs_request r = fx_req(8000, 16384, 1, 1000);
    gs_placement p = decide(GS_POLICY_BESTFIT, &c, &r, NULL, 0);
    assert_int_equal(p.node, 1);
    gs_cluster_free(&c);
}

static void type_constraint_overrides_preference(void **state)
{
    (void)state;
    gs_cluster c;
    two_nodes(&c); /* both G2; node 1 preferred by binpack */
    int v100 = fx_node(&c, "V100", 32000, 131072, 4);
    gs_request r = fx_req(1000, 1024, 1, 500);
    r.any_model = false;
    r.model_mask = 1u << c.nodes[v100].model;
    for (int k = 0; k < GS_POLICY_COUNT; k++) {
        gs_placement p = decide((gs_policy_kind)k, &c, &r, &r, 1);
        assert_int_equal(p.node, v100);
    }
    gs_cluster_free(&c);
}

static void numa_binding_picks_one_socket(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    int n = fx_node(&c, "A100", 64000, 262144, 4);
    for (int i = 0; i < 4; i++)
        c.nodes[n].gpus[i].numa = i / 2;
    gs_request whole = fx_req(0, 0, 1, 1000);
    fx_put(&c, &whole, n, 1, (int[]){ 0 });
    gs_request pair = fx_req(1000, 1024, 2, 1000);
    pair.numa = GS_NUMA_SINGLE;
    for (int k = 0; k < GS_POLICY_COUNT; k++) {
        gs_placement p = decide((gs_policy_kind)k, &c, &pair, &pair, 1);
        assert_int_equal(p.num_gpus, 2);
        assert_int_equal(c.nodes[n].gpus[p.gpus[0]].numa, 1);
        assert_int_equal(c.nodes[n].gpus[p.gpus[1]].numa, 1);
    }
    gs_cluster_free(&c);
}

static void multi_gpu_pod_stays_on_one_node(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    for (int i = 0; i < 3; i++)
        fx_node(&c, "T4", 104000, 524288, 2);
    int big = fx_node(&c, "G2", 96000, 393216, 8);
    gs_request quad = fx_req(8000, 8192, 4, 1000);
    for (int k = 0; k < GS_POLICY_COUNT; k++) {
        gs_placement p = decide((gs_policy_kind)k, &c, &quad, &quad, 1);
        assert_int_equal(p.node, big);
        assert_int_equal(p.num_gpus, 4);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < i; j++)
                assert_int_not_equal(p.gpus[i], p.gpus[j]);
    }
    gs_request octo = fx_req(8000, 8192, 8, 1000);
    gs_request cpu_heavy = fx_req(200000, 1024, 1, 1000);
    gs_engine *e = gs_engine_new(GS_POLICY_BINPACK);
    gs_placement p;
    fx_put(&c, &quad, big, 4, (int[]){ 0, 1, 2, 3 });
    assert_false(gs_engine_decide(e, &c, &octo, &p));      /* 8 idle GPUs exist, on no node */
    assert_false(gs_engine_decide(e, &c, &cpu_heavy, &p)); /* too much CPU everywhere */
    gs_engine_free(e);
    gs_cluster_free(&c);
}

/* FGD fills the gap an 810 left rather than open an idle GPU. */
static void fgd_fills_dead_gaps(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    int idle = fx_node(&c, "G2", 96000, 393216, 2);
    int gap = fx_node(&c, "G2", 96000, 393216, 2);
    gs_request big = fx_req(4000, 8192, 1, 810), small = fx_req(2000, 4096, 1, 160);
    fx_put(&c, &big, gap, 1, (int[]){ 0 });
    fx_put(&c, &big, gap, 1, (int[]){ 1 });
    gs_request workload[] = { big, big, big, small };
    gs_placement p = decide(GS_POLICY_FGD, &c, &small, workload, 4);
    assert_int_equal(p.node, gap);
    p = decide(GS_POLICY_SPREAD, &c, &small, workload, 4);
    assert_int_equal(p.node, idle); /* the contrast: spread opens the idle node */
    gs_cluster_free(&c);
}

/* fraglook's seeding credit: when no pod needs a whole GPU, a small pod
 * opens an idle GPU (a future 810 completes it to 970) instead of filling
 * an 810's gap. The credit grows with the whole-GPU share, so it still
 * wins when whole-GPU pods are common (fewer idle GPUs are left for 810s),
 * but not on a model that constrained whole-GPU pods want: there breaking
 * an idle GPU costs more than the flat credit and the pod fills the gap. */
static void fraglook_seeds_idle_gpu_unless_model_is_wanted(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    int idle = fx_node(&c, "G2", 96000, 393216, 2);
    int gap = fx_node(&c, "G2", 96000, 393216, 2);
    gs_request big = fx_req(4000, 8192, 1, 810), small = fx_req(2000, 4096, 1, 160);
    gs_request whole = fx_req(4000, 8192, 1, 1000);
    gs_request pinned = whole;
    pinned.any_model = false;
    pinned.model_mask = 1u << c.nodes[idle].model;
    fx_put(&c, &big, gap, 1, (int[]){ 0 });
    fx_put(&c, &big, gap, 1, (int[]){ 1 });
    gs_request shared_only[] = { big, big, big, small };
    gs_placement p = decide(GS_POLICY_FRAGLOOK, &c, &small, shared_only, 4);
    assert_int_equal(p.node, idle);
    gs_request mostly_whole[] = { whole, whole, whole, whole, whole, whole, big, small };
    p = decide(GS_POLICY_FRAGLOOK, &c, &small, mostly_whole, 8);
    assert_int_equal(p.node, idle);
    gs_request mostly_pinned[] = { pinned, pinned, pinned, pinned, pinned, pinned, big, small };
    p = decide(GS_POLICY_FRAGLOOK, &c, &small, mostly_pinned, 8);
    assert_int_equal(p.node, gap);
    gs_cluster_free(&c);
}

/* A CPU-only pod belongs on CPU that no GPU will need: fraglook sees that
 * the other node's CPU is what its idle GPUs will need. */
static void fraglook_sends_cpu_pods_to_spare_cpu(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    int tight = fx_node(&c, "G2", 48000, 393216, 4); /* 12 cores per idle GPU */
    int full = fx_node(&c, "G2", 48000, 393216, 4);
    gs_request gpu_pod = fx_req(4000, 8192, 1, 1000);
    for (int i = 0; i < 4; i++)
        fx_put(&c, &gpu_pod, full, 1, (int[]){ i });
    gs_request workload[] = { fx_req(12000, 8192, 1, 1000) };
    gs_request cpu_pod = fx_req(16000, 8192, 0, 0);
    gs_placement p = decide(GS_POLICY_FRAGLOOK, &c, &cpu_pod, workload, 1);
    assert_int_equal(p.node, full);
    assert_int_equal(p.num_gpus, 0);
    (void)tight;
    gs_cluster_free(&c);
}

static void score_node_matches_filter(void **state)
{
    (void)state;
    gs_cluster c;
    two_nodes(&c);
    gs_engine *e = gs_engine_new(GS_POLICY_FRAGLOOK);
    gs_request r = fx_req(1000, 1024, 1, 500);
    gs_engine_add_workload(e, &r, 1.0);
    double s;
    gs_placement p;
    assert_true(gs_engine_score_node(e, &c, 0, &r, &s, &p));
    assert_int_equal(p.node, 0);
    c.nodes[0].cpu_used_milli = c.nodes[0].cpu_total_milli;
    assert_false(gs_engine_score_node(e, &c, 0, &r, &s, &p));
    assert_false(gs_engine_score_node(e, &c, 99, &r, &s, &p));
    gs_engine_free(e);
    gs_cluster_free(&c);
}

static void policy_names_round_trip(void **state)
{
    (void)state;
    for (int k = 0; k < GS_POLICY_COUNT; k++) {
        gs_policy_kind back;
        assert_int_equal(gs_policy_parse(gs_policy_name((gs_policy_kind)k), &back), 0);
        assert_int_equal(back, k);
    }
    gs_policy_kind x;
    assert_int_equal(gs_policy_parse("firstfit", &x), -1);
    assert_null(gs_engine_new(GS_POLICY_COUNT));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(binpack_fills_busiest_node_and_gpu),
        cmocka_unit_test(spread_picks_emptiest_node_and_gpu),
        cmocka_unit_test(bestfit_prefers_least_leftover),
        cmocka_unit_test(type_constraint_overrides_preference),
        cmocka_unit_test(numa_binding_picks_one_socket),
        cmocka_unit_test(multi_gpu_pod_stays_on_one_node),
        cmocka_unit_test(fgd_fills_dead_gaps),
        cmocka_unit_test(fraglook_seeds_idle_gpu_unless_model_is_wanted),
        cmocka_unit_test(fraglook_sends_cpu_pods_to_spare_cpu),
        cmocka_unit_test(score_node_matches_filter),
        cmocka_unit_test(policy_names_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
