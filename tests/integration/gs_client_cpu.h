/* gs_client's clock and its model of a tenant's host work (gs_client_cpu.c). */
#ifndef GS_CLIENT_CPU_H
#define GS_CLIENT_CPU_H

/* Seconds on CLOCK_MONOTONIC: the simulated clock under the sim clock. */
double gs_now_s(void);

/* us microseconds of CPU work on that clock, as Python spends between two
 * launches: the thread holds its core for the last part of it. */
void gs_cpu_work_us(double us);
#endif
