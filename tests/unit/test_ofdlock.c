/* ofdlock: a slot's lock is seen by other descriptions, dies with its
 * holder (even one killed with SIGKILL), and is visible through a
 * read-only descriptor, as viewers open the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ofdlock.h"

static char path[] = "/tmp/gs-ofdlock-XXXXXX";

static int setup(void **state)
{
    (void)state;
    int fd = mkstemp(path);
    if (fd < 0 || ftruncate(fd, 64) != 0)
        return -1;
    close(fd);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

static void test_hold_is_seen_and_exclusive(void **state)
{
    (void)state;
    int h = gs_ofd_hold(path, 5);
    assert_true(h >= 0);
    int ro = open(path, O_RDONLY);
    assert_true(ro >= 0);
    assert_int_equal(gs_ofd_held(ro, 5), 1);
    assert_int_equal(gs_ofd_held(ro, 6), 0);
    /* Another description cannot take the same byte, even in this process. */
    assert_int_equal(gs_ofd_hold(path, 5), -1);
    assert_int_equal(errno, EAGAIN);
    /* The holder's own description sees no conflict with itself. */
    assert_int_equal(gs_ofd_held(h, 5), 0);
    gs_ofd_unlock_byte(h, 5);
    assert_int_equal(gs_ofd_held(ro, 5), 0);
    assert_int_equal(gs_ofd_lock_byte(h, 5), 0);
    gs_ofd_release(h);
    assert_int_equal(gs_ofd_held(ro, 5), 0);
    close(ro);
}

static void test_lock_dies_with_a_killed_holder(void **state)
{
    (void)state;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int h = gs_ofd_hold(path, 9);
        char c = h >= 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    int ro = open(path, O_RDONLY);
    assert_int_equal(gs_ofd_held(ro, 9), 1);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_int_equal(gs_ofd_held(ro, 9), 0);
    close(ro);
    close(ready[0]);
    close(ready[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hold_is_seen_and_exclusive),
        cmocka_unit_test(test_lock_dies_with_a_killed_holder),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
