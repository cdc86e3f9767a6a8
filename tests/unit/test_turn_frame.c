/* The turn frame (src/core/turn_frame.c): whose slot the wall clock falls
 * in, for containers contending on one GPU, and that the answer depends on
 * nothing but the clock and the claims, so that each GPU of a job gives it
 * the same slots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "turn_frame.h"

#define MS 1000000ULL

static int frame(struct gs_turn_claim *c, unsigned n, uint64_t me, uint64_t now, struct gs_turn_slot *out)
{
    return gs_turn_frame(c, &n, me, now, out);
}

static void one_container_has_no_frame_to_follow(void **state)
{
    (void)state;
    struct gs_turn_claim c[] = { { 11, 300000 }, { 11, 300000 } }; /* two processes, one container */
    struct gs_turn_slot s;
    assert_int_equal(frame(c, 2, 11, 1000 * MS, &s), 0);
    struct gs_turn_claim d[] = { { 22, 300000 }, { 33, 700000 } };
    assert_int_equal(frame(d, 2, 11, 1000 * MS, &s), 0); /* me is not contending */
}

static void caps_30_and_70_split_each_frame_in_their_order(void **state)
{
    (void)state;
    struct gs_turn_claim c[] = { { 22, 700000 }, { 11, 300000 } };
    struct gs_turn_slot s;
    /* 11 first (the lower id): [0, 15) ms of each 50 ms frame; 22: [15, 50) */
    assert_int_equal(frame(c, 2, 11, 1010 * MS, &s), 1);
    assert_true(s.mine);
    assert_int_equal(s.owner, 11);
    assert_int_equal(s.end_ns, 1015 * MS);
    assert_int_equal(s.mine_ns, 1010 * MS);
    assert_int_equal(frame(c, 2, 22, 1010 * MS, &s), 1);
    assert_false(s.mine);
    assert_int_equal(s.owner, 11);
    assert_int_equal(s.mine_ns, 1015 * MS);
    assert_int_equal(s.mine_end, 1050 * MS);
    assert_int_equal(frame(c, 2, 11, 1020 * MS, &s), 1);
    assert_int_equal(s.owner, 22);
    assert_int_equal(s.end_ns, 1050 * MS);
    assert_int_equal(s.mine_ns, 1050 * MS); /* the next frame's */
    assert_int_equal(s.mine_end, 1065 * MS);
}

static void claims_under_the_whole_gpu_leave_the_rest_of_the_frame_to_nobody(void **state)
{
    (void)state;
    struct gs_turn_claim c[] = { { 11, 300000 }, { 22, 300000 } };
    struct gs_turn_slot s;
    assert_int_equal(frame(c, 2, 22, 1020 * MS, &s), 1);
    assert_true(s.mine);
    assert_int_equal(s.end_ns, 1030 * MS);
    assert_int_equal(frame(c, 2, 11, 1040 * MS, &s), 1);
    assert_int_equal(s.owner, 0);
    assert_false(s.mine);
    assert_int_equal(s.end_ns, 1050 * MS);
    assert_int_equal(s.mine_ns, 1050 * MS);
}

static void claims_past_the_whole_gpu_share_the_frame_in_proportion(void **state)
{
    (void)state;
    struct gs_turn_claim c[] = { { 11, 800000 }, { 22, 800000 } };
    struct gs_turn_slot s;
    assert_int_equal(frame(c, 2, 11, 1024 * MS, &s), 1);
    assert_true(s.mine);
    assert_int_equal(s.end_ns, 1025 * MS);
    assert_int_equal(frame(c, 2, 11, 1025 * MS, &s), 1);
    assert_int_equal(s.owner, 22);
}

static void repeats_merge_and_forged_claims_are_bounded(void **state)
{
    (void)state;
    /* 11's two processes, the larger claim counts; 33 claims 5 GPUs: one */
    struct gs_turn_claim c[] = { { 33, 5000000 }, { 11, 100000 }, { 22, 0 }, { 11, 200000 } };
    unsigned n = 4;
    struct gs_turn_slot s;
    assert_int_equal(gs_turn_frame(c, &n, 11, 1000 * MS, &s), 1);
    assert_int_equal(n, 3);
    assert_int_equal(c[0].claim_ppm, 200000);
    assert_int_equal(c[1].claim_ppm, 1); /* a claim of nothing still gets a slot's place */
    assert_int_equal(c[2].claim_ppm, GS_TURN_MAX_CLAIM);
    /* total 1.2 GPUs: 11 holds [0, 50 x 0.2 / 1.2) ms */
    assert_int_equal(s.end_ns, 1000 * MS + GS_TURN_FRAME_NS * 200000 / 1200001);
}

/* Me (11, cap 30) beside a verified neighbour (22, cap 20) and two
 * containers nobody verified, one claiming the whole GPU. */
static void forged_claims_share_only_what_the_verified_ones_leave(void **state)
{
    (void)state;
    const struct gs_turn_claim trusted[] = { { 22, 200000 } };
    /* records: someone wrote one under our id claiming the GPU, one under
     * 22's claiming more than its cap, and two unknown ids */
    struct gs_turn_claim c[6] = {
        { 11, GS_TURN_MAX_CLAIM }, { 22, 900000 }, { 22, 200000 }, { 44, GS_TURN_MAX_CLAIM }, { 55, 500000 }
    };
    unsigned n = gs_turn_trusted_claims(c, 5, 11, 300000, trusted, 1);
    assert_int_equal(n, 4);
    assert_int_equal(c[0].container, 11);
    assert_int_equal(c[0].claim_ppm, 300000); /* ours, whatever the records say */
    assert_int_equal(c[1].claim_ppm, 200000); /* 22 at most its verified cap */
    /* 44 and 55 claimed 1.5 GPUs; they share the 0.5 left, 2 : 1 */
    assert_int_equal(c[2].claim_ppm, 333333);
    assert_int_equal(c[3].claim_ppm, 166666);
    /* our slot is as long as our claim: [0, 15) ms of the frame */
    struct gs_turn_slot s;
    assert_int_equal(gs_turn_frame(c, &n, 11, 1000 * MS, &s), 1);
    assert_true(s.mine);
    assert_int_equal(s.end_ns, 1015 * MS);
    /* claims that fit beside the verified ones are left as they are */
    struct gs_turn_claim d[3] = { { 22, 200000 }, { 44, 400000 } };
    assert_int_equal(gs_turn_trusted_claims(d, 2, 11, 300000, trusted, 1), 3);
    assert_int_equal(d[2].claim_ppm, 400000);
    /* a share container (no claim) takes no slot: no frame for it */
    struct gs_turn_claim e[3] = { { 11, 300000 }, { 22, 200000 } };
    n = gs_turn_trusted_claims(e, 2, 11, 0, trusted, 1);
    assert_int_equal(n, 1);
    assert_int_equal(gs_turn_frame(e, &n, 11, 1000 * MS, &s), 0);
}

static void every_gpu_of_a_job_gives_it_the_same_slots(void **state)
{
    (void)state;
    /* the ledgers of two GPUs list the same containers in other orders */
    for (uint64_t now = 1000 * MS; now < 1200 * MS; now += 700000) {
        struct gs_turn_claim gpu0[] = { { 7, 300000 }, { 9, 700000 }, { 7, 300000 } };
        struct gs_turn_claim gpu1[] = { { 9, 700000 }, { 7, 300000 } };
        struct gs_turn_slot a, b;
        assert_int_equal(frame(gpu0, 3, 7, now, &a), 1);
        assert_int_equal(frame(gpu1, 2, 7, now, &b), 1);
        assert_int_equal(a.owner, b.owner);
        assert_int_equal(a.end_ns, b.end_ns);
        assert_int_equal(a.mine_ns, b.mine_ns);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_container_has_no_frame_to_follow),
        cmocka_unit_test(caps_30_and_70_split_each_frame_in_their_order),
        cmocka_unit_test(claims_under_the_whole_gpu_leave_the_rest_of_the_frame_to_nobody),
        cmocka_unit_test(claims_past_the_whole_gpu_share_the_frame_in_proportion),
        cmocka_unit_test(repeats_merge_and_forged_claims_are_bounded),
        cmocka_unit_test(forged_claims_share_only_what_the_verified_ones_leave),
        cmocka_unit_test(every_gpu_of_a_job_gives_it_the_same_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
