/* `gpuslice sim`'s progress lines: which run of how many, and the time left at
 * the pace of the runs so far. Pure: the caller measures the time. */
#ifndef GPUSLICE_SIM_PROGRESS_H
#define GPUSLICE_SIM_PROGRESS_H

#include <stddef.h>

/* Seconds the runs left will take, at the mean time of the `runs_done` runs
 * that took `seconds_done` in all; -1 before the first run ends (no pace yet). */
double sim_eta_s(double seconds_done, size_t runs_done, size_t runs);

/* The ETA for people: "ETA 45s", "ETA 3m05s", "ETA 2h07m"; "ETA ?" for an
 * unknown (negative) one, "ETA >1000h" past that. */
void sim_format_eta(char *buf, size_t cap, double eta_s);

#endif
