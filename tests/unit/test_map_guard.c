/* map_guard: a tenant that truncates the device ledger every container maps
 * must not kill the others with SIGBUS; the reader sees an empty ledger. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ledger.h"
#include "map_guard.h"

static void test_a_truncated_ledger_reads_as_empty_instead_of_killing_the_reader(void **state)
{
    (void)state;
    char path[] = "/tmp/gs-map-guard-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    char err[256];
    struct gs_ledger *l = gs_ledger_open(path, err, sizeof err);
    assert_non_null(l);
    int slot = gs_ledger_join(l, 1234, 42, 70);
    assert_true(slot >= 0);
    /* Another container's member that shows demand now. */
    struct gs_ledger *other = gs_ledger_open(path, err, sizeof err);
    assert_non_null(other);
    int oslot = gs_ledger_join(other, 99, 7, 30);
    assert_true(oslot >= 0);
    gs_ledger_touch(other, oslot, 1000);
    assert_int_equal(gs_ledger_busy_weight(l, 42, 500), 30);
    assert_false(gs_map_guard_tripped(l->f));

    /* A hostile tenant shrinks the file in a process of its own. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(truncate(path, 0) == 0 ? 0 : 1);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* Without the guard the next read dies of SIGBUS. */
    assert_int_equal(gs_ledger_busy_weight(l, 42, 500), 0);
    assert_true(gs_map_guard_tripped(l->f));
    gs_ledger_touch(l, slot, 2000); /* writes land in the private zeroed pages */
    gs_ledger_close(other);
    gs_ledger_close(l);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_truncated_ledger_reads_as_empty_instead_of_killing_the_reader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
