/* The FGD artifact's scorers as we reproduce them: fgd's integer score
 * (its rounding and its ties), its typical-pod set, and the exact scores
 * of bestfit and binpack. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "policy.h"
#include "policy_fixture.h"
#include "policy_internal.h"

static void add_n(gs_typical_set *t, gs_request r, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(gs_typical_add(t, &r, 1.0), 0);
}

/* Shapes up to 95 % of the pods, most frequent first, CPU-only pods
 * included, memory not part of the key; shares renormalised. */
static void typical_set_covers_95_percent(void **state)
{
    (void)state;
    gs_typical_set t;
    gs_typical_init(&t);
    gs_request whole = fx_req(4000, 8192, 1, 1000), cpu_only = fx_req(8000, 16384, 0, 0);
    gs_request half = fx_req(2000, 4096, 1, 500), half_more_mem = fx_req(2000, 65536, 1, 500);
    gs_request rare = fx_req(1000, 1024, 1, 250);
    add_n(&t, whole, 50);
    add_n(&t, cpu_only, 30);
    add_n(&t, half, 10);
    add_n(&t, half_more_mem, 5); /* same shape as half */
    add_n(&t, rare, 5);
    assert_int_equal(t.count, 4);
    assert_int_equal(gs_typical_build(&t), 3); /* 50 + 30 + 15 = 95 of 100 */
    assert_int_equal(t.items[0].num_gpus, 1);
    assert_int_equal(t.items[0].gpu_milli, 1000);
    assert_int_equal(t.items[1].num_gpus, 0);
    assert_int_equal(t.items[1].cpu_milli, 8000);
    assert_int_equal(t.items[2].gpu_milli, 500);
    assert_float_equal(t.items[2].share, 15.0 / 95.0, 1e-12);
    assert_float_equal(t.items[3].share, 0.0, 0.0);
    /* One more rare pod: 95 % of 101 is 95.95, so the rare shape joins. */
    add_n(&t, rare, 1);
    assert_int_equal(gs_typical_build(&t), 4);
    gs_typical_free(&t);
}

/* Equal counts: the larger CPU, then the larger GPU share, comes first. */
static void typical_ties_order_by_cpu_then_share(void **state)
{
    (void)state;
    gs_typical_set t;
    gs_typical_init(&t);
    add_n(&t, fx_req(2000, 1024, 1, 500), 10);
    add_n(&t, fx_req(6000, 1024, 1, 300), 10);
    add_n(&t, fx_req(6000, 1024, 1, 700), 10);
    gs_typical_build(&t);
    assert_int_equal(t.items[0].cpu_milli, 6000);
    assert_int_equal(t.items[0].gpu_milli, 700);
    assert_int_equal(t.items[1].gpu_milli, 300);
    assert_int_equal(t.items[2].cpu_milli, 2000);
    gs_typical_free(&t);
}

static double fgd_score(gs_cluster *c, int node, const gs_request *r, const gs_request *work, int nwork,
                        gs_placement *p)
{
    gs_engine *e = gs_engine_new(GS_POLICY_FGD);
    assert_non_null(e);
    for (int i = 0; i < nwork; i++)
        assert_int_equal(gs_engine_add_workload(e, &work[i], 1.0), 0);
    double s = -1.0;
    assert_true(gs_engine_score_node(e, c, (size_t)node, r, &s, p));
    gs_engine_free(e);
    return s;
}

/* int(100 * sigmoid(drop / 1000)): a 500 pod on an idle GPU costs a
 * whole-GPU typical pod the 500 left, sigmoid(-0.5) = 0.3775 -> 37. With a
 * CPU-only typical pod beside it (half the share each), that pod counts all
 * free compute as lost before and after, so the drop is 0.5 * 500 - 0.5 *
 * 500 = 0 -> 50. */
static void fgd_score_is_truncated_sigmoid(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    int n = fx_node(&c, "G2", 96000, 393216, 1);
    gs_request pod = fx_req(1000, 1024, 1, 500);
    gs_request whole = fx_req(1000, 1024, 1, 1000), cpu_only = fx_req(1000, 1024, 0, 0);
    gs_placement p;
    assert_float_equal(fgd_score(&c, n, &pod, &whole, 1, &p), 37.0, 0.0);
    gs_request mix[] = { whole, cpu_only };
    assert_float_equal(fgd_score(&c, n, &pod, mix, 2, &p), 50.0, 0.0);
    /* A pod that changes nothing for the typical pods scores 50 exactly. */
    gs_request half = fx_req(1000, 1024, 1, 500);
    assert_float_equal(fgd_score(&c, n, &pod, &half, 1, &p), 50.0, 0.0);
    gs_cluster_free(&c);
}

/* Memory is not part of the measure: a node short of memory for every
 * typical pod scores as if it had plenty (the filter alone checks memory). */
static void fgd_ignores_memory(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    int roomy = fx_node(&c, "G2", 96000, 393216, 1);
    int tight = fx_node(&c, "G2", 96000, 2048, 1);
    gs_request pod = fx_req(1000, 1024, 1, 500), whole = fx_req(1000, 65536, 1, 1000);
    gs_placement p;
    assert_float_equal(fgd_score(&c, roomy, &pod, &whole, 1, &p), fgd_score(&c, tight, &pod, &whole, 1, &p), 0.0);
    gs_cluster_free(&c);
}

/* Equal integer scores: the first node, and on a node the lowest GPU
 * index, even when a later GPU is tighter (bestfit takes the tighter). */
static void fgd_ties_go_to_first_node_and_lowest_gpu(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    int a = fx_node(&c, "G2", 96000, 393216, 2);
    int b = fx_node(&c, "G2", 96000, 393216, 2);
    gs_request used300 = fx_req(0, 0, 1, 300), used400 = fx_req(0, 0, 1, 400);
    for (int n = a; n <= b; n++) {
        fx_put(&c, &used300, n, 1, (int[]){ 0 }); /* GPU 0: 700 free */
        fx_put(&c, &used400, n, 1, (int[]){ 1 }); /* GPU 1: 600 free */
    }
    gs_request pod = fx_req(1000, 1024, 1, 100);
    gs_engine *e = gs_engine_new(GS_POLICY_FGD);
    gs_engine_add_workload(e, &pod, 1.0);
    gs_placement p;
    assert_true(gs_engine_decide(e, &c, &pod, &p));
    assert_int_equal(p.node, a);
    assert_int_equal(p.gpus[0], 0);
    gs_engine_free(e);
    e = gs_engine_new(GS_POLICY_BESTFIT);
    assert_true(gs_engine_decide(e, &c, &pod, &p));
    assert_int_equal(p.gpus[0], 1);
    gs_engine_free(e);
    gs_cluster_free(&c);
}

/* bestfit: int(100 * (1 - (CPU left / 128 cores + GPU left / 8 GPUs) / 2)). */
static void bestfit_scores_exactly(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    int n = fx_node(&c, "G2", 96000, 393216, 4);
    gs_engine *e = gs_engine_new(GS_POLICY_BESTFIT);
    gs_request r = fx_req(8000, 1024, 1, 1000);
    double s;
    gs_placement p;
    assert_true(gs_engine_score_node(e, &c, (size_t)n, &r, &s, &p));
    /* left: 88/128 * 0.5 + 3/8 * 0.5 = 0.53125 -> 46.875 -> 46 */
    assert_float_equal(s, 46.0, 0.0);
    gs_engine_free(e);
    gs_cluster_free(&c);
}

/* binpack: an empty 4-GPU node 33 - 4 = 29; an idle GPU on a used node
 * 50 - 1 = 49; a shared GPU with 700 free 100 - 70 / 10 = 93; CPU-only 0. */
static void binpack_scores_exactly(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    int empty = fx_node(&c, "G2", 96000, 393216, 4);
    int used = fx_node(&c, "G2", 96000, 393216, 4);
    gs_request r300 = fx_req(1000, 1024, 1, 300);
    fx_put(&c, &r300, used, 1, (int[]){ 2 });
    gs_engine *e = gs_engine_new(GS_POLICY_BINPACK);
    gs_request shared = fx_req(1000, 1024, 1, 500), whole = fx_req(1000, 1024, 1, 1000);
    gs_request cpu_only = fx_req(1000, 1024, 0, 0);
    double s;
    gs_placement p;
    assert_true(gs_engine_score_node(e, &c, (size_t)empty, &shared, &s, &p));
    assert_float_equal(s, 29.0, 0.0);
    assert_true(gs_engine_score_node(e, &c, (size_t)used, &whole, &s, &p));
    assert_float_equal(s, 49.0, 0.0);
    assert_true(gs_engine_score_node(e, &c, (size_t)used, &shared, &s, &p));
    assert_float_equal(s, 93.0, 0.0);
    assert_int_equal(p.gpus[0], 2);
    assert_true(gs_engine_score_node(e, &c, (size_t)used, &cpu_only, &s, &p));
    assert_float_equal(s, 0.0, 0.0);
    gs_engine_free(e);
    gs_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(typical_set_covers_95_percent),
        cmocka_unit_test(typical_ties_order_by_cpu_then_share),
        cmocka_unit_test(fgd_score_is_truncated_sigmoid),
        cmocka_unit_test(fgd_ignores_memory),
        cmocka_unit_test(fgd_ties_go_to_first_node_and_lowest_gpu),
        cmocka_unit_test(bestfit_scores_exactly),
        cmocka_unit_test(binpack_scores_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
