/*
 * The device ledger: one small shared file per GPU, in a directory every
 * container on the node can reach (the flat layout's state directory, or
 * the node agent's shared ledger directory), through which the compute
 * limiters of different containers take turns on the GPU (docs/compute.md).
 *
 * Time-slicing does not split a GPU evenly (on an H200 the tenant with the
 * shorter windows got ~43 % of the overlapped time, and switches cost
 * ~5 %), so windows of throttled containers do not overlap: a window opens
 * only while no other container holds the turn, and its container holds it
 * until it has no window open, or until the turn's expiry (the holder's
 * planned end plus a grace, extended while it drains, never more than
 * GS_LEDGER_MAX_HOLD_NS ahead): a thread that stops launching inside a
 * window, a stopped process or a forged turn holds the others back by that
 * much at most. Waiters sleep on a futex in the ledger, woken when the turn
 * is released.
 *
 * Members are processes (one slot each, with the count of their threads'
 * open windows); each also records its container's weight, its recent use
 * of the GPU and when it last showed demand or waited for tokens, for share
 * mode's targets. Liveness does not trust pids (containers have pid
 * namespaces of their own): a member holds an open-file-description lock on
 * its slot's byte through a descriptor of its own (ofdlock.h), which the
 * kernel drops when it dies; a slot whose byte nobody holds is dead,
 * whatever it says. The ledger's own lock is an OFD lock too, taken without
 * blocking for at most GS_LEDGER_LOCK_WAIT_NS, and after a wait that timed
 * out only tried for GS_LEDGER_LOCK_BACKOFF_NS: a tenant that holds it or
 * writes garbage into the file cannot make anyone wait longer than that or
 * than one turn's expiry; every field is validated where it is read.
 */
#ifndef GPUSLICE_LEDGER_H
#define GPUSLICE_LEDGER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "limiter.h"
#include "turn_frame.h"

#define GS_LEDGER_MAGIC 0x5245474445475321ULL /* "!GSGDEGER" */
#define GS_LEDGER_VERSION 8U
#define GS_LEDGER_MEMBERS 128
#define GS_LEDGER_MAX_HOLD_NS 1200000000ULL     /* a turn never reaches further ahead than this */
#define GS_LEDGER_LOCK_WAIT_NS 5000000ULL       /* the ledger's lock, at most this long */
#define GS_LEDGER_OPEN_WAIT_NS 5000000ULL       /* the file's init lock (flock), at most this long */
#define GS_LEDGER_LOCK_BACKOFF_NS 1000000000ULL /* ... and once a wait timed out, not again for this long */
#define GS_LEDGER_MAX_OPEN 4096U                /* more open windows than this in one member is garbage */
#define GS_LEDGER_CONTEND_NS 100000000ULL       /* a member that asked for the turn this recently contends */
#define GS_LEDGER_SLOT_GRACE_NS 2000000ULL      /* a turn taken in a slot lasts its end plus this at most */

struct gs_ledger_member {
    uint64_t container; /* container id; 0 = free */
    uint64_t active_ns; /* last sign of demand: a window opened or waited for, or a free-running launch */
    uint64_t wants_ns;  /* last time its container waited for tokens (it wants more than it gets) */
    uint64_t asked_ns;  /* last time it asked for the turn (it contends: turn_frame.h) */
    int32_t pid;        /* in its own pid namespace: for people, never for liveness */
    uint32_t open;      /* open windows of this process's threads that hold the turn */
    uint32_t weight;    /* share weight (a capped container: its cap) */
    uint32_t use_ppm;   /* its container's GPU use lately */
    uint32_t claim_ppm; /* the part of the GPU its container is allowed now, when it last asked for the turn */
    uint32_t draining;  /* of its open windows, those that extended the turn to drain (gs_ledger_extend) */
    uint64_t hold_ns;   /* the latest end its windows took this turn until as they opened (no drain's extension) */
    uint64_t pidns;     /* the inode of its pid namespace, whose numbering pid is in; 0: unknown */
};

struct gs_ledger_file {
    uint64_t magic;
    uint32_t version;
    uint32_t size;
    uint32_t turn_seq; /* futex word: bumped whenever the turn is released */
    uint32_t pad;
    uint64_t turn_container; /* holder of the turn; 0 = free */
    uint64_t turn_until_ns;  /* the turn is free after this anyway */
    struct gs_ledger_member m[GS_LEDGER_MEMBERS];
};

/* A process's handle on one ledger file. */
struct gs_ledger {
    struct gs_ledger_file *f;       /* the shared mapping */
    int fd;                         /* this handle's description: the ledger's lock, liveness queries */
    int slot_fd[GS_LEDGER_MEMBERS]; /* descriptions holding the slots this handle joined; -1 */
    uint64_t file_dev, file_ino;    /* the file fd and slot_fd are descriptors of (gs_ledger_descriptors_ours) */
    uint64_t pidns;                 /* the pid namespace of the process that joined last (gs_proc_pidns) */
    char path[4096];
    uint64_t patient_after_ns; /* the lock is tried once, not waited for, until then (lock()) */
    /* the ledger's lock among this process's threads: an OFD lock belongs
     * to the description, which they all share, so it excludes other
     * processes only */
    pthread_mutex_t lock_mutex;
    int holder_cancel; /* lock_mutex's holder's cancel state before it took it */
    /* the other containers whose claims were verified, each with the most
     * it may claim (gs_ledger_trust; gs_turn_trusted_claims) */
    pthread_mutex_t trust_lock;
    unsigned ntrusted;
    struct gs_turn_claim trusted[GS_LEDGER_MEMBERS];
};

/* A container is its region file: the same (device, inode) for all its
 * processes, whatever their mount namespace (bind mounts keep both), and
 * for the node agent that made it (the roster, roster.h). The device counts
 * too: the flat layout's directory and the node agent's can lie on
 * different filesystems, whose inode numbers collide. Never 0. */
uint64_t gs_ledger_container_id(uint64_t dev, uint64_t ino);

/* Maps (creating if needed) the ledger at path. NULL with a reason in err
 * and errno EAGAIN where a later try may do (an empty file whose lock
 * another process held past GS_LEDGER_OPEN_WAIT_NS), else another. */
struct gs_ledger *gs_ledger_open(const char *path, char *err, size_t errlen);
/* The node agent's: lays out the ledger file fd (open for writing) where
 * it is empty, or of the right size but never laid out, as
 * gs_ledger_open would, so that no tenant has to take its lock to open
 * it; 0 also where it holds a ledger of this layout already, else -1 with
 * errno (EINVAL: another layout or size; EAGAIN: another process held its
 * lock past GS_LEDGER_OPEN_WAIT_NS). */
int gs_ledger_lay_out(int fd);
/* Unmaps it and closes its descriptors: the slots it held become free. */
void gs_ledger_close(struct gs_ledger *l);
/* In a forked child: forgets the handle without touching the parent's
 * slots (closes the inherited descriptors and unmaps). */
void gs_ledger_forget(struct gs_ledger *l);
/* In a forked child, from its fork handler: closes the descriptors it
 * inherited and replaces the mapping it inherited (they share or pin the
 * parent's descriptions, and with them the parent's slot locks and, if the
 * parent held it, the ledger's lock, for as long as the child lives), and
 * resets the handle's mutexes (a parent thread may have held them). The
 * handle is then only fit for gs_ledger_forget. */
void gs_ledger_fork_child(struct gs_ledger *l);

/* The ledger's lock, which every change of the turn or the members is
 * made under: 0, or -1 with errno EAGAIN where another thread or process
 * held it past GS_LEDGER_LOCK_WAIT_NS (or it was, lately: then only
 * tried). */
int gs_ledger_lock(struct gs_ledger *l);
void gs_ledger_unlock(struct gs_ledger *l);

/* Whether the file was cut short under l's mapping (another process
 * truncated it: the SIGBUS guard gave the mapping zeroed private pages,
 * map_guard.h). l no longer sees the other members, nor they it. */
int gs_ledger_cut_short(const struct gs_ledger *l);
/* Whether l's descriptors are still the ledger file's: the program may
 * close them (many close every descriptor above 2 as they start) and give
 * their numbers to files of its own. Through such a number the ledger's
 * lock excludes no one and every other member looks dead (the reap then
 * frees them all), and a member slot's lock is gone. */
int gs_ledger_descriptors_ours(const struct gs_ledger *l);

/* Sizes the file of a ledger cut short back and maps it again in place,
 * shared, under the same address (threads may be inside it): the members'
 * slot locks lie past the file's end and survive it, and each restores its
 * own record (gs_ledger_heal). 0, or -1 with errno: EAGAIN where the
 * file's lock or the handle's was held past its wait (try again later),
 * ESTALE where the path names another file now, another where it cannot
 * be sized or mapped. */
int gs_ledger_map_again(struct gs_ledger *l);
/* Gives up a ledger cut short: l's member slots (their byte locks, so the
 * file's next opener may reuse them) and its guard. l and its mapping stay
 * valid, never freed, for threads still inside them. */
void gs_ledger_abandon(struct gs_ledger *l);

/* Takes a member slot for a process of container (pid: for people only;
 * weight: see the member). Returns it, or -1 with errno ENOSPC (every slot
 * is a live member's), EAGAIN (the ledger's lock was held past
 * GS_LEDGER_LOCK_WAIT_NS: by a stalled or hostile process; try again
 * later) or EINVAL (container 0). */
int gs_ledger_join(struct gs_ledger *l, int32_t pid, uint64_t container, uint32_t weight);

/* Restores what member slot (held by this handle) says of itself, and the
 * file's header, where someone wrote over them: any tenant can write the
 * file, and one pass of garbage left the member counted as a stranger for
 * good (a share pair 30 : 70 of the agent's layout at 0.23 / 0.41) and
 * every later opener refused. The rest of the record is written anew at
 * its next ask, touch or publish. */
void gs_ledger_heal(struct gs_ledger *l, int slot, uint64_t container, int32_t pid, uint32_t weight);

/* The member shows demand at now (one atomic store, no lock: a share-mode
 * process that runs free calls it from its launch path). */
void gs_ledger_touch(struct gs_ledger *l, int slot, uint64_t now);

/* The member's container used use_ppm of the GPU lately and last waited
 * for tokens at wants_ns (share mode's water-filling reads these). */
void gs_ledger_publish(struct gs_ledger *l, int slot, uint32_t use_ppm, uint64_t wants_ns);

/* The member waited for tokens at ns (one atomic store, no lock: the
 * launch path posts each wait as it ends; the outer loop's next publish
 * stores the same time). */
void gs_ledger_wanted(struct gs_ledger *l, int slot, uint64_t ns);

/* Sum of the weights of the containers other than container that showed
 * demand since `since` (each counted once). */
uint64_t gs_ledger_busy_weight(struct gs_ledger *l, uint64_t container, uint64_t since);

/* Whether a live member of a container other than `container` for which
 * counts(container, ctx) holds names pid. A pid is a claim like the rest of
 * the member: the caller says whose it takes. */
int gs_ledger_pid_named(struct gs_ledger *l, uint64_t container, int32_t pid, int (*counts)(uint64_t c, void *ctx),
                        void *ctx);

/* How many live members of containers other than `container` for which
 * counts(container, ctx) holds number their pids in a pid namespace other
 * than pidns, or did not say in which: NVML names such a member's process
 * by a pid that no member names (the host's, where it translates only those
 * of the caller's namespace, as driver 580 does), so as many busy pids
 * nobody names may be theirs. */
unsigned gs_ledger_pidns_others(struct gs_ledger *l, uint64_t container, uint64_t pidns,
                                int (*counts)(uint64_t c, void *ctx), void *ctx);

/* The containers other than container that showed demand since `since`,
 * one entry each (weight, the most recent use, whether any of its members
 * waited for tokens since wants_since), at most max. Returns how many.
 * Weights and uses are what the members wrote, brought into the legal
 * range (GS_LIM_MAX_WEIGHT, GS_LIM_PPM): claims, not facts
 * (gs_lim_trusted_demands). */
unsigned gs_ledger_demands(struct gs_ledger *l, uint64_t container, uint64_t since, uint64_t wants_since,
                           struct gs_lim_demand *out, unsigned max);

/* The same with each entry's container id, to check it against what the
 * container's own files say. */
struct gs_ledger_claim {
    uint64_t container;
    struct gs_lim_demand d; /* quiet_ns: 0 (see active_ns) */
    uint64_t active_ns;     /* its members' latest sign of demand (a claim too: any value) */
};
unsigned gs_ledger_claims(struct gs_ledger *l, uint64_t container, uint64_t since, uint64_t wants_since,
                          struct gs_ledger_claim *out, unsigned max);

/* What gs_ledger_open_window decided. */
struct gs_ledger_turn {
    uint32_t claim_ppm; /* in: the part of the GPU the container is allowed now (its
                          * token rate): the size of its slot in the frame; 0: it
                          * takes no slot, and its turns are first come */
    int took;           /* the window holds the turn */
    uint32_t seq;       /* not taken: the value to pass gs_ledger_wait */
    uint64_t holder;    /* not taken: the container whose turn or slot it waits for */
    uint64_t slot_end;  /* taken in the frame's slot of its container (turn_frame.h): the
                          * window should end by then; 0: no frame to follow */
};

/* Opens a window of member slot at now, taking its container the turn
 * until `until` at least (or its slot's end plus GS_LEDGER_SLOT_GRACE_NS,
 * if sooner). While other containers contend, the turn is taken only in
 * the container's slot of the frame. Returns 0 if it opened; else (another
 * container holds the turn, or the frame gives it to another) the ns to
 * wait at most before trying again. If the ledger cannot be locked in time
 * the window opens without the turn (returns 0, took = 0). */
uint64_t gs_ledger_open_window(struct gs_ledger *l, int slot, uint64_t now, uint64_t until, struct gs_ledger_turn *t);

/* The containers whose claims were verified (another container's region,
 * or the node's roster), each with the most it may claim; the frame takes
 * the others' claims as gs_turn_trusted_claims says. At most
 * GS_LEDGER_MEMBERS are kept. */
void gs_ledger_trust(struct gs_ledger *l, const struct gs_turn_claim *trusted, unsigned n);

/* Where the member's container stands in the turn frame at now, other
 * containers contending (turn_frame.h): 1 with *f set, 0 when there is no
 * frame to follow. Counts as asking for the turn, with the claim: a
 * container in debt goes on contending for its slot. */
int gs_ledger_frame(struct gs_ledger *l, int slot, uint64_t now, uint32_t claim_ppm, struct gs_turn_slot *f);

/* The member's container, if it holds the turn, holds it until `until` at
 * least (never past now + GS_LEDGER_MAX_HOLD_NS): a closing thread that
 * must wait for its work to drain says so, until its window closes. Returns
 * 1 if the window now counts as draining (pass it to
 * gs_ledger_close_window), 0 if the turn was not its container's. */
int gs_ledger_extend(struct gs_ledger *l, int slot, uint64_t now, uint64_t until);

/* Closes a window of member slot at now (drained: gs_ledger_extend counted
 * it as draining). The turn is released when the container has no window
 * open; else, once none of its windows drains, it is held no longer than
 * its members' windows took this turn until as they opened (closed ones
 * too, which end within a window's length): a drain's extension ends
 * with the drains, though a thread of the container sits idle with a window
 * open (a training process's autograd thread between steps held its
 * neighbour back 150 ms a window for a second after each drain). */
void gs_ledger_close_window(struct gs_ledger *l, int slot, uint64_t now, int drained);

/* Sleeps until the turn is released (seq from gs_ledger_open_window is
 * stale) or ns have passed. */
void gs_ledger_wait(struct gs_ledger *l, uint32_t seq, uint64_t ns);

/* Live members of containers other than container (as of the last reap). */
int gs_ledger_others(struct gs_ledger *l, uint64_t container);

/* Frees the slots whose byte nobody holds (their process is gone, or they
 * were forged) and the turn of a container with no live open window. */
void gs_ledger_reap(struct gs_ledger *l);

#endif
