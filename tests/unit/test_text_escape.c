/* Unit tests for gs_escape_utf8 (issue 27, finding 9): names a tenant wrote come out
 * as valid UTF-8 without control characters, and gs_escape_text is unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "text_escape.h"

static void expect_utf8(const char *in, size_t inlen, size_t outlen, const char *want)
{
    char out[256];

    assert_true(outlen <= sizeof out);
    memset(out, 'Z', sizeof out);
    gs_escape_utf8(out, outlen, in, inlen);
    assert_string_equal(out, want);
}

static void test_the_issue_name(void **state)
{
    static const char name[] = "\xff\xfe\x1b]0;pwned\x07";

    (void)state;
    expect_utf8(name, sizeof name, 256, "\\xff\\xfe\\x1b]0;pwned\\x07");
}

static void test_valid_utf8_stays(void **state)
{
    (void)state;
    expect_utf8("team-a", 6, 256, "team-a");
    expect_utf8("\xc3\xa9quipe \xe6\x97\xa5 \xf0\x9f\x9a\x80", 16, 256, "\xc3\xa9quipe \xe6\x97\xa5 \xf0\x9f\x9a\x80");
    expect_utf8("a'b\"c", 5, 256, "a'b\"c");
}

static void test_backslash_is_doubled(void **state)
{
    (void)state;
    expect_utf8("a\\xffb", 6, 256, "a\\\\xffb");
}

static void test_controls_and_bad_sequences_are_escaped(void **state)
{
    (void)state;
    expect_utf8("a\nb\x7f", 4, 256, "a\\x0ab\\x7f");
    expect_utf8("\xc2\x9b"
                "1m",
                4, 256, "\\xc2\\x9b1m");                             /* C1 CSI */
    expect_utf8("\xc0\xaf", 2, 256, "\\xc0\\xaf");                   /* overlong '/' */
    expect_utf8("\xed\xa0\x80", 3, 256, "\\xed\\xa0\\x80");          /* a surrogate */
    expect_utf8("\xf4\x90\x80\x80", 4, 256, "\\xf4\\x90\\x80\\x80"); /* past U+10FFFF */
    expect_utf8("\xe6\x97", 2, 256, "\\xe6\\x97");                   /* cut short */
    expect_utf8("\xe6\x97x", 3, 256, "\\xe6\\x97x");
}

static void test_stops_at_nul_and_length(void **state)
{
    (void)state;
    expect_utf8("ab\0cd", 5, 256, "ab");
    expect_utf8("abcd", 2, 256, "ab");
}

static void test_truncation_never_splits(void **state)
{
    (void)state;
    expect_utf8("ab\xff", 3, 6, "ab");
    expect_utf8("ab\xff", 3, 7, "ab\\xff");
    expect_utf8("a\xe6\x97\xa5", 4, 4, "a");
    expect_utf8("a\\", 2, 3, "a");
    expect_utf8("abc", 3, 1, "");
}

static void test_escape_text_unchanged(void **state)
{
    char out[64];

    (void)state;
    gs_escape_text(out, sizeof out, "it's\\\x1b\xc3\xa9", 8, 96);
    assert_string_equal(out, "it\\'s\\\\\\x1b\\xc3\\xa9");
    gs_escape_text(out, sizeof out, "abcdef", 6, 3);
    assert_string_equal(out, "abc...");
}

static void test_escape_shown_quotes_a_string_or_none(void **state)
{
    char buf[GS_ESCAPE_BUF];
    char long_in[200];

    (void)state;
    assert_string_equal(gs_escape_shown(buf, "a\nb'"), "a\\x0ab\\'");
    assert_string_equal(gs_escape_shown(buf, NULL), "");
    memset(long_in, 'x', sizeof long_in - 1);
    long_in[sizeof long_in - 1] = '\0';
    assert_int_equal(strlen(gs_escape_shown(buf, long_in)), GS_ESCAPE_SHOW + 3); /* and "..." */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_issue_name),          cmocka_unit_test(test_valid_utf8_stays),
        cmocka_unit_test(test_backslash_is_doubled),    cmocka_unit_test(test_controls_and_bad_sequences_are_escaped),
        cmocka_unit_test(test_stops_at_nul_and_length), cmocka_unit_test(test_truncation_never_splits),
        cmocka_unit_test(test_escape_text_unchanged),   cmocka_unit_test(test_escape_shown_quotes_a_string_or_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
