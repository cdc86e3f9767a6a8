/* `gpuslice sim` flags: usage errors exit 2, runtime errors 1, and a run on
 * a tiny trace writes the CSV and summary it promises. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sim_fixture.h"

#define RUN(...)                                                                                                       \
    sim_fx_run((int)(sizeof((const char *[]){ __VA_ARGS__ }) / sizeof(const char *)), (const char *[]){ __VA_ARGS__ }, \
               NULL, 0)

static void usage_errors_exit_2(void **state)
{
    (void)state;
    assert_int_equal(RUN("sim", "--help"), 0);
    assert_int_equal(RUN("sim", "--bogus", "x"), 2);
    assert_int_equal(RUN("sim", "--policy", "firstfit"), 2);
    assert_int_equal(RUN("sim", "--seeds", "51-42"), 2);
    assert_int_equal(RUN("sim", "--seeds", "4x"), 2);
    assert_int_equal(RUN("sim", "--load", "90"), 2);
    assert_int_equal(RUN("sim", "--nodes"), 2);
    assert_int_equal(RUN("sim", "stray"), 2);
    /* --opt=value like --opt value */
    assert_int_equal(RUN("sim", "--load=130", "--seeds=42-51", "--help"), 0);
    assert_int_equal(RUN("sim", "--load=90"), 2);
    assert_int_equal(RUN("sim", "--seeds=4x"), 2);
    /* a CPU mix needs a factor above 1 */
    assert_int_equal(RUN("sim", "--pods", "default+cpu0.5"), 2);
    assert_int_equal(RUN("sim", "--pods", "default+cpu"), 2);
}

static void runtime_errors_exit_1(void **state)
{
    (void)state;
    assert_int_equal(RUN("sim", "--nodes", "/nonexistent/nodes.csv", "--pods", "/nonexistent/p.csv"), 1);
    assert_int_equal(RUN("sim", "--trace-dir", "/nonexistent/openb"), 1); /* says how to get it */
    char *nodes = sim_fx_write_temp(SIM_FX_ONE_NODE);
    char *bad = sim_fx_write_temp("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,-5,1024,1,500\n");
    assert_int_equal(RUN("sim", "--nodes", nodes, "--pods", bad, "--quiet"), 1);
    unlink(nodes);
    unlink(bad);
    free(nodes);
    free(bad);
}

static void tiny_run_writes_outputs(void **state)
{
    (void)state;
    char *nodes = sim_fx_write_temp(SIM_FX_ONE_NODE "n1,64000,262144,2,T4\n");
    char *pods = sim_fx_write_temp("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
                                   "p0,1000,1024,1,500,\np1,1000,1024,1,1000,T4\np2,1000,1024,0,0,\n");
    char csv[] = "/tmp/gs_sim_csv_XXXXXX", md[] = "/tmp/gs_sim_md_XXXXXX";
    close(mkstemp(csv));
    close(mkstemp(md));
    assert_int_equal(RUN("sim", "--nodes", nodes, "--pods", pods, "--policy", "binpack,fraglook", "--seeds", "1,2",
                         "--csv", csv, "--summary", md, "--quiet"),
                     0);
    FILE *fp = fopen(csv, "r");
    assert_non_null(fp);
    char line[256];
    int rows = 0;
    assert_non_null(fgets(line, sizeof(line), fp));
    assert_string_equal(line, "workload,policy,seed,arrived_pct,alloc_pct\n");
    int per_run[2][2] = { { 0 } };
    while (fgets(line, sizeof(line), fp)) {
        char pol[32];
        int seed, pct;
        double alloc;
        assert_int_equal(sscanf(line, "%*[^,],%31[^,],%d,%d,%lf", pol, &seed, &pct, &alloc), 4);
        assert_true(pct >= 1 && pct <= 131 && alloc >= 0.0 && alloc <= 100.0);
        per_run[strcmp(pol, "fraglook") == 0][seed - 1]++;
        rows++;
    }
    fclose(fp);
    for (int p = 0; p < 2; p++) /* every policy x seed has curve points */
        for (int k = 0; k < 2; k++)
            assert_true(per_run[p][k] > 0);
    fp = fopen(md, "r");
    assert_non_null(fp);
    int table_rows = 0;
    while (fgets(line, sizeof(line), fp))
        table_rows += strstr(line, "| binpack |") != NULL || strstr(line, "| fraglook |") != NULL;
    fclose(fp);
    assert_int_equal(table_rows, 2);
    /* A plot alone needs no --csv; a plot that cannot be drawn fails the run. */
    assert_int_equal(RUN("sim", "--nodes", nodes, "--pods", pods, "--policy", "binpack", "--seeds", "1", "--plot",
                         "/tmp/gs_sim_cli.png", "--python", "/nonexistent/python", "--quiet"),
                     1);
    unlink(nodes);
    unlink(pods);
    unlink(csv);
    unlink(md);
    free(nodes);
    free(pods);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(usage_errors_exit_2),
        cmocka_unit_test(runtime_errors_exit_1),
        cmocka_unit_test(tiny_run_writes_outputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
