/* Set-up shared by the simulator's tests: tiny trace files and runs of
 * `gpuslice sim` with its output kept out of the test log. */
#ifndef GPUSLICE_TESTS_SIM_FIXTURE_H
#define GPUSLICE_TESTS_SIM_FIXTURE_H

#include <stddef.h>

/* A nodes trace of one node with two P100s. */
#define SIM_FX_ONE_NODE "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\n"

/* A new temporary file holding text; its path, malloc'd (unlink and free
 * it). */
char *sim_fx_write_temp(const char *text);

/* Runs `gpuslice sim` with argv, stdout discarded; its stderr into err
 * (NUL-terminated, at most cap - 1 bytes), or discarded when err is NULL.
 * Returns its exit code. */
int sim_fx_run(int argc, const char **argv, char *err, size_t cap);

#endif
