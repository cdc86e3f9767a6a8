/*
 * The device ledger: one small shared file per GPU, next to the containers'
 * regions (same directory), through which the compute limiters of different
 * containers take turns on the GPU (docs/compute.md).
 *
 * Time-slicing does not split a GPU evenly (on an H200 the tenant with the
 * shorter windows got ~43 % of the overlapped time, and switches cost
 * ~5 %), so throttled windows of different containers do not overlap at
 * all: a window opens only while no other container holds the turn, and its
 * container holds it until it has no window open, or until the turn's
 * expiry (the holder's planned end plus a grace, extended while it drains):
 * a thread that stops launching inside a window, or a stopped process,
 * holds the others back by that much at most. Waiters sleep on a futex in
 * the ledger, woken when the turn is released. A window's occupancy is then
 * its container's own GPU time.
 *
 * Members are processes (one slot each, with the count of their threads'
 * open windows). Each also records its weight and when it last showed
 * demand, for share mode's targets. A process that dies with windows open
 * is dropped by gs_ledger_reap (pid + start time), which frees the turn, or
 * by the next locker if it died holding the robust lock.
 */
#ifndef GPUSLICE_LEDGER_H
#define GPUSLICE_LEDGER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define GS_LEDGER_MAGIC 0x5245474445475321ULL /* "!GSGDEGER" */
#define GS_LEDGER_VERSION 4U
#define GS_LEDGER_MEMBERS 128

struct gs_ledger_member {
    int32_t pid; /* 0 = free */
    uint32_t open; /* open windows of this process's threads */
    uint64_t start_time;
    uint64_t pidns;
    uint64_t container; /* container id (its region's inode) */
    uint64_t active_ns; /* last sign of demand: a window opened or waited for, or a free-running launch */
    uint32_t weight;    /* share weight (a capped container: its cap), for share mode's targets */
    uint32_t pad;
};

struct gs_ledger {
    uint64_t magic;
    uint32_t version;
    uint32_t size;
    pthread_mutex_t lock;
    uint32_t turn_seq;       /* futex word: bumped whenever the turn is released */
    uint32_t pad;
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

/* Opens a window of member slot at now, taking its container the turn
 * until `until` at least. Returns 0 if it opened; else (another container
 * holds the turn) the ns to wait at most before trying again, with the
 * value to pass gs_ledger_wait in *seq. */
uint64_t gs_ledger_open_window(struct gs_ledger *l, int slot, uint64_t now, uint64_t until, uint32_t *seq);

/* The member's container, if it holds the turn, holds it until `until` at
 * least: a closing thread that must wait for its work to drain says so. */
void gs_ledger_extend(struct gs_ledger *l, int slot, uint64_t until);

/* Closes a window of member slot. The turn is released when the container
 * has no window open. */
void gs_ledger_close_window(struct gs_ledger *l, int slot);

/* Sleeps until the turn is released (seq from gs_ledger_open_window is
 * stale) or ns have passed. */
void gs_ledger_wait(struct gs_ledger *l, uint32_t seq, uint64_t ns);

/* Members of containers other than container that are alive (as of the last
 * reap). */
int gs_ledger_others(struct gs_ledger *l, uint64_t container);

/* Drops members whose process is gone (alive(pid, start_time, pidns) == 0). */
void gs_ledger_reap(struct gs_ledger *l, int (*alive)(int32_t pid, uint64_t start_time, uint64_t pidns));

#endif
