/*
 * The node agent's roster of one GPU: which containers it placed there and
 * the most each may weigh in share mode (docs/compute.md, "The roster").
 *
 * In the agent's layout a container cannot see the others' regions, and the
 * device ledger is a file every tenant on the GPU can write: its members'
 * weights are claims (gs_lim_trusted_demands). The roster is the agent's
 * word on them, in a file only the agent writes, mounted read-only into
 * each container of the GPU. A ledger member whose container id is on it
 * counts with the smaller of the weight it claims and the roster's, and is
 * capped if the roster says so.
 *
 * The file is text, every line ending in a newline:
 *   gpuslice-roster 1
 *   <container id: 16 lowercase hex digits> cap <percent 1..100> <key>
 *   <container id> share <weight 1..10000> <key>
 * one line per container (the id is gs_ledger_container_id of its region;
 * the key, the agent's allocation key, lets the agent replace the entry).
 * Anything else, a duplicate id or more than GS_ROSTER_MAX entries makes the
 * whole file malformed: it is then no roster at all.
 */
#ifndef GPUSLICE_ROSTER_H
#define GPUSLICE_ROSTER_H

#include <stddef.h>
#include <stdint.h>

#define GS_ROSTER_MAX 128         /* entries: a ledger's members at most */
#define GS_ROSTER_MAX_BYTES 16384 /* a longer file is malformed */
#define GS_ROSTER_KEY_MAX 32      /* key bytes, its terminator included */
#define GS_ROSTER_HEADER "gpuslice-roster 1\n"
#define GS_ROSTER_FILE "roster" /* its name in the GPU's roster directory */

struct gs_roster_entry {
    uint64_t container;
    uint32_t weight; /* a capped container's cap in percent */
    int capped;
    char key[GS_ROSTER_KEY_MAX];
};

struct gs_roster {
    unsigned n;
    struct gs_roster_entry e[GS_ROSTER_MAX];
};

/* Parses len bytes of text. 0, or -1 with the first fault (its line) in
 * err; r is then empty. */
int gs_roster_parse(const char *text, size_t len, struct gs_roster *r, char *err, size_t errlen);

/* Reads and parses the roster at path, which must be a regular file on a
 * read-only mount (one the container could write would be no word of the
 * agent's). 0, or -1 with the reason in err; r is then empty. Not
 * reentrant (one static read buffer): its callers serialize. */
int gs_roster_load(const char *path, struct gs_roster *r, char *err, size_t errlen);

/* container's entry in r; NULL when it is not on it. */
const struct gs_roster_entry *gs_roster_find(const struct gs_roster *r, uint64_t container);

/* The text of r (header included) into out. 0, or -1 when it does not fit. */
int gs_roster_format(const struct gs_roster *r, char *out, size_t len);

#endif
