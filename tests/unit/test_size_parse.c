/* Unit tests for gs_parse_size: every unit, boundaries, and every rejection reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "size_parse.h"

#define KIB UINT64_C(1024)
#define MIB (KIB * 1024)
#define GIB (MIB * 1024)
#define TIB (GIB * 1024)

static void expect_ok(const char *text, uint64_t want)
{
    char err[256] = "untouched";
    uint64_t v = 0xdeadbeef;

    if (gs_parse_size(text, &v, err, sizeof(err)) != 0)
        fail_msg("'%s' rejected: %s", text, err);
    if (v != want)
        fail_msg("'%s' parsed as %llu, want %llu", text, (unsigned long long)v, (unsigned long long)want);
}

/* Rejects text with exactly the reason want; *out must stay untouched. */
static void expect_err(const char *text, const char *want)
{
    char err[256] = "";
    uint64_t v = 12345;

    assert_int_equal(gs_parse_size(text, &v, err, sizeof(err)), -1);
    assert_int_equal(v, 12345);
    assert_string_equal(err, want);
}

static void test_plain_bytes(void **state)
{
    (void)state;
    expect_ok("0", 0);
    expect_ok("1", 1);
    expect_ok("1048576", MIB);
    expect_ok("007", 7);
    expect_ok("17B", 17);
    expect_ok("18446744073709551615", UINT64_MAX);
    expect_ok("18446744073709551615B", UINT64_MAX);
}

static void test_every_unit(void **state)
{
    static const struct {
        const char *t;
        uint64_t v;
    } cases[] = {
        { "3k", 3 * KIB },   { "3K", 3 * KIB },   { "3Ki", 3 * KIB },   { "3ki", 3 * KIB },  { "3KI", 3 * KIB },
        { "3kI", 3 * KIB },  { "3KiB", 3 * KIB }, { "3kiB", 3 * KIB },  { "3KIB", 3 * KIB }, { "3m", 3 * MIB },
        { "3M", 3 * MIB },   { "3Mi", 3 * MIB },  { "3mi", 3 * MIB },   { "3MiB", 3 * MIB }, { "3MIB", 3 * MIB },
        { "3g", 3 * GIB },   { "3G", 3 * GIB },   { "3Gi", 3 * GIB },   { "3gi", 3 * GIB },  { "3GiB", 3 * GIB },
        { "3GIB", 3 * GIB }, { "3t", 3 * TIB },   { "3T", 3 * TIB },    { "3Ti", 3 * TIB },  { "3ti", 3 * TIB },
        { "3TiB", 3 * TIB }, { "3TIB", 3 * TIB }, { "4096m", 4 * GIB }, /* what HAMi's device plugin writes */
        { "0G", 0 },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_ok(cases[i].t, cases[i].v);
}

static void test_overflow_boundaries(void **state)
{
    (void)state;
    expect_err("18446744073709551616", "too large (more than 2^64-1 bytes)");
    expect_err("99999999999999999999999999", "too large (more than 2^64-1 bytes)");
    expect_ok("18014398509481983K", UINT64_MAX - 1023);
    expect_err("18014398509481984K", "too large (more than 2^64-1 bytes)");
    expect_ok("17592186044415M", UINT64_MAX - (MIB - 1));
    expect_err("17592186044416M", "too large (more than 2^64-1 bytes)");
    expect_ok("17179869183G", UINT64_MAX - (GIB - 1));
    expect_err("17179869184G", "too large (more than 2^64-1 bytes)");
    expect_ok("16777215T", UINT64_MAX - (TIB - 1));
    expect_err("16777216T", "too large (more than 2^64-1 bytes)");
    /* The largest fraction of the last TiB still fits. */
    expect_ok("16777215.9990234375T", UINT64_MAX - (TIB - 1) + 1023 * GIB);
}

static void test_exact_fractions(void **state)
{
    (void)state;
    expect_ok("1.5GiB", 3 * GIB / 2);
    expect_ok("1.5G", 3 * GIB / 2);
    expect_ok("0.5K", 512);
    expect_ok("0.25MiB", 256 * KIB);
    expect_ok("0.0009765625K", 1); /* 2^-10 KiB */
    expect_ok("1.0", 1);
    expect_ok("2.50000000000000000000000000000000000000000000000000G", 5 * GIB / 2);
    expect_ok("0.0000000000009094947017729282379150390625T", 1); /* 2^-40 TiB */
}

static void test_inexact_fractions(void **state)
{
    (void)state;
    expect_err("1.3G", "fraction is not a whole number of bytes");
    expect_err("1.5", "fraction is not a whole number of bytes");
    expect_err("0.1B", "fraction is not a whole number of bytes");
    expect_err("0.00048828125K", "fraction is not a whole number of bytes"); /* half a byte */
    expect_err("0.00000000000045474735088646411895751953125T", "fraction is not a whole number of bytes");
    expect_err("1.", "missing digits after '.'");
    expect_err("1.G", "missing digits after '.'");
    expect_err(".5G", "not a number (expected digits, then an optional unit)");
    expect_err("1.5.5G", "unknown unit '.5G'; use B, K/KiB, M/MiB, G/GiB or T/TiB (powers of 1024)");
}

static void test_rejects_empty_sign_space(void **state)
{
    (void)state;
    expect_err("", "empty value");
    expect_err("+1", "sign not allowed");
    expect_err("-1", "sign not allowed");
    expect_err("-0", "sign not allowed");
    expect_err(" 1", "whitespace not allowed");
    expect_err("1 ", "whitespace not allowed");
    expect_err("1 G", "whitespace not allowed");
    expect_err("1\tG", "whitespace not allowed");
    expect_err("1G\n", "whitespace not allowed");
    expect_err("abc", "not a number (expected digits, then an optional unit)");
}

static void test_rejects_ambiguous_units(void **state)
{
    (void)state;
    expect_err("4GB", "ambiguous unit 'GB'; use 'GiB' (2^30) or 'G'");
    expect_err("4gb", "ambiguous unit 'gb'; use 'GiB' (2^30) or 'G'");
    expect_err("4Gb", "ambiguous unit 'Gb'; use 'GiB' (2^30) or 'G'");
    expect_err("1KB", "ambiguous unit 'KB'; use 'KiB' (2^10) or 'K'");
    expect_err("1kB", "ambiguous unit 'kB'; use 'KiB' (2^10) or 'K'");
    expect_err("1MB", "ambiguous unit 'MB'; use 'MiB' (2^20) or 'M'");
    expect_err("1TB", "ambiguous unit 'TB'; use 'TiB' (2^40) or 'T'");
    expect_err("1b", "ambiguous unit 'b' (bits?); use 'B' for bytes");
    expect_err("1Gib", "ambiguous unit 'Gib' ('b' means bits); use 'GiB'");
    expect_err("1kib", "ambiguous unit 'kib' ('b' means bits); use 'KiB'");
}

static void test_rejects_unknown_units(void **state)
{
    static const char *const bad[] = { "1x", "1P", "1PiB", "1E", "1GiBs", "1KiBB", "0x10", "1e3", "1Gx", "1KiX", "1%" };
    char want[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(want, sizeof(want), "unknown unit '%s'; use B, K/KiB, M/MiB, G/GiB or T/TiB (powers of 1024)",
                 bad[i] + 1);
        expect_err(bad[i], want);
    }
    /* Unprintable unit bytes are escaped, not copied into the message. */
    expect_err("1\x01", "unknown unit '\\x01'; use B, K/KiB, M/MiB, G/GiB or T/TiB (powers of 1024)");
    expect_err("1G'", "unknown unit 'G\\''; use B, K/KiB, M/MiB, G/GiB or T/TiB (powers of 1024)");
}

static void test_error_buffer_handling(void **state)
{
    char small[8];
    uint64_t v = 0;

    (void)state;
    assert_int_equal(gs_parse_size("4GB", &v, NULL, 0), -1);
    memset(small, 'x', sizeof(small));
    assert_int_equal(gs_parse_size("4GB", &v, small, sizeof(small)), -1);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_int_equal(gs_parse_size(NULL, &v, small, sizeof(small)), -1);
    assert_int_equal(gs_parse_size("1", NULL, small, sizeof(small)), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_bytes),
        cmocka_unit_test(test_every_unit),
        cmocka_unit_test(test_overflow_boundaries),
        cmocka_unit_test(test_exact_fractions),
        cmocka_unit_test(test_inexact_fractions),
        cmocka_unit_test(test_rejects_empty_sign_space),
        cmocka_unit_test(test_rejects_ambiguous_units),
        cmocka_unit_test(test_rejects_unknown_units),
        cmocka_unit_test(test_error_buffer_handling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
