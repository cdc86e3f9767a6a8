/* Collective kernels under a cap (src/core/collective.c and
 * gs_lim_charge_collective): which kernels are collectives, the spin-free
 * estimate, and a closed loop in simulated time of two ranks on two GPUs
 * (a matmul, then an all-reduce that completes only when both ranks have
 * reached it), each capped at 40 % of its own GPU, that crawls when the
 * collective is charged its span and runs at its cap when charged the
 * estimate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "collective.h"
#include "limiter.h"

#define US 1000ULL
#define MS 1000000ULL

static void nccl_kernels_are_collectives_by_name(void **state)
{
    (void)state;
    assert_true(gs_collective_name("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"));
    assert_true(gs_collective_name("_Z41ncclDevKernel_AllReduce_Sum_f32_RING_LL128P19ncclDevKernelArgs"));
    assert_true(gs_collective_name("ncclKernel_AllGather_RING_LL_Sum_int8_t"));
    assert_true(gs_collective_name("ncclDevKernel_Generic"));
    assert_false(gs_collective_name("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"));
    assert_false(gs_collective_name("_Z10myncclDevKernelv"));
    assert_false(gs_collective_name("nccl"));
    assert_false(gs_collective_name("_Z"));
    assert_false(gs_collective_name(""));
    assert_false(gs_collective_name(NULL));
}

static void the_estimate_is_the_shortest_recent_span(void **state)
{
    (void)state;
    struct gs_coll_est e;
    memset(&e, 0, sizeof e);
    assert_int_equal(gs_coll_est_now(&e), 0);
    /* the first spans are charged once a few are known: the first one waited
     * 2 s for a peer that was still starting */
    assert_int_equal(gs_coll_est_add(&e, 2000 * MS), 0);
    assert_int_equal(gs_coll_est_add(&e, 900 * US), 0);
    assert_int_equal(gs_coll_est_now(&e), 0);
    assert_int_equal(gs_coll_est_add(&e, 300 * US), 0);
    assert_int_equal(gs_coll_est_add(&e, 400 * US), 4 * 300 * US);
    assert_int_equal(gs_coll_est_now(&e), 300 * US);
    assert_int_equal(gs_coll_est_add(&e, 5 * MS), 300 * US); /* spun 4.7 ms: charged 0.3 */
    /* the short one ages out after GS_COLL_SPANS launches: a message that
     * grew is charged what it now takes */
    for (int i = 0; i < GS_COLL_SPANS - 1; i++)
        gs_coll_est_add(&e, 600 * US);
    assert_int_equal(gs_coll_est_now(&e), 600 * US);
}

static void a_collective_is_charged_its_work_and_counted_whole(void **state)
{
    (void)state;
    struct gs_lim_account a;
    memset(&a, 0, sizeof a);
    gs_lim_account_init(&a, GS_LIM_CAP, 40, 100, 1000 * MS);
    int64_t before = a.tokens;
    uint64_t c = gs_lim_charge_collective(&a, 5 * MS, 300 * US);
    assert_int_equal(c, 300 * US);
    assert_int_equal(a.tokens, before - (int64_t)(300 * US));
    assert_int_equal(a.occ_ns, 5 * MS); /* NVML counts the spin: so does occupancy */
}

/* Two ranks of a tensor-parallel step: matmul of M on each rank's GPU, then
 * an all-reduce of own work W that starts when both have reached it. Each
 * rank waits for its tokens before its matmul; rank 1 starts with a debt of
 * 10 ms, so they are held back at different moments. Returns its speed as a
 * fraction of alone (one step per M + W). */
#define M_NS (1500 * US)
#define W_NS (400 * US)
static double tp_loop(int charge_estimate, uint64_t *longest_step)
{
    struct gs_lim_account a[2];
    struct gs_coll_est e[2];
    uint64_t t = 1000 * MS;
    memset(e, 0, sizeof e);
    for (int r = 0; r < 2; r++) {
        memset(&a[r], 0, sizeof a[r]);
        gs_lim_account_init(&a[r], GS_LIM_CAP, 40, 100, t);
    }
    a[1].tokens -= 10 * MS;
    uint64_t start = t, longest = 0;
    int n = 0;
    /* 2000 steps, or 20 s of simulated time: charged the spin, the waits grow
     * by about 1 / 0.4 a step */
    for (; n < 2000 && t - start < 20000 * MS; n++) {
        uint64_t arrive[2];
        for (int r = 0; r < 2; r++) {
            uint64_t h = t;
            gs_lim_refill(&a[r], h, 1);
            while (a[r].tokens < 0) { /* held back until the debt is paid */
                h += (uint64_t)(-a[r].tokens) * 100 / 40 + 1;
                gs_lim_refill(&a[r], h, 1);
            }
            gs_lim_charge_collective(&a[r], M_NS, M_NS); /* the matmul, charged whole */
            arrive[r] = h + M_NS;
        }
        uint64_t done = (arrive[0] > arrive[1] ? arrive[0] : arrive[1]) + W_NS;
        for (int r = 0; r < 2; r++) {
            uint64_t span = done - arrive[r];
            gs_lim_charge_collective(&a[r], span, charge_estimate ? gs_coll_est_add(&e[r], span) : span);
        }
        if (done - t > longest)
            longest = done - t;
        t = done; /* both hosts synchronise on the all-reduce */
    }
    if (longest_step)
        *longest_step = longest;
    double steps_per_s = n / ((double)(t - start) / 1e9);
    return steps_per_s * (double)(M_NS + W_NS) / 1e9;
}

static void a_tp_loop_runs_at_its_cap_when_collectives_are_charged_their_work(void **state)
{
    (void)state;
    uint64_t longest = 0;
    double spun = tp_loop(0, NULL);
    double fair = tp_loop(1, &longest);
    print_message("TP loop capped at 40: %.3f of alone charged the span, %.3f the estimate (longest step %.1f ms)\n",
                  spun, fair, (double)longest / 1e6);
    assert_true(spun < 0.30); /* the peer's wait charged as work: it feeds on itself */
    assert_true(fair > 0.37 && fair < 0.43);
    assert_true(longest < 2 * 50 * MS); /* never a stall: at most one period's wait and a step */
}

/* Two ranks launch "matmul, all-reduce" steps; at a slot's end a rank
 * follows a peer whose mark is above its own. The peer that began step k
 * is ahead of the rank that has not, whether it launched only the matmul
 * or the all-reduce too; ranks at the same point are not ahead of each
 * other, however many kernels each launched since the last all-reduce (a
 * DDP backward pass), and a rank that has started its step is not behind a
 * peer that is still in the step before. */
static void a_rank_that_began_a_step_is_ahead_of_one_that_has_not(void **state)
{
    (void)state;
    uint64_t a = 0, b = 0;
    for (int k = 0; k < 3; k++) {
        a = gs_step_after_kernel(a);
        b = gs_step_after_kernel(b);
        assert_int_equal(a, b);
        a = gs_step_after_collective(a);
        b = gs_step_after_collective(b);
        assert_int_equal(a, b);
    }
    assert_int_equal(a, 6); /* three all-reduces */
    uint64_t began = gs_step_after_kernel(a);
    assert_true(began > b);
    assert_true(gs_step_after_collective(began) > b);
    assert_int_equal(gs_step_after_kernel(gs_step_after_kernel(began)), began);
    assert_false(gs_step_after_kernel(b) > began);
    /* an all-reduce with no kernel before it (a graph that holds both) is a
     * step too, and a rank past it is ahead of one that only began it */
    assert_true(gs_step_after_collective(b) > gs_step_after_kernel(b));
    assert_int_equal(gs_step_after_collective(b), gs_step_after_collective(gs_step_after_kernel(b)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nccl_kernels_are_collectives_by_name),
        cmocka_unit_test(the_estimate_is_the_shortest_recent_span),
        cmocka_unit_test(a_collective_is_charged_its_work_and_counted_whole),
        cmocka_unit_test(a_tp_loop_runs_at_its_cap_when_collectives_are_charged_their_work),
        cmocka_unit_test(a_rank_that_began_a_step_is_ahead_of_one_that_has_not),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
