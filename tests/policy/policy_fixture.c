/* Hand-made clusters for policy tests. */
#include "policy_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

int fx_node(gs_cluster *c, const char *model, int64_t cpu_milli, int64_t mem_mib, int num_gpus)
{
    int m = gs_cluster_model(c, model);
    assert_true(m >= 0);
    int idx = gs_cluster_add_node(c, NULL, cpu_milli, mem_mib, m, num_gpus, GS_MILLI_PER_GPU);
    assert_true(idx >= 0);
    return idx;
}

gs_request fx_req(int64_t cpu_milli, int64_t mem_mib, int num_gpus, int gpu_milli)
{
    gs_request r;
    memset(&r, 0, sizeof(r));
    r.cpu_milli = cpu_milli;
    r.mem_mib = mem_mib;
    r.num_gpus = num_gpus;
    r.gpu_milli = gpu_milli;
    r.any_model = true;
    return r;
}

void fx_put(gs_cluster *c, const gs_request *r, int node, int num_gpus, const int *gpus)
{
    gs_placement p;
    memset(&p, -1, sizeof(p));
    p.node = node;
    p.num_gpus = num_gpus;
    for (int i = 0; i < num_gpus; i++)
        p.gpus[i] = (int8_t)gpus[i];
    assert_int_equal(gs_cluster_apply(c, r, &p), 0);
}
