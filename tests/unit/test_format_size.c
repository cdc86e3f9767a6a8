/* Unit tests for gs_format_size: unit choice, rounding, and buffer limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "size_parse.h"

#define KIB UINT64_C(1024)
#define MIB (KIB * 1024)
#define GIB (MIB * 1024)
#define TIB (GIB * 1024)

static void expect_fmt(uint64_t bytes, const char *want)
{
    char buf[GS_FORMAT_SIZE_MAX];

    assert_int_equal(gs_format_size(bytes, buf, sizeof(buf)), (int)strlen(want));
    assert_string_equal(buf, want);
}

static void test_examples(void **state)
{
    (void)state;
    expect_fmt(17, "17 B");
    expect_fmt(512 * MIB, "512 MiB");
    expect_fmt(4 * GIB, "4.00 GiB");
}

static void test_units_and_digits(void **state)
{
    (void)state;
    expect_fmt(0, "0 B");
    expect_fmt(1023, "1023 B");
    expect_fmt(KIB, "1.00 KiB");
    expect_fmt(1536, "1.50 KiB");
    expect_fmt(10 * GIB, "10.0 GiB");
    expect_fmt(100 * GIB, "100 GiB");
    expect_fmt(TIB, "1.00 TiB");
    expect_fmt(1024 * TIB, "1024 TiB");
    expect_fmt(UINT64_MAX, "16777216 TiB");
}

static void test_rounding(void **state)
{
    (void)state;
    expect_fmt(GIB + GIB / 200 + 1, "1.01 GiB");  /* just over 1.005 */
    expect_fmt(GIB + GIB / 200, "1.00 GiB");      /* just under 1.005 */
    expect_fmt(1536 * MIB + 5 * MIB, "1.50 GiB"); /* 1.5049 */
    expect_fmt(1034, "1.01 KiB");                 /* 1.0098 */
    expect_fmt(10239, "10.0 KiB");                /* 9.999 KiB keeps 3 digits */
    expect_fmt(102399, "100 KiB");                /* 99.999 KiB */
    expect_fmt(99 * KIB + 1000, "100 KiB");       /* 99.977 KiB: 1 decimal rounds to 100.0 */
    expect_fmt(9 * KIB + 1000, "9.98 KiB");
    expect_fmt(1023 * MIB + 512 * KIB, "1.00 GiB"); /* 1023.5 MiB moves up a unit */
    expect_fmt(1023 * MIB + 511 * KIB, "1023 MiB");
    expect_fmt(1024 * TIB - 1, "1024 TiB"); /* no unit above TiB */
}

static void test_buffer_limits(void **state)
{
    char buf[16];

    (void)state;
    assert_int_equal(gs_format_size(4 * GIB, NULL, 8), -1);
    assert_int_equal(gs_format_size(4 * GIB, buf, 0), -1);
    memset(buf, 'x', sizeof(buf));
    assert_int_equal(gs_format_size(4 * GIB, buf, 8), -1); /* "4.00 GiB" needs 9 with NUL */
    assert_int_equal(strlen(buf), 7);
    assert_int_equal(gs_format_size(4 * GIB, buf, 9), 8); /* exactly fits */
    assert_string_equal(buf, "4.00 GiB");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_units_and_digits),
        cmocka_unit_test(test_rounding),
        cmocka_unit_test(test_buffer_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
