/*
 * The device ledger: one small shared file per GPU, next to the containers'
 * regions (same directory), through which the compute limiters of different
 * containers see each other's duty-cycle windows (docs/compute.md).
 *
 * When k containers have work on a GPU at once, the driver time-slices it
 * and each gets about 1/k of it, while each sees its kernels take k times as
 * long. The ledger keeps the processor-sharing virtual clock
 *     V(t) = integral of dt / max(1, k(t)),
 * k = containers with an open window, so that a window from t0 to t1 got
 * (V(t1) - V(t0)) of GPU time: its occupancy times that over (t1 - t0) is
 * what it really used, exactly and at once, with no NVML sampling.
 *
 * Members are processes (one slot each, with the count of their threads'
 * open windows); k counts distinct containers, since the windows of one
 * container are charged as their union anyway. A process that dies with
 * windows open is dropped by gs_ledger_reap (pid + start time), or by the
 * next locker if it died holding the robust lock.
 */
#ifndef GPUSLICE_LEDGER_H
#define GPUSLICE_LEDGER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define GS_LEDGER_MAGIC 0x5245474445475321ULL /* "!GSGDEGER" */
#define GS_LEDGER_VERSION 1U
#define GS_LEDGER_MEMBERS 128

struct gs_ledger_member {
    int32_t pid; /* 0 = free */
    uint32_t open; /* open windows of this process's threads */
    uint64_t start_time;
    uint64_t pidns;
    uint64_t container; /* container id (its region's inode) */
};

struct gs_ledger {
    uint64_t magic;
    uint32_t version;
    uint32_t size;
    pthread_mutex_t lock;
    uint64_t last_ns; /* v is computed up to here */
    double v_ns;      /* the virtual clock */
    uint32_t active;  /* k: containers with an open window */
    uint32_t pad;
    struct gs_ledger_member m[GS_LEDGER_MEMBERS];
};

/* Maps (creating if needed) the ledger at path. NULL with a reason in err. */
struct gs_ledger *gs_ledger_open(const char *path, char *err, size_t errlen);
void gs_ledger_close(struct gs_ledger *l);

/* Takes a member slot for process pid of container. Returns it, or -1. */
int gs_ledger_join(struct gs_ledger *l, int32_t pid, uint64_t start_time, uint64_t pidns, uint64_t container);

/* A window of member slot opens (delta +1) or closes (-1) at now; returns the
 * virtual clock at now (after advancing it to now). */
double gs_ledger_window(struct gs_ledger *l, int slot, int delta, uint64_t now);

/* Members of containers other than container that are alive (as of the last
 * reap). */
int gs_ledger_others(struct gs_ledger *l, uint64_t container);

/* Drops members whose process is gone (alive(pid, start_time, pidns) == 0). */
void gs_ledger_reap(struct gs_ledger *l, uint64_t now, int (*alive)(int32_t pid, uint64_t start_time, uint64_t pidns));

#endif
