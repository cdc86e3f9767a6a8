/* Marks the entry points the simulated libraries export (the tree builds
 * with -fvisibility=hidden). */
#ifndef GPUSLICE_SIM_EXPORT_H
#define GPUSLICE_SIM_EXPORT_H

#define SIM_EXPORT __attribute__((visibility("default")))

/* The other simulated library of the pair, for sharing a private state. */
#ifndef SIM_SIBLING_SONAME
#define SIM_SIBLING_SONAME "libnvidia-ml.so.1"
#endif

#endif
