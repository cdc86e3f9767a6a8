/* The speed probe's state in this process (compute_speed_probe.c): the
 * power correction's exponent measured on the device (GS_LIM_PROBE_NS). */
#ifndef GPUSLICE_COMPUTE_SPEED_PROBE_H
#define GPUSLICE_COMPUTE_SPEED_PROBE_H

#include <stdint.h>

/* The exponent gs_lim_speed uses on device dev: the one measured here, or
 * GPUSLICE_POWER_EXPONENT until a probe has measured one (0 stays 0: off). */
unsigned gs_compute_power_exp(int dev);

/* When the outer loop last decided a probe on dev (0: never). */
uint64_t gs_compute_probe_last(int dev);

/* The outer loop decided a probe on dev at now, at power reading over. */
void gs_compute_probe_decided(int dev, uint32_t over, uint64_t now);

/* The launch path takes a decided probe: its power reading, 0 if none. */
uint32_t gs_compute_probe_claim(int dev);

/* A probe window measured full_ns of GPU time per launch after the clock
 * settled, against duty_ns in the duty-cycled windows before it. */
void gs_compute_probe_measured(int dev, uint32_t over, uint64_t full_ns, uint64_t duty_ns);

#endif
