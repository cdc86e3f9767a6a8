/* `gpuslice sim`'s progress: the time-left estimate and its text (pure, so no
 * clock is read), and every run's line naming its place, n/N, with an ETA. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "progress.h"
#include "sim_fixture.h"

static void eta_is_the_mean_run_time_the_runs_left(void **state)
{
    (void)state;
    assert_true(sim_eta_s(0.0, 0, 10) < 0.0); /* no run done: no pace yet */
    assert_true(fabs(sim_eta_s(10.0, 2, 10) - 40.0) < 1e-9);
    assert_true(fabs(sim_eta_s(3.0, 3, 3)) < 1e-9);
    assert_true(sim_eta_s(3.0, 4, 3) < 0.0); /* more done than there are: unknown */
}

static void eta_text(void **state)
{
    (void)state;
    const struct {
        double s;
        const char *want;
    } cases[] = { { 0.0, "ETA 0s" },       { 44.2, "ETA 45s" }, { 59.5, "ETA 1m00s" }, { 185.0, "ETA 3m05s" },
                  { 7620.0, "ETA 2h07m" }, { -1.0, "ETA ?" },   { NAN, "ETA ?" },      { 1e12, "ETA >1000h" } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[32];
        sim_format_eta(buf, sizeof buf, cases[i].s);
        assert_string_equal(buf, cases[i].want);
    }
}

static void each_run_says_n_of_N_and_time_left(void **state)
{
    (void)state;
    char *nodes = sim_fx_write_temp(SIM_FX_ONE_NODE);
    char *pods = sim_fx_write_temp("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np0,1000,1024,1,500,\n");
    const char *argv[] = { "sim", "--nodes", nodes, "--pods", pods, "--policy", "binpack,fraglook", "--seeds", "1,2" };
    static char err[8192];
    assert_int_equal(sim_fx_run((int)(sizeof argv / sizeof argv[0]), argv, err, sizeof err), 0);
    int lines = 0;
    for (char *line = strtok(err, "\n"); line; line = strtok(NULL, "\n")) {
        char want[32];
        snprintf(want, sizeof want, "sim: [%d/4] ", lines + 1);
        assert_non_null(strstr(line, want));
        assert_non_null(strstr(line, lines == 3 ? ", ETA 0s" : ", ETA "));
        lines++;
    }
    assert_int_equal(lines, 4);
    unlink(nodes);
    unlink(pods);
    free(nodes);
    free(pods);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(eta_is_the_mean_run_time_the_runs_left),
        cmocka_unit_test(eta_text),
        cmocka_unit_test(each_run_says_n_of_N_and_time_left),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
