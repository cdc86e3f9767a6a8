/* Process identity: a pid alone is reused by the kernel, so gpuslice keys
 * every process by pid + start time (and knows which pid namespace it saw). */
#ifndef GPUSLICE_PROCINFO_H
#define GPUSLICE_PROCINFO_H

#include <stdint.h>
#include <sys/types.h>

/* Start time of pid in clock ticks since boot (field 22 of /proc/<pid>/stat).
 * Returns 0 on success, -1 if the process does not exist. A zombie counts as
 * gone: its GPU memory was released when it exited. */
int gs_proc_start_time(pid_t pid, uint64_t *start_time);

/* Inode of this process's pid namespace (0 if unknown). */
uint64_t gs_proc_pidns(void);

/* 1 if (pid, start_time) names a live process, 0 if it is gone. A process in
 * another pid namespace cannot be judged from here and is reported alive. */
int gs_proc_alive(pid_t pid, uint64_t start_time, uint64_t pidns, uint64_t my_pidns);

#endif
