/*
 * The kernel timeline in simulated time (no clock read): processor sharing,
 * and round-robin time slices (GPUSLICE_SIM_TIMESLICE_US), in which a short
 * kernel submitted while another process's slice runs waits for that slice.
 */
#include <stdlib.h>

#include "sim_timeline.h"
#include "simtest.h"

#define T0 1000000000ULL
#define US 1000ULL
#define MS 1000000ULL

/* One device, processes A (slot 0) and B (slot 1): A queues 10 ms of work
 * at T0, B a 10 us kernel b_at later; the timeline is computed to T0 + 20 ms. */
static struct sim_state *two_procs(uint32_t timeslice_us, uint64_t b_at)
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(processor_sharing_runs_both_at_half_speed),
        cmocka_unit_test(a_short_kernel_waits_for_the_running_slice),
        cmocka_unit_test(a_process_alone_keeps_its_slices_running),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
