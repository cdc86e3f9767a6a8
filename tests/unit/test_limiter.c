/* The compute limiter's token account and windows (src/core/limiter.c):
 * refills, debt, claims, window ends, busy intervals and their charge. */
#include "limiter_test.h"

static void refill_is_capped_at_one_period(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_CAP, 30, 100);
    /* a new container was idle until now: one period's allowance banked */
    assert_int_equal(a.tokens, 15 * MS);
    gs_lim_refill(&a, 1000 * MS + 10 * MS, 1);
    assert_int_equal(a.tokens, 15 * MS);
    a.tokens = 0; /* spent */
    gs_lim_refill(&a, 1000 * MS + 20 * MS, 1);
    assert_int_equal(a.tokens, 3 * MS); /* 30 % of 10 ms */
    gs_lim_refill(&a, 1000 * MS + 5000 * MS, 1);
    assert_int_equal(a.tokens, 15 * MS); /* 30 % of the 50 ms period, not of 5 s */
    /* after waiting for another container's turn: two periods */
    gs_lim_refill(&a, 1000 * MS + 5040 * MS, GS_LIM_TURN_BANK);
    assert_int_equal(a.tokens, 27 * MS);
    gs_lim_refill(&a, 1000 * MS + 6000 * MS, GS_LIM_TURN_BANK);
    assert_int_equal(a.tokens, 30 * MS);
    gs_lim_refill(&a, 1000 * MS + 6010 * MS, 1); /* idle again: one period */
    assert_int_equal(a.tokens, 15 * MS);
}

static void debt_makes_open_wait_exactly_until_paid(void **state)
{
    (void)state;
    struct gs_lim_account a;
    struct gs_lim_window w = { 0 };
    account(&a, GS_LIM_CAP, 25, 100);
    a.tokens = 0; /* the period's allowance it started with is spent */
    uint64_t now = 1000 * MS;
    assert_int_equal(gs_lim_open(&w, &a, now, 1), 0);
    assert_true(w.open);
    /* quantum: one cycle's allowance (1.25 ms) at c = 1 */
    assert_int_equal(w.end_ns - w.start_ns, 1250 * US);
    assert_int_equal(w.max_launches, 1); /* cost per launch not known yet */
    w.launches = 4;
    uint64_t charge = gs_lim_close(&w, &a, now + 20 * MS, 1);
    assert_int_equal(charge, 20 * MS);
    assert_int_equal(w.est_ns, 5 * MS);
    /* 20 ms used, 5 ms accrued meanwhile: 15 ms of debt = 60 ms at 25 % */
    uint64_t wait = gs_lim_open(&w, &a, now + 20 * MS, 1);
    assert_int_equal(wait, 60 * MS);
    assert_false(w.open);
    assert_int_equal(gs_lim_open(&w, &a, now + 80 * MS, 1), 0);
    assert_true(w.open);
    assert_int_equal(w.max_launches, 1); /* 1.25 ms of window at 5 ms a launch */
    /* 40 ms later, 10 ms banked: the window lasts them */
    assert_int_equal(gs_lim_open(&w, &a, now + 120 * MS, 1), 0);
    assert_int_equal(w.end_ns - w.start_ns, 10 * MS);
    assert_int_equal(w.max_launches, 2);
}

/* Unthrottled, a share container's debt (the charge's error) is forgiven;
 * a cap that starts to run free as its window opens keeps what it owes,
 * without waiting for it. */
static void an_unthrottled_cap_keeps_its_debt_and_a_share_does_not(void **state)
{
    (void)state;
    struct gs_lim_window w = { 0 };
    struct gs_lim_account cap, share;
    account(&cap, GS_LIM_CAP, 30, 100);
    account(&share, GS_LIM_SHARE, 0, 50);
    uint64_t now = 1000 * MS;
    cap.tokens = share.tokens = -(int64_t)(10 * MS);
    cap.rate_ppm = share.rate_ppm = GS_LIM_PPM;
    assert_int_equal(gs_lim_open(&w, &cap, now, 1), 0);
    assert_int_equal(cap.tokens, -(int64_t)(10 * MS));
    w.open = 0;
    assert_int_equal(gs_lim_open(&w, &share, now, 1), 0);
    assert_int_equal(share.tokens, 0);
}

static void an_abandoned_set_up_claim_is_taken_over(void **state)
{
    (void)state;
    struct gs_lim_account a;
    memset(&a, 0, sizeof a);
    a.configured = 2; /* a process died between its claim and its release */
    assert_int_equal(gs_lim_account_init(&a, GS_LIM_CAP, 30, 100, 1000 * MS), 1);
    assert_int_equal(a.configured, 2);
    gs_lim_account_take_over(&a, GS_LIM_CAP, 30, 100, 1000 * MS);
    assert_int_equal(a.configured, 1);
    assert_int_equal(a.rate_ppm, 300000);
    assert_int_equal(gs_lim_account_init(&a, GS_LIM_SHARE, 0, 50, 1001 * MS), 0);
    assert_int_equal(a.mode, GS_LIM_CAP); /* the first configuration stands */
    gs_lim_account_take_over(&a, GS_LIM_SHARE, 0, 50, 1001 * MS);
    assert_int_equal(a.mode, GS_LIM_CAP); /* nothing to take over once set up */
}

/* An account whose processes are long gone (or from an earlier boot)
 * starts afresh, but keeps what it owes, less what its start rate refilled
 * since. */
static void an_account_left_by_gone_processes_keeps_its_debt(void **state)
{
    (void)state;
    struct gs_lim_account a;
    memset(&a, 0, sizeof a);
    assert_int_equal(gs_lim_account_init(&a, GS_LIM_CAP, 10, 100, 1000 * MS), 0);
    a.tokens = -(int64_t)(200 * MS); /* the last process ran up 2 s at 10 % */
    a.rate_ppm = GS_LIM_PPM;         /* and ran free once */
    uint64_t later = 1000 * MS + 1500 * MS;
    assert_int_equal(gs_lim_account_init(&a, GS_LIM_CAP, 10, 100, later), 0);
    assert_int_equal(a.rate_ppm, 100000);
    assert_int_equal(a.tokens, -(int64_t)(50 * MS)); /* 150 ms refilled in 1.5 s */
    assert_int_equal(a.refill_ns, later);
    /* long enough later, a full burst and no more */
    assert_int_equal(gs_lim_account_init(&a, GS_LIM_CAP, 10, 100, later + 60000 * MS), 0);
    assert_int_equal(a.tokens, (int64_t)(5 * MS)); /* a period (50 ms) at 10 % */
    /* left from an earlier boot, its clocks ahead of this one's: as long
     * gone, not waiting for them */
    uint64_t ahead = 900000 * MS, boot = 2000 * MS;
    a.outer_last_ns = a.outer_next_ns = a.refill_ns = a.union_end_ns = a.throttled_ns = a.woke_ns = ahead;
    a.rate_ppm = GS_LIM_PPM;
    a.tokens = -(int64_t)(100 * MS); /* refilled for this boot's 2 s at 10 % */
    assert_int_equal(gs_lim_account_init(&a, GS_LIM_CAP, 10, 100, boot), 0);
    assert_int_equal(a.rate_ppm, 100000);
    assert_int_equal(a.outer_next_ns, boot);
    assert_int_equal(a.refill_ns, boot);
    assert_int_equal(a.union_end_ns, 0);
    assert_int_equal(a.throttled_ns, 0);
    assert_int_equal(a.tokens, (int64_t)(5 * MS));
}

static void weight_is_the_share_weight_or_the_cap(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_CAP, 30, 100);
    assert_int_equal(gs_lim_weight(&a), 30);
    account(&a, GS_LIM_SHARE, 0, 70);
    assert_int_equal(gs_lim_weight(&a), 70);
    assert_true(gs_lim_unthrottled(&a));
    account(&a, GS_LIM_CAP, 30, 100);
    assert_false(gs_lim_unthrottled(&a));
}

/* After an interval the loop slept through, NVML's samples say who used the
 * GPU while we idled: only if our pids were busy in it did we work
 * through it (a free container launching rarely). */
static void an_interval_is_idled_where_the_loop_slept_and_our_pids_were_not_busy(void **state)
{
    (void)state;
    uint64_t slept = 2 * GS_LIM_OUTER_NS + 1;
    assert_false(gs_lim_outer_idled(2 * GS_LIM_OUTER_NS, 0));
    assert_true(gs_lim_outer_idled(slept, 0));
    assert_true(gs_lim_outer_idled(slept, -1)); /* no samples of ours */
    assert_true(gs_lim_outer_idled(slept, GS_LIM_IDLED_PPM - 1));
    assert_false(gs_lim_outer_idled(slept, GS_LIM_IDLED_PPM));
    assert_false(gs_lim_outer_idled(GS_LIM_OUTER_NS, -1));
}

static void window_end_follows_the_drain_else_the_marker_else_the_plan(void **state)
{
    (void)state;
    int measured;
    struct gs_lim_close_facts f = { .start_ns = 100 * MS,
                                    .planned_end_ns = 110 * MS,
                                    .close_ns = 112 * MS,
                                    .drained_ns = 115 * MS,
                                    .last_launch_ns = 112 * MS - 50 * US,
                                    .mark_ns = 8 * MS };
    assert_int_equal(gs_lim_window_end(&f, &measured), 115 * MS); /* drained well after the close */
    assert_true(measured);
    f.last_launch_ns = 109 * MS;
    /* 3 ms after the last launch, shorter than the window: a long kernel
     * of ours may still run */
    assert_int_equal(gs_lim_window_end(&f, &measured), 115 * MS);
    /* the marker after the last launch completed, and the close came 81 s
     * later: the drain waited for work queued after ours (or behind a
     * neighbour's slice), however long */
    f.drained_ns = 81 * 1000 * MS;
    f.close_ns = 81 * 1000 * MS - 200 * US;
    assert_int_equal(gs_lim_window_end(&f, &measured), 109 * MS);
    f.after_mark = 2; /* launches after the marker, of unknown GPU time: the drain */
    assert_int_equal(gs_lim_window_end(&f, &measured), 81 * 1000 * MS);
    f.per_launch_ns = 1 * MS; /* priced: they ended at 110 ms */
    assert_int_equal(gs_lim_window_end(&f, &measured), 110 * MS);
    f.mark_ns = -1; /* the marker had not completed: the drain */
    assert_int_equal(gs_lim_window_end(&f, &measured), 81 * 1000 * MS);
    f.after_mark = 0;
    f.per_launch_ns = 0;
    f.close_ns = 112 * MS;
    f.mark_ns = 8 * MS;
    f.drained_ns = 112 * MS + 50 * US;                            /* drained at once: the marker knows better */
    assert_int_equal(gs_lim_window_end(&f, &measured), 109 * MS); /* but not before the last launch */
    f.sliced = 1; /* ... unless it may have waited for another context's slice */
    assert_int_equal(gs_lim_window_end(&f, &measured), 108 * MS);
    f.sliced = 0;
    f.mark_ns = 11 * MS;
    assert_int_equal(gs_lim_window_end(&f, &measured), 111 * MS);
    f.drained_ns = 0;
    f.mark_ns = 20 * MS; /* never past the close */
    assert_int_equal(gs_lim_window_end(&f, &measured), 112 * MS);
    f.mark_ns = -1; /* nothing measured: at most the window */
    assert_int_equal(gs_lim_window_end(&f, &measured), 110 * MS);
    assert_false(measured);
}

/* A drain that gave up at its bound, the window's work still pending (it
 * may wait for a flag the host writes only after the launch that closes
 * the window returns): the window is busy until then, whatever its
 * markers say, and the whole of it is charged. */
static void an_undrained_window_is_charged_busy_until_the_drain_gave_up(void **state)
{
    (void)state;
    int measured;
    /* a completed marker long before a close after a long CPU gap: drained,
     * that would be work queued after ours (the 81 s case above) */
    struct gs_lim_close_facts f = { .start_ns = 100 * MS,
                                    .planned_end_ns = 110 * MS,
                                    .close_ns = 5000 * MS,
                                    .drained_ns = 6000 * MS,
                                    .undrained = 1,
                                    .last_launch_ns = 109 * MS,
                                    .mark_ns = 8 * MS };
    assert_int_equal(gs_lim_window_end(&f, &measured), 6000 * MS);
    assert_false(measured); /* nothing learnt of the GPU time per launch */
    f.mark_ns = -1;
    f.per_launch_ns = 1 * MS;
    f.after_mark = 3;
    assert_int_equal(gs_lim_window_end(&f, &measured), 6000 * MS);
    f.drained_ns = 0; /* no bound passed yet: never before the close */
    assert_int_equal(gs_lim_window_end(&f, &measured), 5000 * MS);

    struct gs_lim_account a;
    struct gs_lim_window w = { 0 };
    account(&a, GS_LIM_CAP, 30, 100);
    uint64_t t = 1000 * MS;
    assert_int_equal(gs_lim_open(&w, &a, t, 1), 0);
    w.launches = 2;
    f = (struct gs_lim_close_facts){ .start_ns = t,
                                     .planned_end_ns = w.end_ns,
                                     .close_ns = t + 2 * MS,
                                     .drained_ns = t + 2 * MS + 1000 * MS,
                                     .undrained = 1,
                                     .last_launch_ns = t + 1 * MS,
                                     .mark_ns = 100 * US };
    uint64_t end = gs_lim_window_end(&f, &measured);
    int64_t tokens = a.tokens;
    assert_int_equal(gs_lim_close(&w, &a, end, measured), 1002 * MS);
    assert_int_equal(tokens - a.tokens, (int64_t)(1002 * MS)); /* owed, at c = s = 1 */
    assert_int_equal(w.est_ns, 0);
}

/* A window well in credit goes on and may never close: its measured
 * intervals teach it the GPU time per launch, which sets how many launches
 * the window holds (gs_lim_extend) and how often they get a marker. */
static void an_extended_window_learns_its_gpu_time_per_launch_from_its_intervals(void **state)
{
    (void)state;
    struct gs_lim_account a;
    struct gs_lim_window w = { 0 };
    account(&a, GS_LIM_CAP, 90, 100);
    uint64_t now = 1000 * MS;
    assert_int_equal(gs_lim_open(&w, &a, now, 1), 0);
    w.launches = 200;
    /* not measured (the gap was charged): nothing learnt */
    gs_lim_busy_interval(&w, &a, now + 1 * MS, now + 2 * MS, 0);
    assert_int_equal(w.est_ns, 0);
    /* 200 launches drained 1 ms after the interval began: 5 us each */
    gs_lim_busy_interval(&w, &a, now + 3 * MS, now + 4 * MS, 200);
    assert_int_equal(w.est_ns, 5 * US);
    /* the next, 100 launches in 1.7 ms (17 us each), moves it a quarter */
    gs_lim_busy_interval(&w, &a, now + 5700 * US, now + 6 * MS, 100);
    assert_int_equal(w.est_ns, (3 * 5 * US + 17 * US) / 4);
    /* at its end, 1 ms into its next interval, the window goes on, holding
     * as many launches as its length at that cost, not one */
    w.end_ns = now + 7 * MS;
    assert_true(gs_lim_extend(&w, &a, now + 7 * MS));
    assert_true(w.max_launches > w.launches + 100);
}

static void overlapping_windows_of_one_container_are_charged_once(void **state)
{
    (void)state;
    struct gs_lim_account a;
    struct gs_lim_window w1 = { 0 }, w2 = { 0 };
    account(&a, GS_LIM_CAP, 50, 100);
    uint64_t t = 1000 * MS;
    gs_lim_open(&w1, &a, t, 1);
    gs_lim_open(&w2, &a, t + 2 * MS, 1);
    uint64_t c1 = gs_lim_close(&w1, &a, t + 10 * MS, 1);
    uint64_t c2 = gs_lim_close(&w2, &a, t + 12 * MS, 1);
    assert_int_equal(c1, 10 * MS);
    assert_int_equal(c2, 2 * MS); /* [2, 10] was already the container's */
    assert_int_equal(a.occ_ns, 12 * MS);
}

/* While c is not learnt, a gap the fine probe found between two intervals
 * counts as occupancy, as the coarser probe after it would count it, and is
 * not charged; nor is a part another thread counted already. */
static void a_gap_found_while_learning_counts_as_occupancy_not_as_charge(void **state)
{
    (void)state;
    struct gs_lim_account a;
    struct gs_lim_window w = { 0 };
    account(&a, GS_LIM_CAP, 30, 100);
    uint64_t t = 1000 * MS;
    gs_lim_open(&w, &a, t, 1);
    int64_t tokens = a.tokens;
    gs_lim_busy_interval(&w, &a, t + 100 * US, t + 140 * US, 4); /* 100 us busy, 40 us of CPU */
    gs_lim_uncharged_gap(&a, t + 100 * US, t + 140 * US);
    assert_int_equal(a.occ_ns, 140 * US);
    assert_int_equal(a.charged_ns, 100 * US);
    assert_int_equal(tokens - a.tokens, (int64_t)(100 * US));
    gs_lim_uncharged_gap(&a, t + 120 * US, t + 150 * US); /* [120, 140] was counted */
    assert_int_equal(a.occ_ns, 150 * US);
    assert_true(gs_lim_learning(&a));
    a.corr_ppm = 250000;
    assert_false(gs_lim_learning(&a));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refill_is_capped_at_one_period),
        cmocka_unit_test(debt_makes_open_wait_exactly_until_paid),
        cmocka_unit_test(an_unthrottled_cap_keeps_its_debt_and_a_share_does_not),
        cmocka_unit_test(an_abandoned_set_up_claim_is_taken_over),
        cmocka_unit_test(an_account_left_by_gone_processes_keeps_its_debt),
        cmocka_unit_test(weight_is_the_share_weight_or_the_cap),
        cmocka_unit_test(window_end_follows_the_drain_else_the_marker_else_the_plan),
        cmocka_unit_test(an_undrained_window_is_charged_busy_until_the_drain_gave_up),
        cmocka_unit_test(an_interval_is_idled_where_the_loop_slept_and_our_pids_were_not_busy),
        cmocka_unit_test(overlapping_windows_of_one_container_are_charged_once),
        cmocka_unit_test(a_gap_found_while_learning_counts_as_occupancy_not_as_charge),
        cmocka_unit_test(an_extended_window_learns_its_gpu_time_per_launch_from_its_intervals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
