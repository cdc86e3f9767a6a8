/*
 * The kernel timeline in simulated time (no clock read): processor sharing,
 * and round-robin time slices (GPUSLICE_SIM_TIMESLICE_US), in which a short
 * kernel submitted while another process's slice runs waits for that slice,
 * and so does an event recorded on an idle stream meanwhile.
 */
#include <stdlib.h>

#include "sim_timeline.h"
#include "simtest.h"

#define T0 1000000000ULL
#define US 1000ULL
#define MS 1000000ULL

/* One device, processes A (slot 0) and B (slot 1), the timeline started at T0. */
static struct sim_state *procs_ab(uint32_t timeslice_us)
{
    struct sim_state *st = calloc(1, sizeof *st);
    assert_non_null(st);
    st->ndevices = 1;
    st->timeslice_us = timeslice_us;
    st->dev[0].tl_last_proc = -1;
    st->dev[0].tl_owner = -1;
    st->procs[0].pid = 100;
    st->procs[1].pid = 200;
    sim_tl_advance(st, 0, T0);
    return st;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(processor_sharing_runs_both_at_half_speed),
        cmocka_unit_test(a_short_kernel_waits_for_the_running_slice),
        cmocka_unit_test(a_process_alone_keeps_its_slices_running),
        cmocka_unit_test(an_idle_process_event_is_stamped_when_its_slice_begins),
        cmocka_unit_test(without_slices_an_idle_process_event_is_stamped_at_once),
        cmocka_unit_test(under_mps_the_server_gets_the_samples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
