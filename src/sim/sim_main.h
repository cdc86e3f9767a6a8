/* Entry point of `gpuslice sim` (argv[0] = "sim"). Returns the exit status:
 * 0 success, 1 runtime error, 2 usage error. */
#ifndef GPUSLICE_SIM_MAIN_H
#define GPUSLICE_SIM_MAIN_H

int gpuslice_sim_main(int argc, char **argv);

#endif
