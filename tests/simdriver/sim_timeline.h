/*
 * The simulated device's kernel timeline, shared by every process that maps
 * the state. A kernel carries a duration (exclusive device time); a process's
 * kernels run one after another (all its streams form one queue); when k
 * processes have work, the device time-slices between them: each progresses
 * at 1/k of full speed (processor sharing, the limit of the real driver's
 * round-robin time slices; GPUSLICE_SIM_SWITCH_LOSS=L makes each progress at
 * (1 - L/100)/k instead, the context switches' cost). With
 * GPUSLICE_SIM_TIMESLICE_US=T the device instead runs one process at a time
 * for a slice of up to T (until its queue empties), round robin, as an H100
 * does: a process that submits a short kernel while another's slice runs
 * waits for that slice to end, and its events then span the other's slices
 * too. An event recorded on an idle stream meanwhile is stamped when its
 * process's slice begins, not when it was recorded: on an H200 beside a
 * GPU-bound process, "record A, launch a 10 us kernel, record B" read 12.9 us
 * from A to B while the host waited 1.45 ms for B (bench/probe/event_stamp.cu).
 * Time is CLOCK_MONOTONIC; nothing runs in the background: the
 * timeline is computed up to "now" whenever anyone looks.
 *
 * NVML per-process utilisation is derived from the same timeline: at the end
 * of each sample period (sim_util_period: GPUSLICE_SIM_NVML_PERIOD_MS, 100 ms
 * by default) every process whose kernels ran gets a
 * sample (pid, timestamp, percent of the period its kernels ran). With
 * GPUSLICE_SIM_NVML_SNAPSHOT=1 the samples are what an H100 gave two
 * turn-taking tenants: the process whose kernels ran last in the period gets
 * the device's whole busy percent, every other one 0. With GPUSLICE_SIM_MPS=1
 * the samples are what an H100 gave two clients of an MPS daemon: one per
 * period for the server, pid SIM_MPS_SERVER_PID (named nvidia-cuda-mps-server
 * by nvmlSystemGetProcessName), with the device's busy percent, none for the
 * clients (nvidia-smi pmon: the server "C" at 42 % SM, the clients "M+C"
 * with none; bench/probe/mps_share.sh).
 *
 * Collective kernels (sim_tl_collective) wait on the device for their peers,
 * as NCCL's do: when a process's queue reaches its seq-th collective of a
 * group it spins there -- it has work, takes its share or slice of the device
 * and counts as busy, but its work does not advance -- until all of the
 * collective's ranks (processes on any device) have reached theirs; then each
 * runs its own work. Since a release on one device depends on the others,
 * sim_tl_advance advances every device of the state together, segment by
 * segment, and a release happens at the segment end where the last rank
 * arrived. A rank that dies leaves its peers spinning, as NCCL's do.
 *
 * All functions here want the state lock held.
 */
#ifndef GPUSLICE_SIM_TIMELINE_H
#define GPUSLICE_SIM_TIMELINE_H

#include "sim_state.h"

#define SIM_MPS_SERVER_PID 4194302U /* no real process: pids stay below 2^22 */

uint64_t sim_now_ns(void);

/* The clock model (sim_state.h): the clock, over the highest, of a device
 * util percent busy, and the work it does per device ns then, ppm of the
 * rate fully busy. Without the model: 1 and SIM_PPM. */
double sim_clock(const struct sim_state *st, uint32_t util);
uint32_t sim_clock_speed_ppm(const struct sim_state *st, uint32_t util);

/* The mean draw over the periods of the last SIM_POWER_SPAN_NS, mW. The
 * device was idle before its timeline began (its first submission or
 * NVML read), and those periods count at the idle draw, as a real device's
 * one-second mean holds its idle before a first load: averaged over the
 * recorded periods alone, a tenant's first reading passed for a full second
 * of its start-up burst. */
unsigned int sim_power_over_span(const struct sim_state *st, int dev);

/* NVML's instantaneous draw (NVML_FI_DEV_POWER_INSTANT), mW: the last full
 * sample period's, as an H100's refreshed about every 110 ms
 * (bench/results/compute-2026-12-06f-h100-power.md). */
unsigned int sim_power_now(const struct sim_state *st, int dev);

/* Starts device dev's timeline if it has none yet, and computes every
 * started device's up to now. */
void sim_tl_advance(struct sim_state *st, int dev, uint64_t now);

/* How long a waiter for `work` ns more of a process's work on dev sleeps
 * before it looks again: the work shared with the other processes that
 * have work now, at the clock model's speed (not the switch loss: the
 * others may stop meanwhile, and the work end sooner). A wait that slept
 * the work's time at full speed returned late whenever the clock model ran
 * the device faster (1.21 x under a cap of 30), so the host saw idle time
 * the device did not. */
uint64_t sim_tl_eta(const struct sim_state *st, int dev, uint64_t work);

/* Adds ns of work for process slot proc on dev at time now (advances first). */
void sim_tl_submit(struct sim_state *st, int proc, int dev, uint64_t ns, uint64_t now);

/* Queues a graph of count kernels of kernel_ns each, gap_ns of idle device
 * between consecutive ones (the graph's nodes waiting for each other):
 * while its queue is in a gap the process does not count as busy, neither
 * in NVML's samples nor in the device's utilisation. The gap passes in the
 * process's queue as work would: alone on the device it lasts gap_ns; beside
 * others it takes its processor-sharing part or its slices like a kernel
 * (a simplification). Returns -1, queueing nothing, when the process's
 * queue has no room for count - 1 more gaps. */
int sim_tl_submit_graph(struct sim_state *st, int proc, int dev, uint64_t kernel_ns, uint32_t count, uint64_t gap_ns,
                        uint64_t now);

/* Queues a collective of group (< SIM_COLL_GROUPS) that needs ranks processes
 * and then runs ns of work (at least SIM_COLL_MIN_NS, so that what is queued
 * after it is reached only once it is released). Returns -1, queueing
 * nothing, when SIM_COLL_QUEUE of the process's collectives on dev are not
 * released yet. */
#define SIM_COLL_MIN_NS 1ULL
int sim_tl_collective(struct sim_state *st, int proc, int dev, uint64_t ns, uint32_t group, uint32_t ranks,
                      uint64_t now);

/* An event recorded now by process slot proc on dev: the work it completes
 * after (advances first). On a time-sliced device where another process has
 * work, an idle process's event waits for the process's next slice, as a
 * context's commands do on the real device: SIM_EVENT_WORK_NS of work. */
#define SIM_EVENT_WORK_NS 1ULL
uint64_t sim_tl_event_mark(struct sim_state *st, int proc, int dev, uint64_t now);

/* When the process's cumulative done work reached target (interpolated on
 * its timeline). Only meaningful once done >= target. */
uint64_t sim_tl_done_time(const struct sim_work *w, uint64_t target);

/* Processes with work pending on dev (the current slowdown factor). */
int sim_tl_active(const struct sim_state *st, int dev);

#endif
