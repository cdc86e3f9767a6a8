/* Set-up shared by the simulator's tests (see sim_fixture.h). */
#include "sim_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sim_main.h"

char *sim_fx_write_temp(const char *text)
{
    char *path = strdup("/tmp/gs_sim_test_XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    return path;
}

int sim_fx_run(int argc, const char **argv, char *err, size_t cap)
{
    char log[] = "/tmp/gs_sim_test_log_XXXXXX";
    int fd = err ? mkstemp(log) : -1;
    assert_true(!err || fd >= 0);
    FILE *null = fopen("/dev/null", "w");
    assert_non_null(null);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    dup2(fileno(null), 1);
    dup2(err ? fd : fileno(null), 2);
    int rc = gpuslice_sim_main(argc, (char **)argv);
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    fclose(null);
    if (err) {
        ssize_t n = pread(fd, err, cap - 1, 0);
        assert_true(n >= 0);
        err[n] = '\0';
        close(fd);
        unlink(log);
    }
    return rc;
}
