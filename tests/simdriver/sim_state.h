/*
 * The simulated GPU's state: devices, the processes using them and every
 * allocation they hold. One instance is shared by all processes that set the
 * same GPUSLICE_SIM_STATE file (mapped MAP_SHARED); without it the state is
 * private to the process. Everything here is plain data with no pointers, so
 * it means the same thing in every process that maps it.
 *
 * Compiled into both libcuda.so.1 and libnvidia-ml.so.1 (hidden symbols).
 */
#ifndef GPUSLICE_SIM_STATE_H
#define GPUSLICE_SIM_STATE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#define SIM_STATE_MAGIC 0x314d495345494c53ULL /* "SLIESIM1" */
/* 2: kernel timeline (sim_timeline.h); 3: NVML snapshots; 4: time slices; 5: MPS; 6: collectives;
 * 7: idle gaps inside graphs; 8: processes told apart across pid namespaces; 12: power over the last second;
 * 14: 17 devices; 15: the short-count flag (NVML_SHORT_COUNT); 16: pageable host memory access;
 * 17: the instantaneous power field (POWER_INSTANT); 18: reads of the samples that meet (NVML_READ_MEET);
 * 19: pids named in the caller's pid namespace (NVML_HOST_PIDS) */
#define SIM_STATE_VERSION 19U

/* One more than gpuslice accounts for in a process (GS_MAX_DEVICES), so
 * that its refusal past them is tested */
#define SIM_MAX_DEVICES 17
#define SIM_MAX_PROCS 128
#define SIM_MAX_CHUNKS 4096
#define SIM_MAX_ALLOCS 16384

#define SIM_MIB (1024ULL * 1024ULL)
#define SIM_GIB (1024ULL * SIM_MIB)
#define SIM_GRANULE (2ULL * SIM_MIB)   /* physical page size of the device */
#define SIM_SMALL_MAX (1ULL * SIM_MIB) /* at most this is sub-allocated */
#define SIM_SMALL_ALIGN 512ULL         /* alignment inside a 2 MiB chunk */
#define SIM_DEFAULT_MEM (80ULL * SIM_GIB)
#define SIM_DEFAULT_CTX_OVERHEAD (512ULL * SIM_MIB)

/* Where fake device addresses live: far from anything the host maps. The
 * legacy (pre-3.2) API has 32-bit pointers, so it gets a window below 4 GiB. */
#define SIM_VA_BASE 0x200000000000ULL
#define SIM_VA32_BASE 0x10000000ULL
#define SIM_VA32_END 0xfff00000ULL

enum sim_alloc_kind {
    SIM_KIND_FREE = 0,
    SIM_KIND_DEVICE,     /* cuMemAlloc, cuMemAllocPitch */
    SIM_KIND_MANAGED,    /* cuMemAllocManaged */
    SIM_KIND_ARRAY,      /* cuArrayCreate, cuArray3DCreate */
    SIM_KIND_MIPMAP,     /* cuMipmappedArrayCreate */
    SIM_KIND_VMM_PHYS,   /* cuMemCreate: physical memory behind a handle */
    SIM_KIND_VA_RESERVE, /* cuMemAddressReserve: address space only */
    SIM_KIND_VMM_MAP,    /* cuMemMap: a VA range backed by a VMM_PHYS */
    SIM_KIND_POOL,       /* cuMemAllocAsync, cuMemAllocFromPoolAsync */
    SIM_KIND_IPC_IMPORT, /* cuIpcOpenMemHandle: another process's memory */
    SIM_KIND_VMM_IMPORT, /* cuMemImportFromShareableHandle: a handle to another's VMM_PHYS */
    SIM_KIND_GRAPH_PHYS  /* memory behind a graph allocation node (sim_graph_memory.c) */
};

/* One allocation (or reservation / mapping / import). id 0 = free slot. */
struct sim_alloc {
    uint64_t id;      /* unique over the state's lifetime, never 0 */
    uint64_t va;      /* fake device address (handle value for arrays) */
    uint64_t size;    /* size as the program sees it */
    uint64_t charged; /* bytes charged to the process (0 when in a chunk) */
    uint64_t link;    /* VMM_MAP, VMM_IMPORT: id of the VMM_PHYS; IPC_IMPORT: exporter's id */
    uint64_t via;     /* VMM_MAP: the handle it was mapped through */
    int32_t proc;     /* process slot */
    int32_t chunk;    /* sub-allocation chunk, or -1 */
    int32_t ctx;      /* owning context (process-local index), or -1 */
    int32_t refs;     /* VMM_PHYS: handle + mappings; IPC_IMPORT: opens */
    uint8_t dev;
    uint8_t kind;
    uint8_t legacy;   /* allocated through the 32-bit API */
    uint8_t released; /* VMM_PHYS: cuMemRelease called, waits for unmaps */
    uint16_t handles; /* VMM_PHYS, VMM_IMPORT: handle references (made, imported, retained) */
};

/* A 2 MiB chunk from which one context's small allocations are carved. */
struct sim_chunk {
    uint64_t va;
    uint64_t top; /* bump offset; space is reused only once the chunk empties */
    int32_t proc; /* -1 = free */
    int32_t ctx;
    int32_t live; /* allocations still inside */
    uint8_t dev;
    uint8_t legacy;
    uint8_t pad[2];
};

/* A collective kernel in a process's queue (sim_timeline.h): the process
 * spins there until all ranks of its group have reached their seq-th one. */
#define SIM_COLL_QUEUE 64 /* collectives queued per process and device */
#define SIM_COLL_GROUPS 8
#define SIM_COLL_MIN_RANKS 2
#define SIM_COLL_MAX_RANKS 8
struct sim_coll {
    uint64_t at;      /* the process's done work when its queue reaches it */
    uint32_t group;   /* 0..SIM_COLL_GROUPS-1 */
    uint32_t ranks;   /* processes that must reach it */
    uint32_t seq;     /* the process's seq-th collective of the group, from 0 */
    uint32_t arrived; /* the queue has reached it: the process spins */
};

/* Idle device time in a process's queue (sim_tl_submit_graph): the part
 * [at, at + ns) of its work counter passes as time without a kernel. */
#define SIM_GAP_QUEUE 64 /* gaps queued per process and device */
struct sim_gap {
    uint64_t at;
    uint64_t ns;
};

/* Per process and device: the work it has given the device and how much of
 * it is done, both in nanoseconds of exclusive device time (sim_timeline.c). */
#define SIM_BP_RING 256
struct sim_work {
    uint64_t submitted;   /* ns of work launched, cumulative */
    uint64_t done;        /* ns of work executed, cumulative; <= submitted */
    uint64_t busy;        /* wall ns this process's kernels ran (time-sliced share) */
    uint64_t period_busy; /* busy in the current NVML sample period */
    uint32_t bp_head;     /* breakpoints written (ring index = bp_head % SIM_BP_RING) */
    uint32_t pad;
    /* (time, done) points: done(t) is linear between consecutive ones. */
    uint64_t bp_t[SIM_BP_RING];
    uint64_t bp_done[SIM_BP_RING];
    /* Collectives not released yet, oldest first (ring of head..tail). */
    uint32_t coll_head;
    uint32_t coll_tail;
    struct sim_coll coll[SIM_COLL_QUEUE];
    /* Idle gaps not passed yet, oldest first (ring of head..tail). */
    uint32_t gap_head;
    uint32_t gap_tail;
    struct sim_gap gap[SIM_GAP_QUEUE];
};

/* A process is (pidns, ns_pid, start_time): two containers may both run a
 * pid 7. It is alive while it holds the write lock on byte SIM_LIVE_BYTE(slot)
 * of the state file (an open-file-description lock, which the kernel drops
 * when the process dies, in whatever pid namespace), so no process has to see
 * another's /proc. */
struct sim_proc {
    int32_t pid;                        /* what NVML reports (see sim_proc_nvml_pid); 0 = free slot */
    int32_t ns_pid;                     /* getpid() in its own pid namespace */
    uint64_t pidns;                     /* inode of /proc/self/ns/pid */
    uint64_t start_time;                /* /proc/self/stat field 22 */
    uint64_t used[SIM_MAX_DEVICES];     /* bytes charged, overhead included */
    uint32_t contexts[SIM_MAX_DEVICES]; /* live contexts per device */
    uint64_t va_next;
    uint64_t va32_next;
    uint32_t coll_next[SIM_COLL_GROUPS]; /* collectives launched per group: the next one's seq */
    struct sim_work work[SIM_MAX_DEVICES];
};

/* One NVML per-process utilisation sample (nvmlDeviceGetProcessUtilization). */
#define SIM_UTIL_SAMPLES 256
#define SIM_UTIL_PERIOD_NS 100000000ULL /* NVML sample period of the sim by default: 100 ms */
/* nvmlDeviceGetPowerUsage is a mean over the last second (since Ampere),
 * where utilisation covers one sample period: on an H200 the draw took a
 * second to follow a load that stopped (docs/compute.md, the power
 * correction). The device's utilisation of the periods in that second is
 * kept for it: up to SIM_POWER_PERIODS of them. */
#define SIM_POWER_SPAN_NS 1000000000ULL
#define SIM_POWER_PERIODS 128
struct sim_util_sample {
    uint32_t pid;
    uint32_t sm_util; /* percent of the period the process's kernels ran */
    uint64_t ts_us;   /* end of the period, CLOCK_MONOTONIC microseconds */
};

/* Per-device state: memory, and the kernel timeline (sim_timeline.c). */
struct sim_device {
    uint64_t total;
    uint64_t reserved[15];
    uint64_t tl_last_ns;      /* the timeline is computed up to here */
    uint64_t tl_busy_ns;      /* wall ns with at least one kernel running */
    uint64_t tl_period_start; /* start of the current sample period */
    uint64_t tl_period_busy;  /* device busy ns in it */
    uint32_t tl_last_util;    /* device utilisation of the last full period, percent */
    uint32_t tl_sample_head;  /* samples written (ring index = head % SIM_UTIL_SAMPLES) */
    int32_t tl_last_proc;     /* the process whose kernels ran last; -1: none yet */
    int32_t tl_owner;         /* with time slices: the process whose slice runs; -1: none yet */
    uint64_t tl_slice_end;    /* ... and when its slice ends */
    uint32_t tl_speed_ppm;    /* work per device ns, ppm of the rate fully busy (the clock model); 0: 1e6 */
    uint32_t tl_util_head;    /* periods recorded in tl_util_hist (ring index = head % SIM_POWER_PERIODS) */
    uint8_t tl_util_hist[SIM_POWER_PERIODS]; /* the device's utilisation of each period, percent */
    struct sim_util_sample samples[SIM_UTIL_SAMPLES];
};

struct sim_state {
    uint64_t magic;
    uint32_t version;
    uint32_t size; /* sizeof(struct sim_state) of the creator */
    pthread_mutex_t lock;
    uint32_t ndevices;
    uint32_t alloc_hwm; /* allocs[] is empty from here on */
    uint32_t chunk_hwm;
    uint32_t switch_loss_pct;  /* time-slicing loses this much of the device (sim_timeline.h) */
    uint32_t nvml_snapshot;    /* per-process samples as an H100 gave them (sim_timeline.h) */
    uint32_t timeslice_us;     /* 0: processor sharing; else round-robin slices this long (sim_timeline.h) */
    uint32_t mps;              /* an MPS server owns the samples (sim_timeline.h) */
    uint32_t nvml_period_ms;   /* NVML sample period; 0: SIM_UTIL_PERIOD_NS (sim_util_period) */
    uint32_t nvml_read_us;     /* how long a read of the per-process samples takes (sim_nvml.c) */
    uint32_t nvml_read_meet;   /* that many such reads meet once, each waiting for the rest (sim_nvml.c) */
    uint32_t meet_in;          /* reads that came to that meeting */
    uint32_t meet_over;        /* the meeting took place, or a read gave up waiting for it */
    uint32_t event_ns;         /* device time an event record takes on its stream (sim_launch.c) */
    uint32_t nvml_short_count; /* a buffer too small for the samples leaves their count unsaid (sim_nvml.c) */
    uint32_t pageable_access;  /* the device reaches any host memory, as HMM lets it (sim_host_memory.c) */
    uint32_t power_instant;    /* NVML has the instantaneous power field (sim_nvml.c) */
    uint32_t nvml_host_pids;   /* NVML names every process by its host pid (sim_proc_pid_seen) */
    uint64_t ctx_overhead;
    uint64_t power_dyn_mw; /* power drawn above idle while busy (NVML power model) */
    uint64_t next_id;
    struct sim_device dev[SIM_MAX_DEVICES];
    struct sim_proc procs[SIM_MAX_PROCS];
    struct sim_chunk chunks[SIM_MAX_CHUNKS];
    struct sim_alloc allocs[SIM_MAX_ALLOCS];
};

/* Configuration read from the environment when a state is created. */
struct sim_config {
    uint32_t ndevices;
    uint64_t mem;
    uint64_t ctx_overhead;
    uint64_t power_dyn_mw;
    uint32_t switch_loss_pct;
    uint32_t nvml_snapshot;
    uint32_t timeslice_us;
    uint32_t mps;
    uint32_t nvml_period_ms;
    uint32_t nvml_read_us;
    uint32_t nvml_read_meet;
    uint32_t event_ns;
    uint32_t nvml_short_count;
    uint32_t pageable_access;
    uint32_t power_instant;
    uint32_t nvml_host_pids;
};

/* The NVML power model: a device draws SIM_IDLE_POWER_MW plus power_dyn_mw x
 * its busy fraction of the last sample period x f^SIM_CLOCK_K, against a limit
 * of SIM_POWER_LIMIT_MW (an H200's figures); f is its clock over the highest.
 * power_dyn_mw comes from GPUSLICE_SIM_POWER_DYN (watts, default 400: never
 * over the limit, f = 1). Where it is more than the limit leaves above idle,
 * the clock model holds: each sample period the clock is set as high as
 * keeps the last period's busy fraction within the limit, and work runs at
 * (f / f_full)^SIM_CLOCK_A of its rate fully busy (f_full: the clock fully
 * busy). So a duty-cycled device does more per busy second than a full one,
 * as an H100 and an H200 did under caps (bench/results/compute-2026-11-27h.md:
 * their draw grew as f^1.45-1.6, their matmul's speed as f^0.56-0.77). */
#define SIM_IDLE_POWER_MW 100000ULL
/* What a device draws in the sample periods before its first work: an H200
 * with no context read 79-80 W, below what the same card drew idle between
 * a tenant's kernels (bench/results/compute-2026-12-05.md §1). */
#define SIM_UNUSED_POWER_MW 80000ULL
#define SIM_POWER_LIMIT_MW 700000ULL
#define SIM_DEFAULT_POWER_DYN_MW 400000ULL
#define SIM_CLOCK_K 1.6
#define SIM_CLOCK_A 0.75
#define SIM_PPM 1000000ULL

/* The NVML sample period of a state (GPUSLICE_SIM_NVML_PERIOD_MS). */
static inline uint64_t sim_util_period(const struct sim_state *st)
{
    return st->nvml_period_ms ? (uint64_t)st->nvml_period_ms * 1000000ULL : SIM_UTIL_PERIOD_NS;
}

/* Reads GPUSLICE_SIM_*; prints a message naming the variable and returns -1
 * on an invalid value. */
int sim_config_from_env(struct sim_config *cfg);
/* The whole number in environment variable name, dflt where unset: 0, or
 * -1 after saying on stderr why its value (outside min..max, in unit) was
 * refused. */
int sim_env_uint(const char *name, uint64_t dflt, uint64_t min, uint64_t max, const char *unit, uint64_t *out);
/* Parses "123", "80GiB", "512M", ...; binary units. 0 on success. */
int sim_parse_bytes(const char *text, uint64_t *out);

/* Attaches to the state named by GPUSLICE_SIM_STATE, or a process-private
 * one. Returns NULL after printing why. Idempotent per process. */
struct sim_state *sim_state_attach(void);
/* Maps an existing state file without creating it (for tools). */
struct sim_state *sim_state_open_existing(const char *path);
/* Forgets the attachment (used after fork so the child starts afresh). */
void sim_state_detach(void);

/* Locks the state, repairing it when a holder died, and drops every process
 * that has exited. Returns 0 or -1. */
int sim_state_lock(struct sim_state *st);
void sim_state_unlock(struct sim_state *st);

/* Slot p's liveness byte: past the end of the state file, where nothing is mapped. */
#define SIM_LIVE_BYTE(p) ((off_t)sizeof(struct sim_state) + (off_t)(p))
/* The pid of a process in the host's pid namespace when it cannot know it
 * (a container with a /proc of its own): this plus its slot, above any pid a
 * test's process gets and below SIM_MPS_SERVER_PID. */
#define SIM_FOREIGN_PID_BASE 4000000
/* The calling process's slot (registered on first use), or -1 when full.
 * Call with the lock held. */
int sim_proc_self(struct sim_state *st);
/* The pid NVML gives the calling process for the process whose host pid
 * (struct sim_proc's pid) is pid: a process of the caller's pid namespace
 * by its pid there, as driver 580 does; another's, or any with
 * GPUSLICE_SIM_NVML_HOST_PIDS (older drivers), by the host's. Lock held. */
int32_t sim_proc_pid_seen(const struct sim_state *st, int32_t pid);
/* Frees everything a process slot holds. Lock held. */
void sim_proc_release(struct sim_state *st, int slot);

/* Device-wide bytes in use: all live processes. Lock held. */
uint64_t sim_device_used(const struct sim_state *st, int dev);

/* The one UUID of device i, as 16 raw bytes and as NVML's string. */
void sim_device_uuid_bytes(int dev, unsigned char out[16]);
void sim_device_uuid_string(int dev, char *out, size_t len);
#define SIM_DEVICE_NAME "NVIDIA H200 (gpuslice sim)"
#define SIM_DRIVER_VERSION_STRING "580.65.06"

#endif
