/* The table of which kernels are collectives (src/core/func_class.c): its
 * answers, its bound, and how it spreads the driver's aligned handles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "func_class.h"

/* A handle as the driver hands them out: aligned objects in one arena. */
static const void *handle(unsigned i)
{
    return (const void *)(uintptr_t)(0x7f3a00000000ULL + (uint64_t)i * 0x1000);
}

static void answers_are_kept_and_unknown_ones_are_unknown(void **state)
{
    (void)state;
    struct gs_fclass *t = calloc(1, sizeof *t);
    assert_non_null(t);
    gs_fclass_put(t, handle(1), 1);
    gs_fclass_put(t, handle(2), 0);
    gs_fclass_put(t, handle(1), 1); /* again: no second slot */
    assert_int_equal(gs_fclass_get(t, handle(1)), 1);
    assert_int_equal(gs_fclass_get(t, handle(2)), 0);
    assert_int_equal(gs_fclass_get(t, handle(3)), -1);
    assert_int_equal(gs_fclass_get(t, NULL), -1);
    gs_fclass_put(t, NULL, 1);
    assert_int_equal(gs_fclass_get(t, NULL), -1);
    assert_int_equal(t->n, 2);
    gs_fclass_clear(t); /* an unload: every answer is asked again */
    assert_int_equal(gs_fclass_get(t, handle(1)), -1);
    assert_int_equal(gs_fclass_get(t, handle(2)), -1);
    assert_int_equal(t->n, 0);
    free(t);
}

/* A program with more kernels than the table holds: the last ones asked
 * are answered right, the table is never overrun, and the early ones are
 * unknown again at worst (asked of the driver anew), never wrong. A table
 * scanned past its end read 1024 entries of 16 bytes and then beyond. */
static void more_kernels_than_the_table_holds_are_never_answered_wrong(void **state)
{
    (void)state;
    struct gs_fclass *t = calloc(1, sizeof *t);
    assert_non_null(t);
    const unsigned total = GS_FCLASS_SLOTS * 3;
    for (unsigned i = 0; i < total; i++) {
        gs_fclass_put(t, handle(i), (int)(i % 7 == 0));
        assert_true(t->n <= GS_FCLASS_SLOTS / 4 * 3);
    }
    unsigned known = 0;
    for (unsigned i = 0; i < total; i++) {
        int c = gs_fclass_get(t, handle(i));
        if (c >= 0) {
            assert_int_equal(c, (int)(i % 7 == 0));
            known++;
        }
    }
    for (unsigned i = total - 100; i < total; i++)
        assert_int_equal(gs_fclass_get(t, handle(i)), (int)(i % 7 == 0));
    assert_true(known >= 100);
    free(t);
}

/* 256 handles 4 KiB apart land in about as many of a 1024-way cache's ways
 * as random places would (226 expected; 202 here). The cache this replaced
 * took the handle's bits 4-9 as its way (64 ways): they all met in one. */
static void aligned_handles_spread_over_the_ways(void **state)
{
    (void)state;
    unsigned char used[1024] = { 0 };
    unsigned ways = 0;
    for (unsigned i = 0; i < 256; i++) {
        unsigned w = gs_fclass_hash(handle(i), 10);
        assert_true(w < 1024);
        ways += !used[w];
        used[w] = 1;
    }
    assert_true(ways >= 180);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(answers_are_kept_and_unknown_ones_are_unknown),
        cmocka_unit_test(more_kernels_than_the_table_holds_are_never_answered_wrong),
        cmocka_unit_test(aligned_handles_spread_over_the_ways),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
