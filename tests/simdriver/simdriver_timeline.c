/*
 * The kernel timeline in simulated time (no clock read): processor sharing,
 * and round-robin time slices (GPUSLICE_SIM_TIMESLICE_US), in which a short
 * kernel submitted while another process's slice runs waits for that slice,
 * and so does an event recorded on an idle stream meanwhile; collectives,
 * which spin on their device until every rank has reached them.
 */
#include <stdlib.h>

#include "sim_timeline.h"
#include "simtest.h"

#define T0 1000000000ULL
#define US 1000ULL
#define MS 1000000ULL

/* ndev devices, processes A, B, C (slots 0, 1, 2), every timeline started at T0. */
static struct sim_state *procs_on(uint32_t ndev, uint32_t timeslice_us)
{
    struct sim_state *st = calloc(1, sizeof *st);
    assert_non_null(st);
    st->ndevices = ndev;
    st->timeslice_us = timeslice_us;
    for (uint32_t d = 0; d < ndev; d++) {
        st->dev[d].tl_last_proc = -1;
        st->dev[d].tl_owner = -1;
        sim_tl_advance(st, (int)d, T0);
    }
    st->procs[0].pid = 100;
    st->procs[1].pid = 200;
    st->procs[2].pid = 300;
    return st;
}

/* One device, processes A (slot 0) and B (slot 1), the timeline started at T0. */
static struct sim_state *procs_ab(uint32_t timeslice_us)
{
    return procs_on(1, timeslice_us);
}

/* A queues 10 ms of work at T0, B a 10 us kernel b_at later; the timeline is
 * computed to T0 + 20 ms. */
static struct sim_state *two_procs(uint32_t timeslice_us, uint64_t b_at)
{
    struct sim_state *st = procs_ab(timeslice_us);
    sim_tl_submit(st, 0, 0, 10 * MS, T0);
    sim_tl_submit(st, 1, 0, 10 * US, T0 + b_at);
    sim_tl_advance(st, 0, T0 + 20 * MS);
    return st;
}

static void processor_sharing_runs_both_at_half_speed(void **state)
{
    (void)state;
    struct sim_state *st = two_procs(0, 100 * US);
    /* B progresses at 1/2 from its submission: done 20 us later */
    assert_int_equal(sim_tl_done_time(&st->procs[1].work[0], 10 * US), T0 + 120 * US);
    /* A lost half of those 20 us */
    assert_int_equal(sim_tl_done_time(&st->procs[0].work[0], 10 * MS), T0 + 10 * MS + 10 * US);
    free(st);
}

static void a_short_kernel_waits_for_the_running_slice(void **state)
{
    (void)state;
    struct sim_state *st = two_procs(2000, 100 * US);
    /* A's slice began at T0 and runs 2 ms; B runs 10 us after it */
    assert_int_equal(sim_tl_done_time(&st->procs[1].work[0], 10 * US), T0 + 2 * MS + 10 * US);
    assert_int_equal(sim_tl_done_time(&st->procs[0].work[0], 10 * MS), T0 + 10 * MS + 10 * US);
    /* nothing ran twice: the device was busy exactly the work's length */
    assert_int_equal(st->dev[0].tl_busy_ns, 10 * MS + 10 * US);
    assert_int_equal(st->procs[0].work[0].busy + st->procs[1].work[0].busy, 10 * MS + 10 * US);
    free(st);
}

static void a_process_alone_keeps_its_slices_running(void **state)
{
    (void)state;
    /* A alone for 5.5 ms: its third slice began at 4 ms, so a newcomer at
     * 5.5 ms waits until 6 ms */
    struct sim_state *st = two_procs(2000, 5500 * US);
    assert_int_equal(sim_tl_done_time(&st->procs[1].work[0], 10 * US), T0 + 6 * MS + 10 * US);
    free(st);
}

/* A queues 10 ms of work at T0 and B a 10 us kernel 100 us later; B, idle
 * again, records an event at 5 ms. */
static struct sim_state *event_beside_busy(uint32_t timeslice_us, uint64_t *target)
{
    struct sim_state *st = procs_ab(timeslice_us);
    sim_tl_submit(st, 0, 0, 10 * MS, T0);
    sim_tl_submit(st, 1, 0, 10 * US, T0 + 100 * US);
    *target = sim_tl_event_mark(st, 1, 0, T0 + 5 * MS);
    sim_tl_advance(st, 0, T0 + 20 * MS);
    return st;
}

static void an_idle_process_event_is_stamped_when_its_slice_begins(void **state)
{
    (void)state;
    uint64_t target;
    struct sim_state *st = event_beside_busy(2000, &target);
    const struct sim_work *b = &st->procs[1].work[0];
    /* B's kernel ran 2.00-2.01 ms; A's slices since: 2.01-4.01, 4.01-6.01 */
    assert_int_equal(target, 10 * US + SIM_EVENT_WORK_NS);
    assert_true(b->done >= target);
    assert_int_equal(sim_tl_done_time(b, target), T0 + 6 * MS + 10 * US + SIM_EVENT_WORK_NS);
    free(st);
}

static void without_slices_an_idle_process_event_is_stamped_at_once(void **state)
{
    (void)state;
    uint64_t target;
    struct sim_state *st = event_beside_busy(0, &target);
    const struct sim_work *b = &st->procs[1].work[0];
    assert_int_equal(target, 10 * US); /* no work of its own: complete when recorded */
    assert_true(b->done >= target);
    free(st);
}

static void under_mps_the_server_gets_the_samples(void **state)
{
    (void)state;
    struct sim_state *st = procs_ab(0);
    st->mps = 1;
    sim_tl_submit(st, 0, 0, 30 * MS, T0);
    sim_tl_submit(st, 1, 0, 20 * MS, T0);
    sim_tl_advance(st, 0, T0 + SIM_UTIL_PERIOD_NS);
    /* one sample for the period, the server's, with the device's busy time */
    assert_int_equal(st->dev[0].tl_sample_head, 1);
    assert_int_equal(st->dev[0].samples[0].pid, SIM_MPS_SERVER_PID);
    assert_int_equal(st->dev[0].samples[0].sm_util, 50);
    free(st);
}

/* ---- collectives ---- */

/* Queues a collective of group g among r ranks with n ns of own work for
 * process p on device d at t; returns the work that completes with it. */
static uint64_t coll(struct sim_state *st, int p, int d, uint64_t n, uint32_t g, uint32_t r, uint64_t t)
{
    assert_int_equal(sim_tl_collective(st, p, d, n, g, r, t), 0);
    return st->procs[p].work[d].submitted;
}

static void a_collective_waits_for_the_late_rank_on_another_device(void **state)
{
    (void)state;
    struct sim_state *st = procs_on(2, 0);
    /* A on device 0 reaches its collective at 1 ms; B on device 1 at 6 ms */
    sim_tl_submit(st, 0, 0, 1 * MS, T0);
    uint64_t a_end = coll(st, 0, 0, 100 * US, 0, 2, T0);
    sim_tl_advance(st, 0, T0 + 5 * MS);
    const struct sim_work *a = &st->procs[0].work[0], *b = &st->procs[1].work[1];
    assert_int_equal(a->done, 1 * MS); /* spinning: nothing after the collective is reached */
    assert_int_equal(sim_tl_active(st, 0), 1);
    sim_tl_submit(st, 1, 1, 1 * MS, T0 + 5 * MS);
    uint64_t b_end = coll(st, 1, 1, 100 * US, 0, 2, T0 + 5 * MS);
    sim_tl_advance(st, 1, T0 + 20 * MS); /* device 0 is advanced with device 1 */
    assert_int_equal(st->dev[0].tl_last_ns, T0 + 20 * MS);
    /* released when B arrived; then both run their own 100 us */
    assert_int_equal(sim_tl_done_time(a, a_end), T0 + 6 * MS + 100 * US);
    assert_int_equal(sim_tl_done_time(b, b_end), T0 + 6 * MS + 100 * US);
    /* the 5 ms A spun count as A's busy time and the device's */
    assert_int_equal(a->busy, 6 * MS + 100 * US);
    assert_int_equal(st->dev[0].tl_busy_ns, 6 * MS + 100 * US);
    assert_int_equal(b->busy, 1 * MS + 100 * US);
    free(st);
}

static void a_spinning_rank_takes_its_share_of_the_device(void **state)
{
    (void)state;
    struct sim_state *st = procs_ab(0);
    sim_tl_submit(st, 0, 0, 1 * MS, T0);
    uint64_t a_end = coll(st, 0, 0, 100 * US, 0, 2, T0);
    sim_tl_submit(st, 1, 0, 3 * MS, T0);
    uint64_t b_end = coll(st, 1, 0, 100 * US, 0, 2, T0);
    sim_tl_advance(st, 0, T0 + 20 * MS);
    /* half speed each: A arrives at 2 ms and spins; B, still at half speed,
     * arrives at 6 ms; then 100 us each at half speed */
    assert_int_equal(sim_tl_done_time(&st->procs[0].work[0], a_end), T0 + 6 * MS + 200 * US);
    assert_int_equal(sim_tl_done_time(&st->procs[1].work[0], b_end), T0 + 6 * MS + 200 * US);
    free(st);
}

static void a_spinning_rank_holds_its_whole_slice(void **state)
{
    (void)state;
    struct sim_state *st = procs_ab(2000);
    sim_tl_submit(st, 0, 0, 1 * MS, T0);
    uint64_t a_end = coll(st, 0, 0, 100 * US, 0, 2, T0);
    sim_tl_submit(st, 1, 0, 3 * MS, T0);
    uint64_t b_end = coll(st, 1, 0, 100 * US, 0, 2, T0);
    sim_tl_advance(st, 0, T0 + 20 * MS);
    /* B's slice 0-2 ms; A's 2-4 ms: 1 ms of work, then it spins to the
     * slice's end; B's from 4 ms: it arrives at 5 ms and runs on to 5.1 ms;
     * A's 100 us last */
    assert_int_equal(sim_tl_done_time(&st->procs[1].work[0], b_end), T0 + 5 * MS + 100 * US);
    assert_int_equal(sim_tl_done_time(&st->procs[0].work[0], a_end), T0 + 5 * MS + 200 * US);
    assert_int_equal(st->procs[0].work[0].busy, 2 * MS + 100 * US);
    assert_int_equal(st->dev[0].tl_busy_ns, 5 * MS + 200 * US);
    free(st);
}

static void the_kth_collective_matches_the_kth(void **state)
{
    (void)state;
    struct sim_state *st = procs_on(2, 0);
    uint64_t a_end[3], b_end[3];
    for (int k = 0; k < 3; k++) /* A queues three at once */
        a_end[k] = coll(st, 0, 0, 100 * US, 3, 2, T0);
    for (int k = 0; k < 3; k++) { /* B works 1 ms before each */
        sim_tl_submit(st, 1, 1, 1 * MS, T0);
        b_end[k] = coll(st, 1, 1, 100 * US, 3, 2, T0);
    }
    sim_tl_advance(st, 0, T0 + 20 * MS);
    for (uint64_t k = 0; k < 3; k++) {
        uint64_t want = T0 + (k + 1) * (1 * MS + 100 * US);
        assert_int_equal(sim_tl_done_time(&st->procs[0].work[0], a_end[k]), want);
        assert_int_equal(sim_tl_done_time(&st->procs[1].work[1], b_end[k]), want);
    }
    free(st);
}

static void a_collective_needs_all_its_ranks_of_its_group(void **state)
{
    (void)state;
    struct sim_state *st = procs_on(3, 0);
    st->procs[3].pid = 400; /* D, on device 2 beside C */
    uint64_t a_end = coll(st, 0, 0, 100 * US, 1, 3, T0);
    coll(st, 1, 1, 100 * US, 1, 3, T0);
    coll(st, 3, 2, 100 * US, 2, 3, T0); /* D: another group, no help */
    sim_tl_advance(st, 0, T0 + 5 * MS);
    assert_int_equal(st->procs[0].work[0].done, 0);
    assert_int_equal(st->procs[1].work[1].done, 0);
    uint64_t c_end = coll(st, 2, 2, 100 * US, 1, 3, T0 + 5 * MS); /* C, the third rank of group 1 */
    sim_tl_advance(st, 0, T0 + 20 * MS);
    /* C shares device 2 with D's spin: its 100 us take 200 us */
    assert_int_equal(sim_tl_done_time(&st->procs[0].work[0], a_end), T0 + 5 * MS + 100 * US);
    assert_int_equal(sim_tl_done_time(&st->procs[2].work[2], c_end), T0 + 5 * MS + 200 * US);
    assert_int_equal(st->procs[3].work[2].done, 0); /* D still spins */
    free(st);
}

static void a_spinning_rank_gets_full_nvml_samples(void **state)
{
    (void)state;
    struct sim_state *st = procs_ab(0);
    coll(st, 0, 0, 100 * US, 0, 2, T0); /* its peer never comes */
    sim_tl_advance(st, 0, T0 + SIM_UTIL_PERIOD_NS);
    assert_int_equal(st->dev[0].tl_sample_head, 1);
    assert_int_equal(st->dev[0].samples[0].pid, 100);
    assert_int_equal(st->dev[0].samples[0].sm_util, 100);
    assert_int_equal(st->dev[0].tl_last_util, 100);
    free(st);
}

static void the_collective_queue_is_bounded(void **state)
{
    (void)state;
    struct sim_state *st = procs_ab(0);
    for (int k = 0; k < SIM_COLL_QUEUE; k++)
        coll(st, 0, 0, 0, 0, 2, T0);
    uint64_t before = st->procs[0].work[0].submitted;
    assert_int_equal(sim_tl_collective(st, 0, 0, 0, 0, 2, T0), -1);
    assert_int_equal(st->procs[0].work[0].submitted, before);
    assert_int_equal(st->procs[0].coll_next[0], SIM_COLL_QUEUE);
    free(st);
}

static void a_graphs_inner_gaps_pass_without_a_kernel(void **state)
{
    (void)state;
    for (uint32_t slice = 0; slice <= 2000; slice += 2000) {
        struct sim_state *st = procs_ab(slice);
        /* three 100 us kernels, 50 us idle between them, alone on the device */
        assert_int_equal(sim_tl_submit_graph(st, 0, 0, 100 * US, 3, 50 * US, T0), 0);
        sim_tl_advance(st, 0, T0 + 1 * MS);
        const struct sim_work *a = &st->procs[0].work[0];
        assert_int_equal(a->submitted, 400 * US);
        assert_int_equal(sim_tl_done_time(a, a->submitted), T0 + 400 * US);
        assert_int_equal(sim_tl_done_time(a, 150 * US), T0 + 150 * US); /* the second kernel starts after the gap */
        /* NVML and the device count the kernels only */
        assert_int_equal(a->busy, 300 * US);
        assert_int_equal(st->dev[0].tl_busy_ns, 300 * US);
        assert_int_equal(a->gap_head, a->gap_tail); /* both passed */
        free(st);
    }
}

static void the_gap_queue_is_bounded(void **state)
{
    (void)state;
    struct sim_state *st = procs_ab(0);
    assert_int_equal(sim_tl_submit_graph(st, 0, 0, 10 * US, SIM_GAP_QUEUE + 1, 1 * US, T0), 0);
    assert_int_equal(sim_tl_submit_graph(st, 0, 0, 10 * US, 2, 1 * US, T0), -1); /* no room until one passes */
    assert_int_equal(st->procs[0].work[0].submitted, (SIM_GAP_QUEUE + 1) * 10 * US + SIM_GAP_QUEUE * US);
    assert_int_equal(sim_tl_submit_graph(st, 0, 0, 10 * US, 2, 0, T0), 0); /* no gaps: always room */
    sim_tl_advance(st, 0, T0 + 1 * MS);
    assert_int_equal(sim_tl_submit_graph(st, 0, 0, 10 * US, 2, 1 * US, T0 + 1 * MS), 0);
    free(st);
}

/* The clock model (sim_state.h), on a device whose work would draw 900 W
 * above idle fully busy against 600 W of headroom: after a sample period
 * half busy its clock is the highest, and work runs (1 / f_full)^0.75 =
 * 1.21 x as fast as fully busy, with time slices or without, and a waiter
 * for it looks again when it is done; after a full period, at the rate fully
 * busy. */
static void a_duty_cycled_device_runs_faster_than_a_full_one(void **state)
{
    (void)state;
    for (uint32_t slice = 0; slice <= 2000; slice += 2000) {
        struct sim_state *st = procs_ab(slice);
        st->power_dyn_mw = 900000;
        assert_int_equal(sim_clock_speed_ppm(st, 100), SIM_PPM);
        assert_in_range(sim_clock_speed_ppm(st, 90), 1045000, 1055000);
        uint32_t half = sim_clock_speed_ppm(st, 50);
        assert_in_range(half, 1205000, 1215000);
        sim_tl_submit(st, 0, 0, 50 * MS, T0);
        sim_tl_submit(st, 0, 0, 100 * MS, T0 + 100 * MS);
        /* a waiter's next look: when the work is done at this speed, not
         * at full speed's 100 ms (it returned 17 % late) */
        uint64_t eta = sim_tl_eta(st, 0, 100 * MS);
        assert_in_range(eta, 100 * MS * SIM_PPM / half - 1000, 100 * MS * SIM_PPM / half + 1000);
        sim_tl_advance(st, 0, T0 + 400 * MS);
        uint64_t took = sim_tl_done_time(&st->procs[0].work[0], 150 * MS) - (T0 + 100 * MS);
        assert_in_range(took, 100 * MS * SIM_PPM / half - 1000, 100 * MS * SIM_PPM / half + 1000);
        /* busy the whole of the period from 400 ms (after an idle one, at
         * 1.21 x): the next runs at the rate fully busy */
        sim_tl_submit(st, 0, 0, 150 * MS, T0 + 400 * MS);
        sim_tl_submit(st, 0, 0, 50 * MS, T0 + 500 * MS);
        sim_tl_advance(st, 0, T0 + 800 * MS);
        uint64_t second = sim_tl_done_time(&st->procs[0].work[0], 300 * MS);
        uint64_t third = sim_tl_done_time(&st->procs[0].work[0], 350 * MS);
        assert_in_range(third - second, 50 * MS - 1000, 50 * MS + 1000);
        free(st);
    }
}

/* The clock model's draw, a mean over the last second: a device fully busy
 * for the first 100 ms sample period of its life, at its power limit
 * (700 W), reads the 80 W of a device not yet used for the other nine
 * periods of that second, as a real device's mean holds its draw before a
 * first load: 142 W, not the 700 W of the one period recorded. */
static void the_draw_of_a_new_device_counts_its_idle_before(void **state)
{
    (void)state;
    struct sim_state *st = procs_ab(0);
    st->power_dyn_mw = 900000;
    sim_tl_submit(st, 0, 0, 100 * MS, T0);
    sim_tl_advance(st, 0, T0 + 150 * MS);
    assert_int_equal(st->dev[0].tl_util_head, 1);
    assert_in_range(sim_power_over_span(st, 0), 141999, 142001);
    free(st);
}

/* The instantaneous draw is the last full sample period's: 80 W (a device
 * not yet used) before any, then 700 W after a period fully busy at the
 * limit, where the one-second mean still reads 142 W; back to 100 W (idle)
 * after an idle period, where the mean still holds the busy one. */
static void the_instantaneous_draw_is_the_last_periods(void **state)
{
    (void)state;
    struct sim_state *st = procs_ab(0);
    st->power_dyn_mw = 900000;
    assert_int_equal(sim_power_now(st, 0), 80000);
    sim_tl_submit(st, 0, 0, 100 * MS, T0);
    sim_tl_advance(st, 0, T0 + 150 * MS);
    assert_in_range(sim_power_now(st, 0), 699999, 700001);
    assert_in_range(sim_power_over_span(st, 0), 141999, 142001);
    sim_tl_advance(st, 0, T0 + 250 * MS);
    assert_int_equal(sim_power_now(st, 0), 100000);
    assert_true(sim_power_over_span(st, 0) > 140000);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(processor_sharing_runs_both_at_half_speed),
        cmocka_unit_test(a_short_kernel_waits_for_the_running_slice),
        cmocka_unit_test(a_process_alone_keeps_its_slices_running),
        cmocka_unit_test(an_idle_process_event_is_stamped_when_its_slice_begins),
        cmocka_unit_test(without_slices_an_idle_process_event_is_stamped_at_once),
        cmocka_unit_test(under_mps_the_server_gets_the_samples),
        cmocka_unit_test(a_collective_waits_for_the_late_rank_on_another_device),
        cmocka_unit_test(a_spinning_rank_takes_its_share_of_the_device),
        cmocka_unit_test(a_spinning_rank_holds_its_whole_slice),
        cmocka_unit_test(the_kth_collective_matches_the_kth),
        cmocka_unit_test(a_collective_needs_all_its_ranks_of_its_group),
        cmocka_unit_test(a_spinning_rank_gets_full_nvml_samples),
        cmocka_unit_test(the_collective_queue_is_bounded),
        cmocka_unit_test(a_graphs_inner_gaps_pass_without_a_kernel),
        cmocka_unit_test(the_gap_queue_is_bounded),
        cmocka_unit_test(a_duty_cycled_device_runs_faster_than_a_full_one),
        cmocka_unit_test(the_draw_of_a_new_device_counts_its_idle_before),
        cmocka_unit_test(the_instantaneous_draw_is_the_last_periods),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
