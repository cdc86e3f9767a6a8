/* What allocations and contexts are charged (src/core/accounting.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "accounting.h"

static void linear_allocations_take_whole_pages_above_a_mib(void **state)
{
    (void)state;
    assert_int_equal(gs_charge_linear(0), 0);
    assert_int_equal(gs_charge_linear(1), 4096);
    assert_int_equal(gs_charge_linear(GS_MIB), GS_MIB);
    assert_int_equal(gs_charge_linear(GS_MIB + 1), 2 * GS_MIB);
}

static void an_exact_context_measure_is_taken_as_it_is(void **state)
{
    (void)state;
    assert_int_equal(gs_charge_context(512 * GS_MIB, 1, 300 * GS_MIB), 300 * GS_MIB);
    assert_int_equal(gs_charge_context(512 * GS_MIB, 1, 600 * GS_MIB), 600 * GS_MIB);
}

/* The device's growth across the creation, shrunk by another process's
 * free meanwhile (518 MiB of context, 400 MiB freed beside it): charged
 * 118 MiB before, and every later context on the device the same. */
static void a_context_measured_by_the_devices_growth_is_never_charged_below_its_reservation(void **state)
{
    (void)state;
    assert_int_equal(gs_charge_context(512 * GS_MIB, 0, 118 * GS_MIB), 512 * GS_MIB);
    assert_int_equal(gs_charge_context(512 * GS_MIB, 0, 518 * GS_MIB), 518 * GS_MIB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(linear_allocations_take_whole_pages_above_a_mib),
        cmocka_unit_test(an_exact_context_measure_is_taken_as_it_is),
        cmocka_unit_test(a_context_measured_by_the_devices_growth_is_never_charged_below_its_reservation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
