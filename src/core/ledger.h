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
 * next locker if it died holding the robust lock. A window counts only until
 * its expiry (its planned end plus a grace): a thread that stops launching
 * inside a window, or is stopped, cannot go on halving the others' charge.
 *
 * The turn: time-slicing does not split the GPU evenly (on an H200 the
 * tenant with the shorter windows got ~43 %, and switches cost ~5 %), so
 * capped containers do not overlap at all: a capped window opens only while
 * no other container holds the turn, and holds it until its container has
 * no window open (or the holder's windows expire). Waiters sleep on a futex
 * in the ledger, woken when the turn is released.
 */
#ifndef GPUSLICE_LEDGER_H
#define GPUSLICE_LEDGER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define GS_LEDGER_MAGIC 0x5245474445475321ULL /* "!GSGDEGER" */
#define GS_LEDGER_VERSION 3U
#define GS_LEDGER_MEMBERS 128

struct gs_ledger_member {
    int32_t pid; /* 0 = free */
    uint32_t open; /* open windows of this process's threads */
    uint64_t start_time;
    uint64_t pidns;
    uint64_t container; /* container id (its region's inode) */
    uint64_t until_ns;  /* the open windows count until here at most */
    uint64_t active_ns; /* last sign of demand: a window opened or waited for, or a free-running launch */
    uint32_t weight;    /* share weight (a capped container: its cap), for share mode's targets */
    uint32_t pad;
};

struct gs_ledger {
    uint64_t magic;
    uint32_t version;
    uint32_t size;
    pthread_mutex_t lock;
    uint64_t last_ns; /* v is computed up to here */
    double v_ns;      /* the virtual clock */
    uint32_t active;  /* k: containers with an open window */
    uint32_t turn_seq; /* futex word: bumped whenever the turn is released */
    uint64_t turn_container; /* holder of the turn; 0 = free */
    uint64_t turn_until_ns;  /* the turn is free after this anyway */
    struct gs_ledger_member m[GS_LEDGER_MEMBERS];
};

/* Maps (creating if needed) the ledger at path. NULL with a reason in err. */
struct gs_ledger *gs_ledger_open(const char *path, char *err, size_t errlen);
void gs_ledger_close(struct gs_ledger *l);

/* Takes a member slot for process pid of container (weight: see the
 * member). Returns it, or -1. */
int gs_ledger_join(struct gs_ledger *l, int32_t pid, uint64_t start_time, uint64_t pidns, uint64_t container,
                   uint32_t weight);

/* The member shows demand at now (one atomic store, no lock: a share-mode
 * process that runs free calls it from its launch path). */
void gs_ledger_touch(struct gs_ledger *l, int slot, uint64_t now);

/* Sum of the weights of the containers other than container that showed
 * demand since `since` (each counted once), and whether pid is a member of
 * one of them (its NVML samples are then covered by this). */
uint64_t gs_ledger_busy_weight(struct gs_ledger *l, uint64_t container, uint64_t since);
int gs_ledger_has_pid(struct gs_ledger *l, uint64_t container, int32_t pid);

/* Opens a window of member slot at now that counts until `until` at most.
 * turn: it wants the GPU to its container alone (cap mode). Returns 0 with
 * the virtual clock at now in *v if it opened; else (another container holds
 * the turn) the ns to wait at most before trying again, with the value to
 * pass gs_ledger_wait in *seq. */
uint64_t gs_ledger_open_window(struct gs_ledger *l, int slot, uint64_t now, uint64_t until, int turn, double *v,
                               uint32_t *seq);

/* The member's windows (and its container's turn, if it holds it) count
 * until `until` at least: a closing thread that must wait for its work to
 * drain says so (its kernels may take longer than planned while time-sliced
 * with other work). */
void gs_ledger_extend(struct gs_ledger *l, int slot, uint64_t now, uint64_t until);

/* Closes a window of member slot at now; returns the virtual clock at now.
 * The turn is released when the container has no window open. */
double gs_ledger_close_window(struct gs_ledger *l, int slot, uint64_t now);

/* Sleeps until the turn is released (seq from gs_ledger_open_window is
 * stale) or ns have passed. */
void gs_ledger_wait(struct gs_ledger *l, uint32_t seq, uint64_t ns);

/* Members of containers other than container that are alive (as of the last
 * reap). */
int gs_ledger_others(struct gs_ledger *l, uint64_t container);

/* Drops members whose process is gone (alive(pid, start_time, pidns) == 0). */
void gs_ledger_reap(struct gs_ledger *l, uint64_t now, int (*alive)(int32_t pid, uint64_t start_time, uint64_t pidns));

#endif
