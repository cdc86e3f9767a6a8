/* gs_client's clock and its model of a tenant's host work (gs_client_cpu.c). */
#ifndef GS_CLIENT_CPU_H
#define GS_CLIENT_CPU_H

/* Seconds on CLOCK_MONOTONIC: the simulated clock under the sim clock. */
double gs_now_s(void);

/* us microseconds of CPU work on that clock, as Python spends between two
 * launches: the thread holds its core for the last part of it. */
void gs_cpu_work_us(double us);

/* Wall microseconds this thread has waited on a run queue, runnable but held
 * off its CPU (/proc/thread-self/schedstat); -1 where the kernel does not
 * say. What a loaded test machine, not the limiter, took from a tenant. */
long long gs_run_delay_us(void);

/* The run delay since gs_run_delay_us() read since; -1 where either read
 * could not be made. */
long long gs_run_delay_since(long long since);
#endif
