/* The replay protocol on tiny traces: inflation by sampling, shuffling,
 * milestones, and strict CSV parsing with located errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cpu_mix.h"
#include "policy.h"
#include "protocol.h"
#include "sim_fixture.h"
#include "trace_csv.h"

static gs_request pod(int num_gpus, int gpu_milli)
{
    gs_request r;
    memset(&r, 0, sizeof(r));
    r.cpu_milli = 1000;
    r.mem_mib = 1024;
    r.num_gpus = num_gpus;
    r.gpu_milli = gpu_milli;
    r.any_model = true;
    return r;
}

static int64_t total_gpu(const gs_request *pods, const size_t *order, size_t len)
{
    int64_t total = 0;
    for (size_t i = 0; i < len; i++)
        total += gs_request_gpu_milli(&pods[order[i]]);
    return total;
}

/* The trace pods come first, each once, shuffled; sampled pods follow
 * while the request stays within the load. */
static void arrivals_trace_first_then_samples_up_to_load(void **state)
{
    (void)state;
    gs_request pods[] = { pod(1, 1000), pod(1, 500), pod(0, 0), pod(2, 1000) };
    size_t len = 0;
    const int64_t cap = 10000;
    size_t *order = sim_arrivals(pods, 4, cap, 130, 42, &len);
    assert_non_null(order);
    assert_true(len > 4);
    int seen[4] = { 0 };
    for (size_t i = 0; i < 4; i++)
        seen[order[i]]++;
    for (int i = 0; i < 4; i++)
        assert_int_equal(seen[i], 1);
    int64_t total = total_gpu(pods, order, len);
    /* Within the load, except that a 2-GPU sample is tested by its per-GPU
     * share (1000) and may pass it by one GPU; stopped less than one GPU short. */
    assert_true(total * 100 <= cap * 130 + 100 * 1000);
    assert_true(total * 100 > cap * 130 - 100 * 1000);
    free(order);
}

/* A trace that asks for more than the load loses random pods until it fits. */
static void arrivals_overfull_trace_drops_pods(void **state)
{
    (void)state;
    gs_request pods[20];
    for (int i = 0; i < 20; i++)
        pods[i] = pod(1, 1000);
    size_t len = 0;
    size_t *order = sim_arrivals(pods, 20, 10000, 130, 42, &len); /* 200 % asked */
    assert_non_null(order);
    assert_int_equal(len, 13);
    int seen[20] = { 0 };
    for (size_t i = 0; i < len; i++)
        assert_int_equal(++seen[order[i]], 1);
    free(order);
}

static void arrivals_shuffle_depends_on_seed_only(void **state)
{
    (void)state;
    gs_request pods[40];
    for (int i = 0; i < 40; i++)
        pods[i] = pod(1, 100 + 20 * i);
    size_t la, lb, lc;
    size_t *a = sim_arrivals(pods, 40, 20000, 130, 7, &la);
    size_t *b = sim_arrivals(pods, 40, 20000, 130, 7, &lb);
    size_t *c = sim_arrivals(pods, 40, 20000, 130, 8, &lc);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la * sizeof(*a));
    bool differs = la != lc || memcmp(a, c, la * sizeof(*a)) != 0;
    assert_true(differs);
    /* Shuffled: the trace pods are not simply in trace order. */
    bool in_order = true;
    for (size_t i = 0; i < 40; i++)
        in_order = in_order && a[i] == i;
    assert_false(in_order);
    free(a);
    free(b);
    free(c);
}

/* The node order is a permutation that depends on the seed. */
static void node_order_is_a_seeded_permutation(void **state)
{
    (void)state;
    size_t *a = sim_node_order(50, 42), *b = sim_node_order(50, 42), *c = sim_node_order(50, 43);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_memory_equal(a, b, 50 * sizeof(*a));
    assert_memory_not_equal(a, c, 50 * sizeof(*a));
    int seen[50] = { 0 };
    for (int i = 0; i < 50; i++)
        assert_int_equal(++seen[a[i]], 1);
    free(a);
    free(b);
    free(c);
}

/* An event counts towards the whole percent its arrived request rounds
 * to, halves to even: 129.5 and 130.5 both count as 130. */
static void arrived_rounds_half_to_even(void **state)
{
    (void)state;
    assert_int_equal(sim_arrived_bucket(1295, 1000), 130);
    assert_int_equal(sim_arrived_bucket(1305, 1000), 130);
    assert_int_equal(sim_arrived_bucket(1285, 1000), 128);
    assert_int_equal(sim_arrived_bucket(1294, 1000), 129);
    assert_int_equal(sim_arrived_bucket(1306, 1000), 131);
}

/* One node of 4 GPUs, whole-GPU pods only: pods arrive at 25, 50, 75, 100
 * and 125 %; the 5th fails. A percent with no event takes its neighbours'. */
static void milestones_exact_on_tiny_cluster(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    assert_int_equal(gs_cluster_model(&c, "T4"), 0);
    assert_true(gs_cluster_add_node(&c, NULL, 100000, 100000, 0, 4, 1000) == 0);
    gs_request pods[] = { pod(1, 1000) };
    sim_result r;
    assert_int_equal(sim_run(&c, pods, 1, GS_POLICY_BINPACK, 42, 130, NULL, NULL, &r), 0);
    assert_int_equal(r.arrived, 5);
    assert_int_equal(r.placed, 4);
    assert_int_equal(r.failed, 1);
    assert_float_equal(r.alloc_pct[25], 25.0, 1e-9);
    assert_float_equal(r.alloc_pct[26], 25.0, 1e-9); /* from 25 */
    assert_true(isnan(r.alloc_pct[27]));
    assert_float_equal(r.alloc_pct[75], 75.0, 1e-9);
    assert_float_equal(r.alloc_pct[100], 100.0, 1e-9);
    assert_float_equal(r.alloc_pct[125], 100.0, 1e-9);
    assert_true(isnan(r.alloc_pct[130]));
    gs_cluster_free(&c);
}

/* Events in one percent: the mean of their allocated shares, each rounded
 * to 0.01 %; a percent with none takes the events within one percent. */
static void milestone_is_mean_of_its_events(void **state)
{
    (void)state;
    sim_milestones *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    sim_milestones_record(m, 1296, 900, 1000);
    sim_milestones_record(m, 1300, 905, 1000);
    sim_milestones_record(m, 1304, 910, 1000);
    sim_milestones_record(m, 256000, 123456, 200000); /* 128 %: 61.728 -> 61.73 */
    double *pct = malloc((SIM_MAX_LOAD_PCT + 1) * sizeof(*pct));
    assert_non_null(pct);
    sim_milestones_finish(m, pct);
    assert_float_equal(pct[130], 90.5, 1e-9);
    assert_float_equal(pct[128], 61.73, 1e-9);
    assert_float_equal(pct[129], (61.73 + 3 * 90.5) / 4, 1e-9); /* neighbours 128 and 130 */
    assert_float_equal(pct[131], 90.5, 1e-9);
    assert_true(isnan(pct[132]));
    free(pct);
    free(m);
}

/* A CPU mix adds CPU-only pods drawn from the list's own until their CPU
 * is the factor times the list's, and keeps every original pod. */
static void cpu_mix_adds_cpu_only_pods(void **state)
{
    (void)state;
    trace_pods tp = { .count = 3 };
    tp.pods = malloc(3 * sizeof(*tp.pods));
    assert_non_null(tp.pods);
    tp.pods[0] = pod(1, 500);
    tp.pods[1] = pod(0, 0);
    tp.pods[2] = pod(0, 0);
    tp.pods[2].cpu_milli = 3000; /* CPU-only total 4000 */
    char err[128];
    assert_int_equal(sim_cpu_mix(&tp, 2.5, err, sizeof(err)), 0);
    int64_t cpu = 0;
    for (size_t i = 0; i < tp.count; i++) {
        if (tp.pods[i].num_gpus == 0)
            cpu += tp.pods[i].cpu_milli;
        else
            assert_int_equal(i, 0); /* no GPU pod added */
    }
    assert_true(cpu >= 10000 && cpu < 10000 + 3000);
    trace_pods_free(&tp);
    gs_request only_gpu = pod(1, 500);
    trace_pods none = { .pods = &only_gpu, .count = 1 };
    assert_int_equal(sim_cpu_mix(&none, 2.0, err, sizeof(err)), -1);
    char name[16];
    double x;
    assert_int_equal(sim_cpu_mix_spec("default+cpu2.5", name, sizeof(name), &x), 0);
    assert_string_equal(name, "default");
    assert_float_equal(x, 2.5, 0.0);
    assert_int_equal(sim_cpu_mix_spec("default", name, sizeof(name), &x), 0);
    assert_float_equal(x, 0.0, 0.0);
    assert_int_equal(sim_cpu_mix_spec("default+cpu1", name, sizeof(name), &x), -1);
    assert_int_equal(sim_cpu_mix_spec("default+cpu2x", name, sizeof(name), &x), -1);
}

static void milestones_monotone_and_bounded(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    gs_cluster_model(&c, "G2");
    for (int i = 0; i < 6; i++)
        assert_true(gs_cluster_add_node(&c, NULL, 32000, 65536, 0, 4, 1000) >= 0);
    gs_request pods[] = { pod(1, 470), pod(1, 810), pod(2, 1000), pod(0, 0), pod(1, 320) };
    for (int k = 0; k < GS_POLICY_COUNT; k++) {
        sim_result r;
        assert_int_equal(sim_run(&c, pods, 5, (gs_policy_kind)k, 3, 130, NULL, NULL, &r), 0);
        assert_int_equal(r.placed + r.failed, r.arrived);
        double last = 0.0;
        int defined = 0;
        for (int m = 1; m <= 130; m++) {
            if (isnan(r.alloc_pct[m]))
                continue;
            defined++;
            /* Allocated <= arrived, which is within half a percent of m,
             * plus the neighbour rule's one percent. */
            assert_true(r.alloc_pct[m] <= m + 1.5 + 1e-9);
            assert_true(r.alloc_pct[m] <= 100.0);
            assert_true(r.alloc_pct[m] >= last - 1e-9);
            last = r.alloc_pct[m];
        }
        assert_true(defined > 20);
    }
    gs_cluster_free(&c);
}

static void pod_rows_parse_and_fail_by_field(void **state)
{
    (void)state;
    gs_cluster models;
    gs_cluster_init(&models);
    gs_cluster_model(&models, "T4");
    gs_cluster_model(&models, "V100M16");
    trace_pod_cols cols;
    char err[256];
    assert_int_equal(trace_pod_header("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec", &cols, err, sizeof(err)),
                     0);
    gs_request r;
    assert_int_equal(trace_parse_pod_row("p,6000,12288,1,460,", &cols, &models, &r, err, sizeof(err)), 0);
    assert_int_equal(r.gpu_milli, 460);
    assert_true(r.any_model);
    assert_int_equal(trace_parse_pod_row("p,6000,12288,4,1000,V100M16|A100", &cols, &models, &r, err, sizeof(err)), 0);
    assert_false(r.any_model);
    assert_int_equal(r.model_mask, 1u << 1);
    assert_int_equal(gs_request_gpu_milli(&r), 4000);
    assert_int_equal(trace_parse_pod_row("p,6k,12288,1,460,", &cols, &models, &r, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "cpu_milli"));
    assert_int_equal(trace_parse_pod_row("p,6000,12288,1,1460,", &cols, &models, &r, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "gpu_milli"));
    assert_int_equal(trace_parse_pod_row("p,6000,12288,0,500,", &cols, &models, &r, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "num_gpu is 0"));
    assert_int_equal(trace_parse_pod_row("p,6000,12288", &cols, &models, &r, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "fields"));
    assert_int_equal(trace_parse_pod_row("p,6000,,1,100,", &cols, &models, &r, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "memory_mib"));
    assert_int_equal(trace_pod_header("name,cpu_milli,num_gpu,gpu_milli", &cols, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "memory_mib"));
    gs_cluster_free(&models);
}

static void loader_errors_name_file_and_line(void **state)
{
    (void)state;
    char *nodes = sim_fx_write_temp(SIM_FX_ONE_NODE "n1,64000,262144,2,\n");
    gs_cluster c;
    gs_cluster_init(&c);
    char err[512];
    assert_int_equal(trace_load_nodes(nodes, &c, err, sizeof(err)), -1);
    assert_non_null(strstr(err, nodes));
    assert_non_null(strstr(err, ":3:"));
    assert_non_null(strstr(err, "model"));
    gs_cluster_free(&c);
    unlink(nodes);
    free(nodes);

    nodes = sim_fx_write_temp("sn,cpu_milli,memory_mib,gpu,model\r\nn0,64000,262144,2,P100\r\n\n");
    gs_cluster_init(&c);
    assert_int_equal(trace_load_nodes(nodes, &c, err, sizeof(err)), 0);
    assert_int_equal(c.num_nodes, 1);
    assert_int_equal(gs_cluster_gpu_capacity(&c), 2000);
    char *pods = sim_fx_write_temp("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\n"
                                   "p1,1000,1024,one,500\n");
    trace_pods tp;
    assert_int_equal(trace_load_pods(pods, &c, &tp, err, sizeof(err)), -1);
    assert_non_null(strstr(err, ":3:"));
    assert_non_null(strstr(err, "num_gpu"));
    assert_int_equal(trace_load_pods("/nonexistent/pods.csv", &c, &tp, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "cannot open"));
    gs_cluster_free(&c);
    unlink(nodes);
    unlink(pods);
    free(nodes);
    free(pods);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(arrivals_trace_first_then_samples_up_to_load),
        cmocka_unit_test(arrivals_overfull_trace_drops_pods),
        cmocka_unit_test(arrivals_shuffle_depends_on_seed_only),
        cmocka_unit_test(node_order_is_a_seeded_permutation),
        cmocka_unit_test(arrived_rounds_half_to_even),
        cmocka_unit_test(milestones_exact_on_tiny_cluster),
        cmocka_unit_test(milestone_is_mean_of_its_events),
        cmocka_unit_test(cpu_mix_adds_cpu_only_pods),
        cmocka_unit_test(milestones_monotone_and_bounded),
        cmocka_unit_test(pod_rows_parse_and_fail_by_field),
        cmocka_unit_test(loader_errors_name_file_and_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
