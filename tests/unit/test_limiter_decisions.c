/* The compute limiter's decisions one at a time: the corrections
 * (src/core/limiter_correction.c), the other containers' claims and the
 * share targets (limiter_demands.c), the outer run's decision and NVML's
 * samples (limiter_outer.c). */
#include "limiter_test.h"

static void correction_is_nvml_kernel_time_over_event_busy_time(void **state)
{
    (void)state;
    /* B always busy: our events counted 60 % busy and NVML says our kernels ran 30 % */
    uint32_t c = GS_LIM_PPM;
    for (int i = 0; i < 20; i++)
        c = gs_lim_correction(c, 300000, 600000, 0);
    assert_in_range(c, 499000, 501000);
    /* alone and launch-bound: the GPU idles between our kernels inside a
     * busy interval; that is not GPU time either */
    c = GS_LIM_PPM;
    for (int i = 0; i < 20; i++)
        c = gs_lim_correction(c, 240000, 600000, 0);
    assert_in_range(c, 399000, 401000);
    /* NVML does not see our pids (containers): learn nothing */
    assert_int_equal(gs_lim_correction(700000, 0, 500000, 0), 700000);
    assert_int_equal(gs_lim_correction(700000, -1, 500000, 0), 700000);
    /* a new account's c is not learnt (0), charged as 1; the first measure
     * is taken whole, the next half-way; nothing to learn leaves it unlearnt */
    struct gs_lim_account a;
    account(&a, GS_LIM_CAP, 30, 100);
    assert_int_equal(a.corr_ppm, 0);
    assert_int_equal(gs_lim_corr_of(a.corr_ppm), GS_LIM_PPM);
    assert_int_equal(gs_lim_correction(0, -1, 500000, 0), 0);
    c = gs_lim_correction(0, 240000, 960000, 0);
    assert_int_equal(c, 250000);
    assert_int_equal(gs_lim_correction(c, 480000, 960000, 0), 375000);
    /* ... save a first measure above 1, taken half-way from 1: NVML's
     * period and our interval need not line up in a load's first runs (an
     * H100's matmul under cap 70 read 0.66 against 0.61 counted) */
    assert_int_equal(gs_lim_correction(0, 660000, 600000, 0), 1050000);
    assert_int_equal(gs_lim_correction(0, 660000, 600000, 1), 1050000);
    assert_int_equal(gs_lim_correction(1050000, 660000, 600000, 0), 1075000);
    /* ... but none from under 5 % of our time (NVML's samples lag a start,
     * 0 % on an H200): c stays unlearnt */
    assert_int_equal(gs_lim_correction(0, 0, 179000, 0), 0);
    assert_int_equal(gs_lim_correction(0, 20000, 100000, 0), 0);
    assert_int_equal(gs_lim_correction(0, 49999, 300000, 1), 0);
    /* the device-only estimate steps half-way from 1 even then */
    assert_int_equal(gs_lim_correction_device(0, 1000000, 352000), 750000); /* c 0.5 alone */
    /* ... and a device read idle while we were busy (NVML's first look,
     * before it sampled us) teaches nothing: c stays unlearnt */
    assert_int_equal(gs_lim_correction_device(0, 0, 900000), 0);
    /* busy all the time it cannot see the others: c relaxes towards 1,
     * from either side */
    assert_int_equal(gs_lim_correction_device(600000, 1000000, 980000), 625000);
    assert_int_equal(gs_lim_correction_device(1320000, 1000000, 980000), 1300000);
    assert_true(gs_lim_learning(&a));
    /* never below the floor, nor above the ceiling */
    c = GS_LIM_PPM;
    for (int i = 0; i < 40; i++)
        c = gs_lim_correction(c, 1000, 1000000, 0);
    assert_true(c >= GS_LIM_MIN_CORR);
    for (int i = 0; i < 40; i++)
        c = gs_lim_correction(c, 1000000, 100000, 0);
    assert_true(c <= GS_LIM_MAX_CORR);
}

/* A capped container's first outer run came a few hundred us after its
 * first launch, its outer thread held off its CPU on a loaded 2-core CI
 * machine: NVML had no samples yet and the device read idle (its last
 * period, before our work), and the occupancy counted so far was 0.05-0.2
 * of the interval (under the 0.2 that makes the reading stale). Taken as a
 * measure, c became 1 learnt: the learning probes stopped and a decoder's
 * 40 us CPU gaps were charged at c = 1 until NVML measured it two runs
 * later (it waited 0.29-0.33 s of 3 s for tokens under cap 30). A device
 * reading under GS_LIM_BUSY_PPM teaches a c not yet learnt nothing. */
static void a_first_run_before_nvml_samples_with_little_occupancy_learns_no_c(void **state)
{
    (void)state;
    assert_int_equal(gs_lim_correction_device(0, 0, 100000), 0);
    assert_int_equal(gs_lim_correction_device(0, 40000, 150000), 0);
    struct gs_lim_account a;
    account(&a, GS_LIM_CAP, 30, 100);
    struct gs_outer_in in = outer_in(120000, -1, -1, 0, NULL, 0);
    in.interval_ns = 600 * US;
    struct gs_outer_out o;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.corr, 0);
    gs_lim_outer_apply(&a, &o, in.now);
    assert_true(gs_lim_learning(&a));
    /* a real reading of the device still teaches one (half-way from 1) */
    assert_int_equal(gs_lim_correction_device(0, 1000000, 352000), 750000);
}

static void water_filling_gives_the_unused_share_away(void **state)
{
    (void)state;
    /* a light tenant of weight 70 using 10 %: we (30) may use the rest */
    struct gs_lim_demand light = { 70, 100000, 0, 0, 0 };
    assert_int_equal(gs_lim_share_fill(30, &light, 1), GS_LIM_PPM);
    /* it wants more: weights hold */
    light.wants_more = 1;
    assert_int_equal(gs_lim_share_fill(30, &light, 1), 300000);
    /* a tenant of weight 70 using 90 % without waiting: above its share, so
     * weights hold between us */
    struct gs_lim_demand heavy = { 70, 900000, 0, 0, 0 };
    assert_int_equal(gs_lim_share_fill(30, &heavy, 1), 300000);
    /* three: one light (10 %), two that want more: split the 90 % by weight */
    struct gs_lim_demand three[2] = { { 50, 100000, 0, 0, 0 }, { 60, 500000, 1, 0, 0 } };
    assert_int_equal(gs_lim_share_fill(30, three, 2), 900000 * 30 / 90);
}

static void capped_neighbours_keep_their_caps_and_a_share_one_takes_the_rest(void **state)
{
    (void)state;
    /* caps 10 / 20 / 30 that want more: each keeps its cap, whatever its
     * weight beside ours (100); by weights alone they would get 0.06 / 0.12
     * / 0.19 and we 0.62 */
    struct gs_lim_demand caps[3] = { { 10, 90000, 1, 100000, 0 },
                                     { 20, 190000, 1, 200000, 0 },
                                     { 30, 280000, 1, 300000, 0 } };
    assert_int_equal(gs_lim_share_fill(100, caps, 3), 400000);
    /* one of them wants less than its cap: it keeps its use */
    caps[2].wants_more = 0;
    caps[2].use_ppm = 100000;
    assert_int_equal(gs_lim_share_fill(100, caps, 3), 600000);
    /* beside another share container that wants more, the rest is split by weight */
    struct gs_lim_demand mixed[2] = { { 30, 300000, 1, 300000, 0 }, { 40, 400000, 1, 0, 0 } };
    assert_int_equal(gs_lim_share_fill(30, mixed, 2), 700000 * 30 / 70);
    /* caps that add up to the whole GPU leave share containers their floor */
    struct gs_lim_demand full[2] = { { 50, 500000, 1, 500000, 0 }, { 60, 600000, 1, 600000, 0 } };
    assert_int_equal(gs_lim_share_fill(100, full, 2), GS_LIM_CAPS_LEAVE_PPM);
    /* only a verified cap counts as one: a claim's own is ignored */
    struct gs_lim_claim c[2] = { { { 30, 300000, 1, 900000, 0 }, 30, 300000 }, { { 30, 300000, 1, 900000, 0 }, 0, 0 } };
    struct gs_lim_demand d[2];
    assert_int_equal(gs_lim_trusted_demands(c, 2, 0, -1, d), 2);
    assert_int_equal(d[0].cap_ppm, 300000);
    assert_int_equal(d[1].cap_ppm, 0);
}

static void share_target_is_weight_over_busy_weights(void **state)
{
    (void)state;
    assert_int_equal(gs_lim_share_target(30, 70), 300000);
    assert_int_equal(gs_lim_share_target(70, 30), 700000);
    assert_int_equal(gs_lim_share_target(100, 0), GS_LIM_PPM);
}

static void the_entry_for_users_outside_the_ledger_counts_beside_a_full_ledger(void **state)
{
    /* 64 light containers of the ledger that want no more than they use,
     * and the GPU users outside it (NVML), who want more, as the 65th */
    (void)state;
    struct gs_lim_demand d[GS_LIM_MAX_DEMANDS + 1];
    for (unsigned i = 0; i < GS_LIM_MAX_DEMANDS; i++)
        d[i] = (struct gs_lim_demand){ 100, 1000, 0, 0, 0 };
    d[GS_LIM_MAX_DEMANDS] = (struct gs_lim_demand){ 100, 0, 1, 0, 0 };
    uint32_t fill = gs_lim_share_fill(100, d, GS_LIM_MAX_DEMANDS + 1);
    assert_int_equal(fill, (GS_LIM_PPM - GS_LIM_MAX_DEMANDS * 1000) / 2);
    /* the same through the decision the outer loop runs */
    struct gs_lim_account a;
    account(&a, GS_LIM_SHARE, 0, 100);
    struct gs_outer_in in = outer_in(GS_LIM_PPM, -1, -1, -1, d, GS_LIM_MAX_DEMANDS); /* queued all the run */
    in.outside_weight = 100;
    struct gs_outer_out o;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.target, fill);
    in.outside_weight = 0; /* nobody outside: the light ones leave the rest */
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.target, GS_LIM_SHARE_MEASURED);
}

/* A share container held to its target (70 of 100) whose work was queued
 * all the run, its corrected use under the target (time-sliced beside a
 * free neighbour of weight 30 that wants no more): it says it wants more,
 * so that the neighbour is held to its part. Only the free one said so: a
 * share pair on the simulated driver stayed time-sliced at 0.28 / 0.48. */
static void a_held_share_container_with_work_queued_all_the_time_wants_more(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_SHARE, 0, 70);
    a.rate_ppm = 700000; /* held to its part */
    a.throttled_ns = 100 * MS;
    struct gs_lim_demand free30 = { 30, 350000, 0, 0, 0 };
    struct gs_outer_in in = outer_in(998000, -1, -1, 1000000, &free30, 1);
    struct gs_outer_out o;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.wants_ns, in.now);
    in.occ_ppm = 600000; /* held and taking turns: what it waits for tokens says it */
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.wants_ns, 100 * MS);
}

/* Taking turns with a GPU-bound neighbour of weight 30, a GPU-bound share
 * container of weight 70 used 0.68 of an H100 and waited for the 30
 * side's turns the rest of the run, without a wait for tokens: the time it
 * waited counts as queued, and it wants more. Else the 30 side, seeing
 * nobody else want more, ran free for a run while the 70 side waited. A
 * light one that waits a little keeps what its waits for tokens say. */
static void a_held_share_container_that_waited_for_turns_the_rest_of_the_run_wants_more(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_SHARE, 0, 70);
    a.rate_ppm = 700000;
    a.throttled_ns = 100 * MS;
    struct gs_lim_demand turns30 = { 30, 300000, 1, 0, 0 };
    struct gs_outer_in in = outer_in(680000, -1, -1, 960000, &turns30, 1);
    in.waited_ns = GS_LIM_OUTER_NS * 3 / 10;
    struct gs_outer_out o;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.wants_ns, in.now);
    in.occ_ppm = 200000; /* a light load */
    in.waited_ns = GS_LIM_OUTER_NS / 10;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.wants_ns, 100 * MS);
}

/* A new share container of weight 70 (a decoder loading its model, no
 * kernel yet) whose first outer run finds a GPU-bound neighbour of weight
 * 30 that wants more: the device's busy time is the neighbour's. Published
 * as its own, it read 0.99 and wanted more on an H100, so the neighbour
 * was held to 0.30 and the decoder waited up to 150 ms for its turns. It
 * is not held to its part either (outer_share_target): it wants no more
 * and uses under three quarters of it. */
static void a_share_container_finding_a_busy_neighbour_publishes_the_devices_time_less_theirs(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_SHARE, 0, 70);
    struct gs_lim_demand busy30 = { 30, 990000, 1, 0, 0 };
    struct gs_outer_in in = outer_in(0, 0, 980000, 990000, &busy30, 1);
    struct gs_outer_out o;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.use_ppm, 0);
    assert_int_equal(o.wants_ns, 0);
    assert_int_equal(o.target, GS_LIM_SHARE_MEASURED);
    /* beside a neighbour that has just woken too and published no use yet,
     * the device's busy time is the most it can have used: published, but
     * it claims nothing on it (neither wanting more nor held) */
    busy30.use_ppm = 0;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.use_ppm, 990000);
    assert_int_equal(o.wants_ns, 0);
    assert_int_equal(o.target, GS_LIM_SHARE_MEASURED);
    busy30.use_ppm = 990000;
    /* held back lately, it is held to its part */
    a.throttled_ns = in.now - GS_LIM_THROTTLED_NS / 2;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.target, 700000);
    a.throttled_ns = 0;
    /* held and wanting no more this run: at 0.60 (a GPU-bound load near
     * its part) it stays held, at 0.50 (a medium one) it is let go */
    a.rate_ppm = 700000;
    a.corr_ppm = GS_LIM_PPM;
    in.our_ppm = in.others_ppm = -1;
    in.dev_ppm = -1;
    in.occ_ppm = 600000;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.use_ppm, 600000);
    assert_int_equal(o.wants_ns, 0);
    assert_int_equal(o.target, 700000);
    in.occ_ppm = 500000;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.target, GS_LIM_SHARE_MEASURED);
    /* running free alone, and NVML's samples no measure of us: all the
     * device's busy time */
    a.rate_ppm = GS_LIM_PPM;
    in.occ_ppm = 0;
    in.dev_ppm = 990000;
    in.ndem = 0;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.use_ppm, 990000);
}

static void queued_is_occupancy_and_waits_at_most_the_whole(void **state)
{
    (void)state;
    assert_int_equal(gs_lim_queued(600000, 300 * MS, 1000 * MS), 900000);
    assert_int_equal(gs_lim_queued(900000, 300 * MS, 1000 * MS), GS_LIM_PPM);
    assert_int_equal(gs_lim_queued(100000, 2000 * MS, 1000 * MS), GS_LIM_PPM); /* threads waiting at once */
    assert_int_equal(gs_lim_queued(100000, 0, 0), GS_LIM_PPM);
}

/* Graph launches are measured coarsely only where NVML's per-process time
 * corrects the measure: capped, alone, with samples that see our time; not
 * without samples, and not beside a busy member of the ledger. */
static void graphs_are_measured_coarsely_only_where_per_process_samples_correct_it(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_CAP, 70, 100);
    struct gs_lim_demand busy = { 100, 400000, 0, 0, 0 };
    struct gs_outer_in in = outer_in(600000, 500000, 0, 500000, NULL, 0);
    struct gs_outer_out o;
    gs_lim_outer_decide(&a, &in, &o);
    assert_true(o.graph_coarse);
    assert_true(o.corr < GS_LIM_PPM); /* the samples take the counted gaps out */
    in.our_ppm = in.others_ppm = -1;  /* no samples */
    gs_lim_outer_decide(&a, &in, &o);
    assert_false(o.graph_coarse);
    in.our_ppm = 500000;
    in.others_ppm = 0;
    in.dem = &busy; /* a busy neighbour */
    in.ndem = 1;
    gs_lim_outer_decide(&a, &in, &o);
    assert_false(o.graph_coarse);
}

/* A decoder capped at 30 whose c a turn's first reading set to 1 (NVML
 * credited a neighbour's time-slice to it), then alone: the readings of an
 * H200's next three outer runs (occupancy, ours, device; nobody else). Each
 * run's c prices the next run's occupancy; stepping half-way it charged
 * 0.36 and 0.30 of the device after the first two, at or past the cap, and
 * the decoder waited for tokens. A reading beside someone else still steps
 * half-way, and so does a smaller fall. */
static void a_reading_alone_that_halves_c_is_taken_whole(void **state)
{
    (void)state;
    static const int64_t run[3][3] = { { 282506, 130000, 140000 }, { 479972, 90000, 50000 }, { 644669, 70000, 90000 } };
    static const uint64_t next_occ[3] = { 479972, 644669, 903390 };
    struct gs_lim_account a;
    account(&a, GS_LIM_CAP, 30, 100);
    a.corr_ppm = GS_LIM_PPM;
    for (int i = 0; i < 3; i++) {
        struct gs_outer_in in = outer_in((uint64_t)run[i][0], run[i][1], 0, run[i][2], NULL, 0);
        struct gs_outer_out o;
        a.throttled_ns = in.now; /* held for tokens, as it was: a cap that holds runs no free */
        gs_lim_outer_decide(&a, &in, &o);
        gs_lim_outer_apply(&a, &o, in.now);
        assert_true(next_occ[i] * gs_lim_corr_of(a.corr_ppm) / GS_LIM_PPM < 250000);
    }
    assert_in_range(a.corr_ppm, 140000, 160000);
    /* the rule's edges */
    assert_int_equal(gs_lim_correction(GS_LIM_PPM, 100000, 800000, 1), 125000);
    assert_int_equal(gs_lim_correction(GS_LIM_PPM, 100000, 800000, 0), 562500);
    assert_int_equal(gs_lim_correction(200000, 120000, 800000, 1), 175000); /* 0.15: less than half */
    assert_int_equal(gs_lim_correction(140000, 280000, 800000, 1), 245000); /* a rise steps half-way */
    assert_true(gs_lim_alone_reading(130000, 0, 140000));
    assert_false(gs_lim_alone_reading(130000, 60000, 140000)); /* someone else in the samples */
    assert_false(gs_lim_alone_reading(130000, 0, 200000));     /* the device was busier than us */
    assert_true(gs_lim_alone_reading(135000, 0, 60000));       /* less busy: periods not lined up */
    assert_false(gs_lim_alone_reading(30000, 0, 30000));       /* too little of us to tell */
    assert_false(gs_lim_alone_reading(130000, -1, 140000));
    struct gs_outer_in beside = outer_in(282506, 130000, 60000, 200000, NULL, 0);
    struct gs_outer_out o;
    a.corr_ppm = GS_LIM_PPM;
    gs_lim_outer_decide(&a, &beside, &o);
    assert_true(o.corr > GS_LIM_PPM / 2);
    /* a neighbour that has just left the ledger is still in the samples,
     * which credit us its time-slices (the simulated driver: ours 0.52 of a
     * tenant 0.25 busy): they do not lift c past 1 */
    struct gs_outer_in left = outer_in(257014, 516666, 260000, 780000, NULL, 0);
    gs_lim_outer_decide(&a, &left, &o);
    assert_int_equal(o.corr, GS_LIM_PPM);
}

/* An H200's readings (occupancy, ours, device; nobody else in the
 * samples) of a decoder capped at 30 whose first turn alone came after
 * seven tenants had run together: c 1, learnt for the overlap, held it for
 * tokens through three outer runs. The first reading with nobody else busy
 * after one beside others forgets c; under 5 % of ours it stays unlearnt;
 * the next real reading is taken whole. */
static void c_learnt_beside_others_is_forgotten_once_nobody_else_is_busy(void **state)
{
    (void)state;
    static const int64_t run[3][3] = { { 362181, 360000, 210000 }, { 299940, 40000, 50000 }, { 540604, 70000, 70000 } };
    struct gs_lim_account a;
    account(&a, GS_LIM_CAP, 30, 100);
    a.corr_ppm = GS_LIM_PPM;
    a.dev_ppm = 180000; /* the last run: others busy, none of it ours */
    a.use_ppm = 0;
    uint32_t want[3] = { 0, 0, 129484 };
    for (int i = 0; i < 3; i++) {
        struct gs_outer_in in = outer_in((uint64_t)run[i][0], run[i][1], 0, run[i][2], NULL, 0);
        struct gs_outer_out o;
        a.throttled_ns = in.now; /* held for tokens, as it was */
        gs_lim_outer_decide(&a, &in, &o);
        gs_lim_outer_apply(&a, &o, in.now);
        assert_int_equal(a.corr_ppm, want[i]);
        assert_int_equal(gs_lim_learning(&a), want[i] == 0);
    }
    /* a reading alone after one alone steps as before */
    struct gs_outer_in steady = outer_in(917401, 140000, 0, 150000, NULL, 0);
    struct gs_outer_out o;
    gs_lim_outer_decide(&a, &steady, &o);
    assert_in_range(o.corr, 140000, 160000);
    /* others still in the samples, or the device busier than us: no */
    a.dev_ppm = 990000;
    struct gs_outer_in still = outer_in(300000, 100000, 80000, 200000, NULL, 0);
    gs_lim_outer_decide(&a, &still, &o);
    assert_true(o.corr > 0);
    struct gs_outer_in hidden = outer_in(300000, 100000, 0, 400000, NULL, 0);
    gs_lim_outer_decide(&a, &hidden, &o);
    assert_true(o.corr > 0);
    /* a c above 1 was learnt alone (NVML saw more of us than our events) */
    a.corr_ppm = 1200000;
    gs_lim_outer_decide(&a, &steady, &o);
    assert_true(o.corr > 0);
    /* back from an idle, the device idle and the samples still holding a
     * neighbour's last slices (the simulated driver's readings): c 1 is
     * forgotten though the run learns nothing */
    a.corr_ppm = GS_LIM_PPM;
    struct gs_outer_in back = outer_in(115874, 187500, 392500, 0, NULL, 0);
    back.interval_ns = 10 * GS_LIM_OUTER_NS;
    assert_true(gs_lim_outer_slept(back.interval_ns));
    gs_lim_outer_decide(&a, &back, &o);
    assert_int_equal(o.corr, 0);
    assert_true(gs_lim_nobody_else(30000, 0, 30000));
    assert_true(gs_lim_nobody_else(187500, 392500, 0));       /* samples from before the device's reading */
    assert_false(gs_lim_nobody_else(200000, 100000, 240000)); /* others within the device's busy time */
    assert_false(gs_lim_alone_reading(187500, 392500, 0));
    assert_false(gs_lim_nobody_else(-1, 0, 30000));
}

/* A share pod (a pid namespace of its own: NVML lists host pids, none of
 * ours, so ours reads 0 and the others the whole device) of weight 70 had
 * learnt c 0.66 beside its 30 neighbour, then ran on while a tenant cut
 * their ledger, no member active: the simulated driver's readings. Only the
 * ledger can tell it is alone there, so c is forgotten as it is where NVML
 * names us; kept, it charged the pod 0.66 of its occupancy when the two met
 * again, and the pair split 0.22 / 0.74 for 1.5-2 s. */
static void a_pods_c_learnt_beside_others_is_forgotten_once_no_member_is_active(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_SHARE, 0, 70);
    a.corr_ppm = 662374;
    a.dev_ppm = GS_LIM_PPM; /* the last run: beside the 30 side */
    a.use_ppm = 700000;
    struct gs_outer_in in = outer_in(932963, 0, GS_LIM_PPM, GS_LIM_PPM, NULL, 0);
    in.pids_hidden = 1;
    struct gs_outer_out o;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.corr, 0);
    /* a member active lately is someone else */
    struct gs_lim_demand member = { 30, 300000, 1, 0, 0 };
    in.dem = &member;
    in.ndem = 1;
    gs_lim_outer_decide(&a, &in, &o);
    assert_true(o.corr > 0);
    /* where NVML lists our processes, its split says who was busy */
    in.dem = NULL;
    in.ndem = 0;
    in.pids_hidden = 0;
    gs_lim_outer_decide(&a, &in, &o);
    assert_true(o.corr > 0);
}

/* The same pod running free alone (no windows: no occupancy): NVML's 0
 * for it is no measure, and it publishes the device's busy time, the most
 * it can have used. It published 0 before, and a neighbour that woke read
 * a member that used nothing and took the whole device for a run or two. */
static void a_pod_running_free_publishes_the_devices_busy_time(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_SHARE, 0, 70);
    a.corr_ppm = GS_LIM_PPM;
    a.rate_ppm = GS_LIM_PPM; /* running free */
    struct gs_outer_in in = outer_in(0, 0, 950000, 950000, NULL, 0);
    in.pids_hidden = 1;
    struct gs_outer_out o;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.target, GS_LIM_PPM); /* alone, it runs on free */
    assert_int_equal(o.use_ppm, 950000);
}

/* A capped pod (NVML names host pids, none of ours) of a light load, its
 * occupancy under 0.2: NVML's 0 for it is no measure. Taken as one, c
 * stepped half-way to its floor each run and 0 was published, so a load
 * that grew ran undercharged until c was learnt again. A cap keeps a c
 * learnt alone in a pod: held alone it has occupancy, and nobody else
 * means nothing there. */
static void a_capped_pods_c_is_not_learnt_from_nvmls_zero_for_it(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_CAP, 30, 100);
    a.corr_ppm = 500000;
    a.dev_ppm = 60000;
    a.use_ppm = 60000;
    a.throttled_ns = 1250 * MS; /* held for tokens: no free run */
    struct gs_outer_in in = outer_in(120000, 0, 60000, 60000, NULL, 0);
    in.pids_hidden = 1;
    struct gs_outer_out o;
    gs_lim_outer_decide(&a, &in, &o);
    assert_true(o.corr >= 450000);
    assert_true(o.use_ppm > 0);
    /* held alone at c 1, learnt from the device: kept */
    a.corr_ppm = GS_LIM_PPM;
    struct gs_outer_in held = outer_in(900000, 0, 900000, 900000, NULL, 0);
    held.pids_hidden = 1;
    gs_lim_outer_decide(&a, &held, &o);
    assert_int_not_equal(o.corr, 0);
}

/* An H200's readings (occupancy, ours, others, device) of a launch-bound
 * load capped at 30 that learnt c 0.41 alone in its turn and idled 12.5 s
 * through others' turns: the run back from the idle read the device 0.31
 * busy, none of it ours, and the next one, alone again, read more of us
 * in the samples than the device was busy (occupancy-like, no measure of
 * us). Taken as a c learnt beside others, c was forgotten, learnt afresh
 * from 1 over six runs, and the load ran 0.15-0.17 busy through its turn's
 * first second. Reading others while we idled says nothing of our c. */
static void a_c_learnt_alone_outlives_an_idle_while_others_ran(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_CAP, 30, 100);
    a.corr_ppm = 413070;
    a.dev_ppm = 270000; /* the turn's last run: alone, ours 0.27 */
    a.use_ppm = 270000;
    struct gs_outer_in back = outer_in(13263, 1666, 61666, 310000, NULL, 0);
    back.interval_ns = 12500 * MS;
    struct gs_outer_out o;
    gs_lim_outer_decide(&a, &back, &o);
    gs_lim_outer_apply(&a, &o, back.now);
    assert_int_equal(a.corr_ppm, 413070); /* a slept run learns nothing */
    struct gs_outer_in next = outer_in(788827, 390000, 0, 330000, NULL, 0);
    gs_lim_outer_decide(&a, &next, &o);
    gs_lim_outer_apply(&a, &o, next.now);
    assert_false(gs_lim_learning(&a));
    assert_in_range(a.corr_ppm, 413070, 500000); /* the device's 0.33-0.39 of 0.79, half-way */
    /* c learnt beside a neighbour that ran with us is forgotten as before */
    a.corr_ppm = 800000;
    a.dev_ppm = 900000;
    a.use_ppm = 200000;
    gs_lim_outer_decide(&a, &next, &o);
    assert_int_equal(o.corr, 0);
}

/* An H200's second reading of a turn (occupancy, ours, device; nobody
 * else in the samples) of a launch-bound load capped at 30 (c 0.44 learnt
 * alone), after another container's turn: that one is still active lately
 * and published its use, but launched nothing all this interval. Counted
 * as a busy neighbour, it set c to 1, and the load, charged its CPU gaps,
 * ran 0.12-0.17 busy for the rest of the turn's first second. It blurs
 * nothing: the samples measure us. Nor does one whose last launch came a
 * few ms into the interval (that tenant again, still finishing its turn as
 * ours began: counted, it set c to 1 at half of the turns' first readings).
 * A member that launched in the interval's second half still counts. */
static void a_member_quiet_all_the_interval_blurs_nothing(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_CAP, 30, 100);
    a.corr_ppm = 436350;
    struct gs_lim_demand before = { 30, 310000, 0, 300000, GS_LIM_OUTER_NS + 20 * MS };
    struct gs_outer_in in = outer_in(601759, 370000, 0, 400000, &before, 1);
    struct gs_outer_out o;
    a.throttled_ns = in.now; /* held for tokens, as it was */
    gs_lim_outer_decide(&a, &in, &o);
    assert_in_range(o.corr, 436350, 620000);     /* ours / occupancy 0.61, half-way from 0.44 */
    assert_true(o.graph_coarse);                 /* the samples measure us */
    before.quiet_ns = GS_LIM_OUTER_NS - 20 * MS; /* its last launch 20 ms into the interval */
    gs_lim_outer_decide(&a, &in, &o);
    assert_in_range(o.corr, 436350, 620000);
    before.quiet_ns = GS_LIM_OUTER_NS / 2 - 10 * MS; /* it launched in the second half */
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.corr, GS_LIM_PPM);
    assert_false(o.graph_coarse);
    /* a short interval: a member inside one window (two periods at most)
     * shows no sign of it, and still counts */
    in.interval_ns = 30 * MS;
    before.quiet_ns = 90 * MS;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.corr, GS_LIM_PPM);
    before.quiet_ns = 2 * GS_LIM_DEFAULT_PERIOD_NS + MS;
    gs_lim_outer_decide(&a, &in, &o);
    assert_true(o.corr < GS_LIM_PPM);
}

/* An H200's readings of a decoder capped at 30 running free (c 0.16)
 * at its turn's start: the run back from its idle (no samples, the device
 * 0.22 busy, the tenant of the turn before active in the ledger), then the
 * turn's first run (ours 0.03, nobody else in the samples, the device
 * 0.15), that tenant's last launch a few ms into our turn. Counted as a
 * busy neighbour, it had the device's busy time beyond ours read as its
 * own, and after the idle run's 0.22 the free run ended: the decoder went
 * back to windows and learnt c again (7 times in four processes over two
 * calls). Quiet for the interval's second half it is none (once in four).
 * The run back from the idle reads who used the GPU while we idled, no
 * one beside us: taken as a first reading of them, a turn's next one
 * (the device 0.46 busy, the samples 0.05 of others, none of us) ended
 * the free run at two of a decoder's turn starts (compute-2026-12-03f.md),
 * nor does a neighbour beside us before the idle count as lately. Only a
 * second reading of someone beside us ends it, and only where the device
 * read busy past the cap at s over the two. */
static void a_free_run_outlives_the_tenant_of_the_turn_before(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_CAP, 30, 100);
    a.corr_ppm = 158719;
    a.rate_ppm = GS_LIM_PPM; /* running free */
    a.tokens = 15 * (int64_t)MS;
    a.others_ppm = 460000; /* beside a neighbour before the idle */
    struct gs_lim_demand before = { 100, 200000, 0, 300000, 0 };
    struct gs_outer_in back = outer_in(0, -1, -1, 220000, &before, 1);
    back.interval_ns = 14000 * MS;
    struct gs_outer_out o;
    gs_lim_outer_decide(&a, &back, &o);
    assert_int_equal(o.target, GS_LIM_PPM); /* a run back from an idle ends none */
    gs_lim_outer_apply(&a, &o, back.now);
    assert_int_equal(a.others_ppm, 0); /* nor counts anyone as beside us lately */
    struct gs_outer_in first = outer_in(0, 30000, 0, 150000, &before, 1);
    before.quiet_ns = GS_LIM_OUTER_NS - 5 * MS;
    gs_lim_outer_decide(&a, &first, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
    assert_int_equal(o.corr, 158719);
    struct gs_outer_in tail = outer_in(0, 0, 50000, 460000, &before, 1);
    before.quiet_ns = GS_LIM_OUTER_NS / 2 - 10 * MS;
    for (int i = 0; i < 2; i++) {
        gs_lim_outer_decide(&a, i ? &tail : &first, &o);
        assert_int_equal(o.target, GS_LIM_PPM);
        assert_int_equal(o.corr, 158719);
        assert_true(o.others_ppm >= GS_LIM_BUSY_PPM);
        struct gs_lim_account then = a;
        gs_lim_outer_apply(&then, &o, back.now);
        gs_lim_outer_decide(&then, i ? &tail : &first, &o); /* a second reading of it */
        /* on a device busy under the bound it is no end: the cap cannot be
         * reached whoever is beside it */
        assert_int_equal(o.target, i ? 300000 : GS_LIM_PPM);
        assert_int_equal(o.corr, i ? 0 : 158719);
    }
}

/* A capped container beside a ledger member that published no use (a
 * capped decoder under the device bound, beside our larger published use)
 * while NVML's samples gave others a quarter of the device: the samples,
 * which credit time-sliced contexts unevenly, are no measure of c. Taken
 * from them, c fell to 0.53 and a container capped at 30 ran at 0.36 on
 * the simulated driver. */
static void samples_are_no_measure_beside_a_quiet_member_nvml_sees_busy(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_CAP, 30, 100);
    struct gs_lim_demand quiet = { 70, 0, 0, 70 * 10000U, 0 };
    struct gs_outer_in in = outer_in(370000, 103333, 283333, 440000, &quiet, 1);
    struct gs_outer_out o;
    gs_lim_outer_decide(&a, &in, &o);
    assert_false(o.graph_coarse);
    assert_true(o.corr >= GS_LIM_PPM * 9 / 10);
    assert_true(o.use_ppm >= 300000); /* its charge, not NVML's share */
    /* nor does a member that claims it launched nothing for ages (its
     * ledger slot's active_ns is its own to write) while NVML sees others
     * busy: the samples still measure nobody */
    quiet.quiet_ns = UINT64_MAX;
    gs_lim_outer_decide(&a, &in, &o);
    assert_false(o.graph_coarse);
    assert_true(o.corr >= GS_LIM_PPM * 9 / 10);
    in.others_ppm = 20000; /* NVML saw the member barely run: the samples measure us */
    in.our_ppm = 350000;
    gs_lim_outer_decide(&a, &in, &o);
    assert_true(o.graph_coarse);
}

/* Our share beside honest b (weight 70, using half, wanting more) and the
 * claims a forger wrote into the ledger: forged members of weight 65535
 * (read as the legal ceiling), using the whole GPU and wanting more. */
static uint32_t share_beside_forgers(int b_verified, int drop_unverified, unsigned forged)
{
    struct gs_lim_claim c[1 + 8];
    c[0] = (struct gs_lim_claim){ { 70, 500000, 1, 0, 0 }, b_verified ? 70U : 0U, 0 };
    for (unsigned i = 1; i <= forged; i++)
        c[i] = (struct gs_lim_claim){ { GS_LIM_MAX_WEIGHT, GS_LIM_PPM, 1, 0, 0 }, 0, 0 };
    struct gs_lim_demand d[1 + 8];
    unsigned n = gs_lim_trusted_demands(c, 1 + forged, drop_unverified, 900000, d);
    return gs_lim_share_fill(30, d, n);
}

static void forged_ledger_members_weigh_no_more_than_one_default_container(void **state)
{
    (void)state;
    /* taken at their word, the forged members leave us nothing */
    struct gs_lim_demand raw[2] = { { 70, 500000, 1, 0, 0 }, { GS_LIM_MAX_WEIGHT, GS_LIM_PPM, 1, 0, 0 } };
    assert_true(gs_lim_share_fill(30, raw, 2) < 3000);
    /* the flat layout: b's region verifies it, the forgers are nobody's */
    assert_int_equal(share_beside_forgers(1, 1, 1), 300000);
    assert_int_equal(share_beside_forgers(1, 1, 8), 300000);
    /* the agent's layout: nobody verifiable; b and the forgers count as one
     * container of the default weight, however many they are */
    uint32_t one_default = 30 * GS_LIM_PPM / (30 + GS_LIM_DEFAULT_WEIGHT);
    assert_int_equal(share_beside_forgers(0, 0, 1), one_default);
    assert_int_equal(share_beside_forgers(0, 0, 8), one_default);
    /* ... and honest b alone as itself */
    assert_int_equal(share_beside_forgers(0, 0, 0), 300000);
    /* a verified container counts with the weight from its limits, not its claim */
    struct gs_lim_claim lie = { { GS_LIM_MAX_WEIGHT, 200000, 1, 0, 0 }, 70, 0 };
    struct gs_lim_demand d[1];
    assert_int_equal(gs_lim_trusted_demands(&lie, 1, 1, -1, d), 1);
    assert_int_equal(d[0].weight, 70);
    /* the unverified uses together are at most what NVML saw the device busy */
    struct gs_lim_claim two[2] = { { { 40, 600000, 0, 0, 0 }, 0, 0 }, { { 50, 700000, 0, 0, 0 }, 0, 0 } };
    assert_int_equal(gs_lim_trusted_demands(two, 2, 0, 800000, d), 1);
    assert_int_equal(d[0].use_ppm, 800000);
    assert_int_equal(d[0].weight, 50);
    assert_false(d[0].wants_more);
    assert_int_equal(gs_lim_trusted_demands(two, 2, 0, -1, d), 1);
    assert_int_equal(d[0].use_ppm, GS_LIM_PPM);
    assert_int_equal(gs_lim_trusted_demands(two, 2, 1, -1, d), 0);
    /* a whole ledger's members, all verified: the out table holds
     * GS_LIM_MAX_DEMANDS, the ones past it counting as one more */
    struct gs_lim_claim many[128];
    for (unsigned i = 0; i < 128; i++)
        many[i] = (struct gs_lim_claim){ { 100, 1000, 0, 0, 0 }, 100, 0 };
    struct gs_lim_demand out[GS_LIM_MAX_DEMANDS];
    assert_int_equal(gs_lim_trusted_demands(many, 128, 0, -1, out), GS_LIM_MAX_DEMANDS);
    assert_int_equal(out[GS_LIM_MAX_DEMANDS - 1].use_ppm, (128 - GS_LIM_MAX_DEMANDS + 1) * 1000);
    assert_int_equal(gs_lim_trusted_demands(many, 128, 1, -1, out), GS_LIM_MAX_DEMANDS - 1);
}

static int pid_is_ours(uint32_t pid, void *ctx)
{
    (void)ctx;
    return pid == 7 || pid == 8;
}

/* pid_is_ours, and at its first call another process's run of the
 * container ending: it took the samples up to 100, or (ctx's mark at 7)
 * set the mark back to 0 as it ended a free run (ctx: the mark). */
static int ours_while_another_run_ends(uint32_t pid, void *ctx)
{
    uint64_t *mark = ctx;
    if (*mark == 60 || *mark == 7)
        *mark = *mark == 60 ? 100 : 0;
    return pid_is_ours(pid, NULL);
}

static void overlapping_runs_each_count_a_sample_once(void **state)
{
    (void)state;
    const struct gs_lim_sample s[] = { { 7, 20, 100 }, { 9, 80, 100 }, { 7, 60, 200 }, { 9, 40, 200 } };
    int64_t ours, others;
    uint64_t mark = 60, newest = 0;
    /* alone: both periods, the mark moved to the newest */
    assert_true(gs_lim_take_samples(&mark, 60, s, 4, 60, pid_is_ours, NULL, &ours, &others, &newest));
    assert_int_equal(newest, 200);
    assert_int_equal(mark, 200);
    assert_int_equal(ours, 400000);
    /* the other run took period 1 meanwhile: this one measures and decides
     * nothing (the rest began after its interval), and moves the mark on */
    mark = 60;
    assert_false(gs_lim_take_samples(&mark, 60, s, 4, 60, ours_while_another_run_ends, &mark, &ours, &others, &newest));
    assert_int_equal(mark, 200);
    assert_int_equal(ours, -1);
    assert_int_equal(others, -1);
    /* it took them all: the same, and the mark stays */
    mark = 200;
    assert_false(gs_lim_take_samples(&mark, 60, s, 4, 60, pid_is_ours, NULL, &ours, &others, &newest));
    assert_int_equal(mark, 200);
    assert_int_equal(ours, -1);
    /* it set the mark back to 0 (ended a free run): it stays 0 */
    mark = 7;
    assert_false(gs_lim_take_samples(&mark, 7, s, 4, 7, ours_while_another_run_ends, &mark, &ours, &others, &newest));
    assert_int_equal(mark, 0);
    /* no sample newer than the mark: nothing to take, nobody to lose to */
    mark = 200;
    assert_true(gs_lim_take_samples(&mark, 200, s, 4, 200, pid_is_ours, NULL, &ours, &others, &newest));
    assert_int_equal(ours, -1);
    assert_int_equal(mark, 200);
}

static void nvml_samples_are_averaged_over_timestamps(void **state)
{
    (void)state;
    const struct gs_lim_sample s[] = {
        { 7, 20, 100 }, { 8, 10, 100 }, { 9, 70, 100 }, /* period 1: ours 30, others 70 */
        { 7, 50, 200 }, { 9, 50, 200 },                 /* period 2: ours 50, others 50 */
        { 9, 99, 50 },                                  /* already seen */
    };
    int64_t ours, others;
    uint64_t newest = gs_lim_aggregate(s, 6, 60, pid_is_ours, NULL, &ours, &others);
    assert_int_equal(newest, 200);
    assert_int_equal(ours, 400000);
    assert_int_equal(others, 600000);
    newest = gs_lim_aggregate(s, 6, 200, pid_is_ours, NULL, &ours, &others);
    assert_int_equal(newest, 200);
    assert_int_equal(ours, -1);
    /* a first measure of c leaves out the sample that began before the last
     * look (period 1, looked at 60): period 2 alone */
    uint64_t from = gs_lim_oldest_after(s, 6, 60);
    assert_int_equal(from, 100);
    newest = gs_lim_aggregate(s, 6, from, pid_is_ours, NULL, &ours, &others);
    assert_int_equal(newest, 200);
    assert_int_equal(ours, 500000);
    assert_int_equal(gs_lim_oldest_after(s, 6, 200), 200); /* none newer */
    assert_int_equal(gs_lim_oldest_after(s, 0, 60), 60);
    /* after runs that read no samples, only the newest span of the history */
    assert_int_equal(gs_lim_recent_from(s, 6, 0, 150), 50);
    assert_int_equal(gs_lim_recent_from(s, 6, 100, 150), 100);
    assert_int_equal(gs_lim_recent_from(s, 0, 100, 150), 100);
    /* of more samples than are kept, the newest, in whatever order NVML
     * lists them (here by process) */
    struct gs_lim_sample by_pid[] = { { 1, 10, 300 }, { 1, 10, 600 }, { 1, 10, 200 },
                                      { 2, 10, 100 }, { 2, 10, 500 }, { 2, 10, 400 } };
    assert_int_equal(gs_lim_keep_newest(by_pid, 6, 6), 6);
    assert_int_equal(by_pid[0].ts_us, 300); /* all kept: left as listed */
    assert_int_equal(gs_lim_keep_newest(by_pid, 6, 3), 3);
    assert_int_equal(by_pid[0].ts_us, 600);
    assert_int_equal(by_pid[1].ts_us, 500);
    assert_int_equal(by_pid[2].ts_us, 400);
}

/* A capped container on a device busy under 0.8 of its cap runs free (no
 * windows, probes nor markers): after two readings in a row under the
 * bound, with c learnt and no recent wait for tokens, busy neighbours or
 * not. It keeps c meanwhile, its tokens run on the outer loop's readings,
 * and it goes back to windows once they fall past what one reading can
 * wrongly take, or at a second reading lately of someone else busy on a
 * device busy past its cap (at s) over its last two readings, owing what
 * they say, with c to learn afresh. */
static void a_cap_far_above_the_devices_busy_time_runs_free_until_it_is_not(void **state)
{
    (void)state;
    struct gs_lim_account a;
    account(&a, GS_LIM_CAP, 30, 100);
    struct gs_outer_out o;
    /* at s 1.3 a device busy 0.55 of the time is under the bound of a cap
     * of 70 (0.56) but past the cap in what its time is charged: no free
     * run to end at the next reading; at 0.52 (0.676 charged) one starts */
    struct gs_lim_account fast;
    learnt_cap(&fast, 70, 400000, 1300000, 520000);
    struct gs_outer_in past_at_s = outer_in(400000, 150000, 0, 550000, NULL, 0);
    gs_lim_outer_decide(&fast, &past_at_s, &o);
    assert_int_equal(o.target, 700000);
    struct gs_outer_in under_at_s = outer_in(400000, 150000, 0, 520000, NULL, 0);
    gs_lim_outer_decide(&fast, &under_at_s, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
    struct gs_outer_in light = outer_in(400000, 150000, 0, 160000, NULL, 0);
    gs_lim_outer_decide(&a, &light, &o);
    assert_int_equal(o.target, 300000); /* c not learnt yet */
    a.corr_ppm = 400000;
    a.dev_ppm = 260000; /* the last reading over 0.8 x 30 % */
    gs_lim_outer_decide(&a, &light, &o);
    assert_int_equal(o.target, 300000);
    a.dev_ppm = 170000;
    a.throttled_ns = light.now - 100 * MS; /* the cap held it back lately */
    gs_lim_outer_decide(&a, &light, &o);
    assert_int_equal(o.target, 300000);
    a.throttled_ns = 0;
    /* busy neighbours, in the ledger or outside it, on a device busy under
     * the bound: its GPU time is at most the device's, under the cap */
    struct gs_lim_demand busy = { 100, 100000, 0, 0, 0 };
    struct gs_outer_in beside = outer_in(400000, 150000, 0, 160000, &busy, 1);
    gs_lim_outer_decide(&a, &beside, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
    struct gs_outer_in outside = outer_in(400000, 150000, 60000, 160000, NULL, 0);
    gs_lim_outer_decide(&a, &outside, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
    struct gs_outer_in blind = outer_in(400000, 150000, 0, -1, NULL, 0);
    gs_lim_outer_decide(&a, &blind, &o);
    assert_int_equal(o.target, 300000); /* no device reading: fail closed */
    /* nor at the next real reading: one under the bound alone starts none */
    struct gs_lim_account after_blind = a;
    gs_lim_outer_apply(&after_blind, &o, blind.now);
    assert_int_not_equal(after_blind.corr_ppm, 0);
    after_blind.throttled_ns = 0;
    gs_lim_outer_decide(&after_blind, &light, &o);
    assert_int_equal(o.target, 300000);
    gs_lim_outer_apply(&after_blind, &o, light.now);
    gs_lim_outer_decide(&after_blind, &light, &o);
    assert_int_equal(o.target, GS_LIM_PPM); /* two readings in a row */
    gs_lim_outer_decide(&a, &light, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
    gs_lim_outer_apply(&a, &o, light.now);
    assert_true(gs_lim_unthrottled(&a));
    assert_true(gs_lim_free_far_under(&a)); /* its next run reads no per-process samples */
    uint32_t c = a.corr_ppm;                /* learnt from the last windows */
    /* free: nothing measured, c kept, the device's busy time published */
    struct gs_outer_in idle = outer_in(0, 150000, 0, 150000, NULL, 0);
    gs_lim_outer_decide(&a, &idle, &o);
    assert_int_equal(o.corr, c);
    assert_int_equal(o.target, GS_LIM_PPM);
    assert_int_equal(o.use_ppm, 150000);
    gs_lim_outer_apply(&a, &o, idle.now);
    /* it stays while its own use is under the cap: an H200's turn start,
     * the device still busy with the previous tenant's last slices */
    struct gs_outer_in tail = outer_in(0, 260000, 30000, 480000, NULL, 0);
    gs_lim_outer_decide(&a, &tail, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
    /* nor do others in the samples of a run back from an idle, who used
     * the GPU while it idled */
    struct gs_outer_in back = outer_in(0, 1666, 78333, 450000, &busy, 1);
    back.interval_ns = 12000 * MS;
    gs_lim_outer_decide(&a, &back, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
    /* nor a ledger member where NVML sees nobody else busy (the tenant of
     * the last turn, still active lately; or a forged claim) */
    struct gs_outer_in quiet = outer_in(0, 210000, 0, 210000, &busy, 1);
    gs_lim_outer_decide(&a, &quiet, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
    /* nobody refilled its tokens but these readings: the cap's allowance
     * over each run less its use, at most one period's (15 ms at 30 %) */
    assert_int_equal(a.tokens, 15 * (int64_t)MS);
    /* a load busy past its cap every other run, whose samples NVML credits
     * to someone else (host pids in a pod: its tokens see no use of it),
     * leaves at the first quiet run after a busy one, where the mean of the
     * two readings is past its cap: on either reading alone it stayed free,
     * 0.55 busy under a cap of 30 */
    struct gs_outer_in burst = outer_in(0, 0, 900000, 900000, NULL, 0);
    struct gs_outer_in lull = outer_in(0, 0, 200000, 200000, NULL, 0);
    struct gs_lim_account alt = a;
    gs_lim_outer_decide(&alt, &burst, &o);
    assert_int_equal(o.target, GS_LIM_PPM); /* a first reading of someone */
    gs_lim_outer_apply(&alt, &o, burst.now);
    gs_lim_outer_decide(&alt, &lull, &o);
    assert_int_equal(o.target, 300000);
    /* beside someone busy on a device busy under the bound it stays, and
     * publishes the device's busy time less what busy members published
     * (the device's time holds theirs too) */
    struct gs_outer_in under[] = {
        outer_in(0, 150000, 0, 220000, &busy, 1),    /* a busy ledger member */
        outer_in(0, 150000, 60000, 220000, NULL, 0), /* someone busy outside the ledger */
        outer_in(0, 150000, 0, 290000, &busy, 1),    /* past the bound, under the cap */
    };
    for (unsigned i = 0; i < sizeof under / sizeof under[0]; i++) {
        struct gs_lim_account then = a;
        for (int run = 0; run < 3; run++) {
            gs_lim_outer_decide(&then, &under[i], &o);
            assert_int_equal(o.target, GS_LIM_PPM);
            assert_true(o.others_ppm >= GS_LIM_BUSY_PPM);
            /* the device's time less the member's, or the samples where they measure it */
            assert_int_equal(o.use_ppm, i == 1 ? 150000 : under[i].dev_ppm - 100000);
            gs_lim_outer_apply(&then, &o, light.now);
        }
    }
    /* a member gone quiet keeps the use it last published, which the
     * device's busy time no longer holds: not taken from ours */
    struct gs_lim_demand gone[] = { { 100, 100000, 0, 0, 0 }, { 100, 500000, 0, 0, 2 * GS_LIM_OUTER_NS } };
    struct gs_outer_in beside_gone = outer_in(0, 150000, 0, 220000, gone, 2);
    struct gs_lim_account after_gone = a;
    gs_lim_outer_decide(&after_gone, &beside_gone, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
    assert_int_equal(o.use_ppm, 120000);
    /* someone else busy on a device busy past the cap ends it at the
     * second reading of them lately: a turn's first reading may still hold
     * the last tenant's work */
    struct gs_outer_in beside_us[] = {
        outer_in(0, 150000, 0, 400000, &busy, 1),    /* a busy ledger member */
        outer_in(0, 150000, 60000, 320000, NULL, 0), /* someone busy outside the ledger */
    };
    for (unsigned i = 0; i < sizeof beside_us / sizeof beside_us[0]; i++) {
        gs_lim_outer_decide(&a, &beside_us[i], &o);
        assert_int_equal(o.target, GS_LIM_PPM);
        assert_true(o.others_ppm >= GS_LIM_BUSY_PPM);
        struct gs_lim_account then = a;
        gs_lim_outer_apply(&then, &o, light.now);
        assert_false(gs_lim_free_far_under(&then)); /* the next one does */
        gs_lim_outer_decide(&then, &beside_us[i], &o);
        assert_int_equal(o.target, 300000);
        assert_int_equal(o.corr, 0);
    }
    /* not others' samples beyond the device's busy time: from before it */
    struct gs_outer_in before = outer_in(0, 0, 400000, 120000, NULL, 0);
    for (int i = 0; i < 2; i++) {
        gs_lim_outer_decide(&a, &before, &o);
        assert_int_equal(o.target, GS_LIM_PPM);
        gs_lim_outer_apply(&a, &o, before.now);
    }
    assert_int_equal(a.tokens, 15 * (int64_t)MS);
    struct gs_outer_in blind_now = outer_in(0, 150000, 0, -1, NULL, 0);
    gs_lim_outer_decide(&a, &blind_now, &o);
    assert_int_equal(o.target, 300000); /* no device reading */
    /* one reading that credits it someone else's slices (an H200's turn
     * start: 0.8 of the device, 0.5 past the cap) ends no free run; it owes
     * what the reading says and pays it back from the readings after */
    struct gs_outer_in stale = outer_in(0, 800000, 0, 860000, NULL, 0);
    gs_lim_outer_decide(&a, &stale, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
    /* its use: the device's busy time less the others', if the samples
     * give it less (their spans and the device's do not line up) */
    assert_int_equal(o.free_tokens_ns, (int64_t)(75 * MS) - (int64_t)(215 * MS));
    a.refill_ns = 0; /* the last window's refill, long ago */
    gs_lim_outer_apply(&a, &o, stale.now);
    assert_int_equal(a.tokens, -125 * (int64_t)MS);
    /* kept current while free: a launch that refills the account as it goes
     * back to windows must not refill the debt away */
    assert_int_equal(a.refill_ns, stale.now);
    assert_false(gs_lim_free_far_under(&a));
    for (int i = 0; i < 4; i++) {
        gs_lim_outer_decide(&a, &light, &o);
        assert_int_equal(o.target, GS_LIM_PPM);
        gs_lim_outer_apply(&a, &o, light.now);
    }
    assert_int_equal(a.tokens, 15 * (int64_t)MS);
    /* samples that lag the device's reading (an H200 after runs that read
     * none: 0.18 of a device 0.98 busy) take no less than it shows */
    struct gs_outer_in behind = outer_in(0, 180000, 0, 980000, NULL, 0);
    gs_lim_outer_decide(&a, &behind, &o);
    assert_int_equal(o.free_tokens_ns, (int64_t)(75 * MS) - (int64_t)(245 * MS));
    /* the load grows: the whole device, 0.7 past the cap a run. The second
     * such reading takes the tokens past what one reading can wrongly take
     * (175 ms): back to windows, owing both runs */
    struct gs_outer_in heavy = outer_in(0, 1000000, 0, 1000000, NULL, 0);
    gs_lim_outer_decide(&a, &heavy, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
    gs_lim_outer_apply(&a, &o, heavy.now);
    gs_lim_outer_decide(&a, &heavy, &o);
    assert_int_equal(o.target, 300000);
    assert_int_equal(gs_lim_outer_apply(&a, &o, heavy.now), GS_LIM_PPM);
    assert_false(gs_lim_unthrottled(&a));
    assert_int_equal(a.tokens, 15 * (int64_t)MS - 2 * 175 * (int64_t)MS);
    assert_int_equal(a.refill_ns, heavy.now);
    assert_true(gs_lim_learning(&a));    /* the load changed: c learnt afresh, */
    assert_int_equal(a.nvml_seen_us, 0); /* after a look at where NVML's samples end */
    /* a load past its cap every other run is held too: no device reading
     * of its own use but the device's busy time */
    a.rate_ppm = GS_LIM_PPM;
    a.tokens = 15 * (int64_t)MS;
    struct gs_outer_in full = outer_in(0, -1, -1, 1000000, NULL, 0), none = outer_in(0, -1, -1, 0, NULL, 0);
    const struct gs_outer_in *turns[] = { &full, &none, &full };
    for (unsigned i = 0; i < 3; i++) {
        gs_lim_outer_decide(&a, turns[i], &o);
        assert_int_equal(o.target, i < 2 ? GS_LIM_PPM : 300000);
        gs_lim_outer_apply(&a, &o, full.now);
    }
    assert_int_equal(a.tokens, 15 * (int64_t)MS - 175 * (int64_t)MS + 75 * (int64_t)MS - 175 * (int64_t)MS);
    /* whatever its own processes wrote in the account, no wrap */
    a.rate_ppm = GS_LIM_PPM;
    a.tokens = INT64_MIN + 1;
    gs_lim_outer_decide(&a, &full, &o);
    assert_int_equal(o.target, 300000);
    gs_lim_outer_apply(&a, &o, full.now);
    assert_true(a.tokens == INT64_MIN);
    a.rate_ppm = GS_LIM_PPM;
    a.tokens = INT64_MAX;
    gs_lim_outer_decide(&a, &light, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
    gs_lim_outer_apply(&a, &o, light.now);
    assert_int_equal(a.tokens, 15 * (int64_t)MS);
    /* a cap of 100 is no limit, free or not; shares keep their own rule */
    account(&a, GS_LIM_CAP, 100, 100);
    a.corr_ppm = 400000;
    gs_lim_outer_decide(&a, &light, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
    assert_int_equal(o.free_tokens_ns, 0);
}

/* From an H200's log: a GPU-bound matmul capped at 10, held for tokens at
 * every window, read 0.06-0.07 busy (its clock boosted, s 1.37), under the
 * device bound of 0.08. The outer thread read the clock, then NVML for a
 * few ms, while the launching thread woke from a token wait and stamped it
 * past that clock; taken as a wait ages ago, the cap ran free, 0.96 busy
 * for a run, and owed 0.5 s. A stamp after the run's clock is a wait now. */
static void a_wait_stamped_after_the_outer_runs_clock_holds_the_cap(void **state)
{
    (void)state;
    struct gs_lim_account a;
    learnt_cap(&a, 10, 891833, 1368170, 60000);
    struct gs_outer_in in = outer_in(79544, 70000, 0, 70000, NULL, 0);
    struct gs_outer_out o;
    a.throttled_ns = in.now + 2 * MS;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.target, 100000);
    /* nor does a stamp the tenant wrote into its region far ahead free it
     * (fail closed: it stays held) */
    a.throttled_ns = UINT64_MAX;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.target, 100000);
    a.throttled_ns = in.now - 100 * MS;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.target, 100000);
    /* the same readings with no wait lately: far under the cap, it runs free */
    a.throttled_ns = in.now - GS_LIM_THROTTLED_NS;
    gs_lim_outer_decide(&a, &in, &o);
    assert_int_equal(o.target, GS_LIM_PPM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(correction_is_nvml_kernel_time_over_event_busy_time),
        cmocka_unit_test(a_first_run_before_nvml_samples_with_little_occupancy_learns_no_c),
        cmocka_unit_test(water_filling_gives_the_unused_share_away),
        cmocka_unit_test(share_target_is_weight_over_busy_weights),
        cmocka_unit_test(the_entry_for_users_outside_the_ledger_counts_beside_a_full_ledger),
        cmocka_unit_test(forged_ledger_members_weigh_no_more_than_one_default_container),
        cmocka_unit_test(capped_neighbours_keep_their_caps_and_a_share_one_takes_the_rest),
        cmocka_unit_test(nvml_samples_are_averaged_over_timestamps),
        cmocka_unit_test(overlapping_runs_each_count_a_sample_once),
        cmocka_unit_test(graphs_are_measured_coarsely_only_where_per_process_samples_correct_it),
        cmocka_unit_test(samples_are_no_measure_beside_a_quiet_member_nvml_sees_busy),
        cmocka_unit_test(a_reading_alone_that_halves_c_is_taken_whole),
        cmocka_unit_test(c_learnt_beside_others_is_forgotten_once_nobody_else_is_busy),
        cmocka_unit_test(a_pods_c_learnt_beside_others_is_forgotten_once_no_member_is_active),
        cmocka_unit_test(a_pod_running_free_publishes_the_devices_busy_time),
        cmocka_unit_test(a_capped_pods_c_is_not_learnt_from_nvmls_zero_for_it),
        cmocka_unit_test(a_c_learnt_alone_outlives_an_idle_while_others_ran),
        cmocka_unit_test(a_free_run_outlives_the_tenant_of_the_turn_before),
        cmocka_unit_test(a_member_quiet_all_the_interval_blurs_nothing),
        cmocka_unit_test(a_held_share_container_with_work_queued_all_the_time_wants_more),
        cmocka_unit_test(a_held_share_container_that_waited_for_turns_the_rest_of_the_run_wants_more),
        cmocka_unit_test(a_share_container_finding_a_busy_neighbour_publishes_the_devices_time_less_theirs),
        cmocka_unit_test(queued_is_occupancy_and_waits_at_most_the_whole),
        cmocka_unit_test(a_cap_far_above_the_devices_busy_time_runs_free_until_it_is_not),
        cmocka_unit_test(a_wait_stamped_after_the_outer_runs_clock_holds_the_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
