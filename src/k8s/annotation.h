/*
 * The pod annotations of the node agent's contract with the scheduler
 * extender (docs/annotations.md):
 *
 *   gpuslice.io/assignment  written by the extender at bind time:
 *     {"v":1,"node":"n1","gpus":[{"uuid":"GPU-..","memory_mib":4096,"cores":30}],
 *      "replicas":["GPU-..::3"],"mode":"cap"}
 *   gpuslice.io/allocated   written by the node agent once Allocate answered:
 *     {"v":1,"node":"n1","replicas":["GPU-..::3"],"time":"2024-..Z"}
 *
 * Replica device IDs are "<GPU uuid>::<k>", k in 0..replicas-1, so an ID
 * names its GPU by itself. replicas[i] must be a replica of gpus[i].
 */
#ifndef GPUSLICE_DP_ANNOTATION_H
#define GPUSLICE_DP_ANNOTATION_H

#include <stddef.h>
#include <stdint.h>

#define GS_ANN_ASSIGNMENT "gpuslice.io/assignment"
#define GS_ANN_ALLOCATED "gpuslice.io/allocated"
#define GS_ANN_VERSION 1
#define GS_ASSIGN_MAX_GPUS 16
#define GS_UUID_MAX 96
#define GS_REPLICA_ID_MAX 128
#define GS_MAX_MEMORY_MIB (1ULL << 30) /* 1 PiB: anything above is a typo */

struct gs_assign_gpu {
    char uuid[GS_UUID_MAX];
    uint64_t memory_mib; /* > 0 */
    unsigned cores;      /* 0 = no compute limit, else 1..100 */
    char replica[GS_REPLICA_ID_MAX];
};

struct gs_assignment {
    int ngpus;
    struct gs_assign_gpu gpus[GS_ASSIGN_MAX_GPUS];
    char node[256]; /* "" if the writer left it out */
    int share_mode; /* 0 cap, 1 share */
};

/* Parses an assignment annotation value. Returns 0, or -1 with a one-line
 * reason in err. Never reads past len; text need not be NUL-terminated. */
int gs_assignment_parse(const char *text, size_t len, struct gs_assignment *out, char *err, size_t errlen);

/* Splits a replica ID "<uuid>::<k>". Returns 0 and copies the uuid, or -1. */
int gs_replica_split(const char *id, char *uuid, size_t uuidlen, unsigned *k);

/* Parses an allocated annotation; fills replicas (up to max) and returns
 * their count, or -1 with err. */
int gs_allocated_parse(const char *text, size_t len, char (*replicas)[GS_REPLICA_ID_MAX], int max, char *err,
                       size_t errlen);

/* The assignment as it applies to the replicas a pod really holds (kubelet
 * may have given it replicas of other GPUs than the extender chose, see
 * docs/device-plugin.md). held: n device IDs, one per GPU, in the order
 * recorded in gpuslice.io/allocated. Entry i of out is held[i]'s GPU and
 * replica; its memory/cores are those of a's entry for the same GPU when
 * a names that GPU, else those of the first of a's entries for GPUs not
 * held, in a's order. The node agent (limits) and the extender (usage)
 * both use this, so they agree. Returns 0, or -1 with err when n differs
 * from a's GPU count or an ID is malformed or two are on one GPU. */
int gs_assignment_rebind(const struct gs_assignment *a, const char (*held)[GS_REPLICA_ID_MAX], int n,
                         struct gs_assignment *out, char *err, size_t errlen);

#endif
