/* statedir: path building and the region walk over both layouts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "statedir.h"

static void touch(const char *dir, const char *name)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    close(fd);
}

struct seen {
    char keys[8][64];
    int n;
};

static int remember(const char *path, const char *key, void *arg)
{
    struct seen *s = arg;
    assert_non_null(strstr(path, key));
    assert_true(s->n < 8);
    snprintf(s->keys[s->n++], sizeof s->keys[0], "%s", key);
    return 0;
}

static int has(const struct seen *s, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->keys[i], key) == 0)
            return 1;
    return 0;
}

static void test_walk_lists_both_layouts_and_skips_the_rest(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs-statedir-XXXXXX", p[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    touch(dir, "team-a.region");             /* flat layout */
    snprintf(p, sizeof p, "%s/abc123", dir); /* the agent's layout */
    assert_int_equal(mkdir(p, 0700), 0);
    touch(p, "region");
    snprintf(p, sizeof p, "%s/empty", dir); /* a directory without a region */
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/.limits", dir); /* dot entries are not containers */
    assert_int_equal(mkdir(p, 0700), 0);
    touch(p, "region");
    snprintf(p, sizeof p, "%s/link.region", dir); /* a symlink is never followed */
    assert_int_equal(symlink("/etc/passwd", p), 0);
    snprintf(p, sizeof p, "%s/fifo.region", dir); /* nor a FIFO opened */
    assert_int_equal(mkfifo(p, 0600), 0);
    touch(dir, "GPU-1.ledger");

    struct seen s = { 0 };
    assert_int_equal(gs_statedir_each_region(dir, remember, &s), 0);
    assert_int_equal(s.n, 2);
    assert_true(has(&s, "team-a"));
    assert_true(has(&s, "abc123"));

    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_walk_of_a_missing_directory_fails(void **state)
{
    (void)state;
    struct seen s = { 0 };
    assert_int_equal(gs_statedir_each_region("/nonexistent/gpuslice", remember, &s), -1);
    assert_int_equal(s.n, 0);
}

static void test_paths(void **state)
{
    (void)state;
    char b[PATH_MAX];
    assert_int_equal(gs_statedir_region_path(b, sizeof b, "/run/gpuslice", "team-a"), 0);
    assert_string_equal(b, "/run/gpuslice/team-a.region");
    assert_int_equal(gs_statedir_ledger_path(b, sizeof b, "/run/gpuslice", "GPU-1"), 0);
    assert_string_equal(b, "/run/gpuslice/GPU-1.ledger");
    assert_int_equal(gs_statedir_parent(b, sizeof b, "/run/gpuslice/team-a.region"), 0);
    assert_string_equal(b, "/run/gpuslice");
    assert_int_equal(gs_statedir_parent(b, sizeof b, "/x.region"), 0);
    assert_string_equal(b, "/");
    assert_int_equal(gs_statedir_agent_region_dir(b, sizeof b, "/var/lib/gpuslice", "k1"), 0);
    assert_string_equal(b, "/var/lib/gpuslice/k1");
    assert_int_equal(gs_statedir_agent_limits_dir(b, sizeof b, "/var/lib/gpuslice", "k1"), 0);
    assert_string_equal(b, "/var/lib/gpuslice/.limits/k1");
    /* Too long: refused, never truncated into another path. */
    char small[16];
    assert_int_equal(gs_statedir_region_path(small, sizeof small, "/run/gpuslice", "team-a"), -1);
    char name[NAME_MAX + 2];
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    assert_int_equal(gs_statedir_region_path(b, sizeof b, "/d", name), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_lists_both_layouts_and_skips_the_rest),
        cmocka_unit_test(test_walk_of_a_missing_directory_fails),
        cmocka_unit_test(test_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
