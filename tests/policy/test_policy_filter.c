/* Feasibility: per-GPU and per-node verdicts with reasons, and the
 * bookkeeping of committing and releasing placements. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "policy.h"
#include "policy_fixture.h"

static void gpu_compute_fits_until_full(void **state)
{
    (void)state;
    gs_sched_gpu g = { .milli_total = 1000, .milli_used = 600, .healthy = true };
    gs_request half = fx_req(0, 0, 1, 400), more = fx_req(0, 0, 1, 401);
    assert_int_equal(gs_gpu_fit(&g, &half), GS_FIT);
    assert_int_equal(gs_gpu_fit(&g, &more), GS_REJ_GPU_COMPUTE);
    /* A whole-GPU request needs an idle GPU, not just 1000 free. */
    gs_request whole = fx_req(0, 0, 1, 1000);
    assert_int_equal(gs_gpu_fit(&g, &whole), GS_REJ_GPU_COMPUTE);
    g.milli_used = 0;
    assert_int_equal(gs_gpu_fit(&g, &whole), GS_FIT);
}

static void gpu_memory_slots_health(void **state)
{
    (void)state;
    gs_sched_gpu g = { .milli_total = 1000,
                       .mem_total_mib = 16384,
                       .mem_used_mib = 12288,
                       .slots_total = 2,
                       .slots_used = 1,
                       .healthy = true };
    gs_request r = fx_req(0, 0, 1, 100);
    r.gpu_mem_mib = 4096;
    assert_int_equal(gs_gpu_fit(&g, &r), GS_FIT);
    r.gpu_mem_mib = 4097;
    assert_int_equal(gs_gpu_fit(&g, &r), GS_REJ_GPU_MEMORY);
    r.gpu_mem_mib = 0;
    g.slots_used = 2;
    assert_int_equal(gs_gpu_fit(&g, &r), GS_REJ_GPU_SLOTS);
    g.slots_used = 0;
    g.healthy = false;
    assert_int_equal(gs_gpu_fit(&g, &r), GS_REJ_GPU_UNHEALTHY);
}

static void node_reasons(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    int n = fx_node(&c, "T4", 8000, 16384, 2);
    int v100 = gs_cluster_model(&c, "V100");
    gs_request r = fx_req(8001, 0, 1, 1000);
    assert_int_equal(gs_node_fit(&c.nodes[n], &r), GS_REJ_CPU);
    r = fx_req(1000, 16385, 1, 1000);
    assert_int_equal(gs_node_fit(&c.nodes[n], &r), GS_REJ_MEMORY);
    r = fx_req(1000, 1024, 3, 1000);
    assert_int_equal(gs_node_fit(&c.nodes[n], &r), GS_REJ_GPU_COUNT);
    r = fx_req(1000, 1024, 1, 1000);
    r.any_model = false;
    r.model_mask = 1u << v100;
    assert_int_equal(gs_node_fit(&c.nodes[n], &r), GS_REJ_GPU_MODEL);
    r.model_mask |= 1u << c.nodes[n].model;
    assert_int_equal(gs_node_fit(&c.nodes[n], &r), GS_FIT);
    c.nodes[n].healthy = false;
    assert_int_equal(gs_node_fit(&c.nodes[n], &r), GS_REJ_NODE_UNHEALTHY);
    r.cpu_milli = -1;
    assert_int_equal(gs_node_fit(&c.nodes[n], &r), GS_REJ_BAD_REQUEST);
    gs_cluster_free(&c);
}

static void explain_lists_every_gpu(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    int n = fx_node(&c, "G2", 96000, 393216, 4);
    gs_request busy = fx_req(1000, 1024, 1, 700);
    fx_put(&c, &busy, n, 1, (int[]){ 0 });
    fx_put(&c, &busy, n, 1, (int[]){ 1 });
    c.nodes[n].gpus[3].healthy = false;
    gs_filter_report rep;
    gs_request two = fx_req(1000, 1024, 2, 500);
    assert_int_equal(gs_filter_explain(&c.nodes[n], &two, &rep), GS_REJ_GPUS_BUSY);
    assert_int_equal(rep.gpu[0], GS_REJ_GPU_COMPUTE);
    assert_int_equal(rep.gpu[1], GS_REJ_GPU_COMPUTE);
    assert_int_equal(rep.gpu[2], GS_FIT);
    assert_int_equal(rep.gpu[3], GS_REJ_GPU_UNHEALTHY);
    assert_string_equal(gs_reject_str(rep.gpu[3]), "GPU unhealthy");
    gs_request one = fx_req(1000, 1024, 1, 300);
    assert_int_equal(gs_filter_explain(&c.nodes[n], &one, &rep), GS_FIT);
    assert_int_equal(rep.gpu[0], GS_FIT);
    gs_cluster_free(&c);
}

static void numa_single_needs_one_socket(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    int n = fx_node(&c, "A100", 64000, 262144, 4);
    for (int i = 0; i < 4; i++)
        c.nodes[n].gpus[i].numa = i / 2; /* GPUs 0,1 on NUMA 0; 2,3 on NUMA 1 */
    gs_request whole = fx_req(0, 0, 1, 1000);
    fx_put(&c, &whole, n, 1, (int[]){ 0 });
    fx_put(&c, &whole, n, 1, (int[]){ 2 });
    gs_request pair = fx_req(1000, 1024, 2, 1000);
    assert_int_equal(gs_node_fit(&c.nodes[n], &pair), GS_FIT);
    pair.numa = GS_NUMA_SINGLE;
    assert_int_equal(gs_node_fit(&c.nodes[n], &pair), GS_REJ_NUMA);
    gs_cluster_free(&c);
}

static void apply_release_round_trip(void **state)
{
    (void)state;
    gs_cluster c;
    gs_cluster_init(&c);
    int n = fx_node(&c, "G2", 96000, 393216, 8);
    gs_node before = c.nodes[n];
    gs_request r = fx_req(12000, 4096, 2, 1000);
    gs_placement p = { .node = n, .num_gpus = 2, .gpus = { 3, 5 } };
    assert_int_equal(gs_cluster_apply(&c, &r, &p), 0);
    assert_int_equal(gs_cluster_gpu_allocated(&c), 2000);
    assert_int_equal(c.nodes[n].cpu_used_milli, 12000);
    assert_int_equal(gs_cluster_apply(&c, &r, &p), -1); /* GPUs 3,5 now taken */
    gs_placement dup = { .node = n, .num_gpus = 2, .gpus = { 1, 1 } };
    assert_int_equal(gs_cluster_apply(&c, &r, &dup), -1);
    assert_int_equal(gs_cluster_release(&c, &r, &p), 0);
    assert_int_equal(gs_cluster_gpu_allocated(&c), 0);
    assert_int_equal(c.nodes[n].cpu_used_milli, before.cpu_used_milli);
    assert_true(c.nodes[n].version > before.version);
    assert_int_equal(gs_cluster_release(&c, &r, &p), -1); /* nothing left to release */
    assert_int_equal(gs_cluster_gpu_capacity(&c), 8000);
    gs_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpu_compute_fits_until_full),
        cmocka_unit_test(gpu_memory_slots_health),
        cmocka_unit_test(node_reasons),
        cmocka_unit_test(explain_lists_every_gpu),
        cmocka_unit_test(numa_single_needs_one_socket),
        cmocka_unit_test(apply_release_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
