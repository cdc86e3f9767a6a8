/* gpuslice-sim: standalone driver for the simulator (same as `gpuslice sim`). */
#include "sim_main.h"

int main(int argc, char **argv)
{
    return gpuslice_sim_main(argc, argv);
}
