/* `gpuslice sim`'s time-left estimate and its text (progress.h). */
#include "progress.h"

#include <math.h>
#include <stdio.h>

/* Past this an estimate says nothing (and the integer conversion stays defined). */
#define ETA_MAX_S (1000 * 3600)

double sim_eta_s(double seconds_done, size_t runs_done, size_t runs)
{
    if (runs_done == 0 || runs_done > runs)
        return -1.0;
    return seconds_done / (double)runs_done * (double)(runs - runs_done);
}

void sim_format_eta(char *buf, size_t cap, double eta_s)
{
    if (!(eta_s >= 0.0)) {
        snprintf(buf, cap, "ETA ?");
        return;
    }
    if (eta_s > ETA_MAX_S) {
        snprintf(buf, cap, "ETA >%dh", ETA_MAX_S / 3600);
        return;
    }
    /* Whole seconds, rounded up: "0s" only once nothing is left. */
    unsigned long long s = (unsigned long long)ceil(eta_s);
    if (s < 60)
        snprintf(buf, cap, "ETA %llus", s);
    else if (s < 3600)
        snprintf(buf, cap, "ETA %llum%02llus", s / 60, s % 60);
    else
        snprintf(buf, cap, "ETA %lluh%02llum", s / 3600, s % 3600 / 60);
}
