/* roster: the node agent's per-GPU roster, as parsed by the interposer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "roster.h"

static int parse(const char *text, struct gs_roster *r, char *err, size_t errlen)
{
    return gs_roster_parse(text, strlen(text), r, err, errlen);
}

static void entries_give_their_weights(void **state)
{
    (void)state;
    static struct gs_roster r;
    char err[200] = "";
    assert_int_equal(parse("gpuslice-roster 1\n00000000000000aa cap 30 key-a\n00000000000000bb share 100 b_2\n", &r,
                           err, sizeof err),
                     0);
    assert_int_equal(r.n, 2);
    const struct gs_roster_entry *a = gs_roster_find(&r, 0xaa), *b = gs_roster_find(&r, 0xbb);
    assert_true(a && a->weight == 30 && a->capped);
    assert_true(b && b->weight == 100 && !b->capped);
    assert_null(gs_roster_find(&r, 0xcc)); /* not on it */
    assert_string_equal(b->key, "b_2");
    assert_int_equal(parse("gpuslice-roster 1\n", &r, err, sizeof err), 0); /* a GPU nobody holds */
    assert_int_equal(r.n, 0);
}

static void format_reads_back(void **state)
{
    (void)state;
    static struct gs_roster r, back;
    r.n = 2;
    r.e[0] = (struct gs_roster_entry){ 0x0123456789abcdefULL, 10000, 0, "k0" };
    r.e[1] = (struct gs_roster_entry){ 1, 1, 1, "k1" };
    char text[512], err[200];
    assert_int_equal(gs_roster_format(&r, text, sizeof text), 0);
    assert_string_equal(text, "gpuslice-roster 1\n0123456789abcdef share 10000 k0\n0000000000000001 cap 1 k1\n");
    assert_int_equal(parse(text, &back, err, sizeof err), 0);
    assert_memory_equal(&back, &r, sizeof r);
    assert_int_equal(gs_roster_format(&r, text, 20), -1); /* does not fit */
}

/* Each malformed roster is refused whole, naming its first fault. */
static void any_fault_makes_it_no_roster(void **state)
{
    (void)state;
    static const struct {
        const char *text, *why;
    } bad[] = {
        { "", "line 1 is not" },
        { "gpuslice-roster 2\n", "line 1 is not" },
        { "gpuslice-roster 1\n00000000000000aa share 30 a", "line 2: it does not end in a newline" },
        { "gpuslice-roster 1\n00000000000000AA share 30 a\n", "line 2: the container id" },
        { "gpuslice-roster 1\n00000000000000a share 30 a\n", "line 2: the container id" },
        { "gpuslice-roster 1\n0000000000000000 share 30 a\n", "container id 0" },
        { "gpuslice-roster 1\n00000000000000aa\n", "no mode" },
        { "gpuslice-roster 1\n00000000000000aa 30 a\n", "the mode" },
        { "gpuslice-roster 1\n00000000000000aa capped 30 a\n", "the mode" },
        { "gpuslice-roster 1\n00000000000000aa share 0 a\n", "the weight" },
        { "gpuslice-roster 1\n00000000000000aa share 10001 a\n", "the weight" },
        { "gpuslice-roster 1\n00000000000000aa share 030 a\n", "the weight" },
        { "gpuslice-roster 1\n00000000000000aa share 30\n", "the weight" },
        { "gpuslice-roster 1\n00000000000000aa cap 101 a\n", "the cap" },
        { "gpuslice-roster 1\n00000000000000aa share 30 a b\n", "the key" },
        { "gpuslice-roster 1\n00000000000000aa share 30 a/b\n", "the key" },
        { "gpuslice-roster 1\n00000000000000aa share 30 0123456789012345678901234567890123\n", "the key" },
        { "gpuslice-roster 1\n00000000000000aa cap 30 a\n00000000000000aa share 40 b\n",
          "line 3: the container id is listed twice" },
    };
    static struct gs_roster r;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[200] = "";
        r.n = 7;
        assert_int_equal(parse(bad[i].text, &r, err, sizeof err), -1);
        assert_int_equal(r.n, 0);
        if (!strstr(err, bad[i].why))
            fail_msg("%zu: \"%s\" does not say \"%s\"", i, err, bad[i].why);
    }
}

static void more_entries_than_a_ledger_has_members_is_malformed(void **state)
{
    (void)state;
    static struct gs_roster r;
    static char text[GS_ROSTER_MAX_BYTES + 64];
    int l = snprintf(text, sizeof text, "%s", GS_ROSTER_HEADER);
    for (unsigned i = 1; i <= GS_ROSTER_MAX + 1; i++)
        l += snprintf(text + l, sizeof text - (size_t)l, "%016x share 1 k\n", i);
    char err[200] = "";
    assert_int_equal(parse(text, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "line 130: more entries"));
}

/* A roster the container could write is no word of the agent's: a file on
 * a writable mount is refused (the agent mounts the rosters read-only). */
static void a_roster_on_a_writable_mount_is_refused(void **state)
{
    (void)state;
    char path[] = "/tmp/gs-roster-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "gpuslice-roster 1\n00000000000000aa cap 30 a\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    static struct gs_roster r;
    char err[400] = "";
    assert_int_equal(gs_roster_load(path, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "not on a read-only mount"));
    assert_int_equal(r.n, 0);
    unlink(path);
    assert_int_equal(gs_roster_load(path, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot open"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(entries_give_their_weights),
        cmocka_unit_test(format_reads_back),
        cmocka_unit_test(any_fault_makes_it_no_roster),
        cmocka_unit_test(more_entries_than_a_ledger_has_members_is_malformed),
        cmocka_unit_test(a_roster_on_a_writable_mount_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
