/*
 * The process's membership in each device's ledger (src/core/ledger.h):
 * joined at its first limited launch on the device (again after fork).
 */
#ifndef GPUSLICE_COMPUTE_LEDGER_H
#define GPUSLICE_COMPUTE_LEDGER_H

#include <stdint.h>
#include <sys/stat.h>

#include "../core/ledger.h"
#include "../core/region.h"

/* Joins device d's ledger (idempotent per fork generation). */
void gs_compute_ledger_join(struct gs_region *r, int d);

/* Device d's ledger and this process's slot in it, or NULL. */
struct gs_ledger *gs_compute_ledger_of(int d, int *slot);

/* Frees device d's dead and forged members (the outer loop, before it
 * reads the others' demand). */
void gs_compute_ledger_reap(int d);

/* Whether a live member of another container of device d's ledger for
 * which counts holds names pid (gs_ledger_pid_named). */
int gs_compute_ledger_pid_named(int d, uint32_t pid, int (*counts)(uint64_t c, void *ctx), void *ctx);

/* How many other containers' live members on device d for which counts
 * holds number their pids in another pid namespace than ours
 * (gs_ledger_pidns_others). */
unsigned gs_compute_ledger_pidns_others(int d, int (*counts)(uint64_t c, void *ctx), void *ctx);

/* The other containers of device d's ledger that showed demand since
 * `since` (wants_more: waited for tokens since wants_since), and our own
 * container's use and last wait published for them. */
unsigned gs_compute_ledger_claims(int d, uint64_t since, uint64_t wants_since, struct gs_ledger_claim *out,
                                  unsigned max);

/* The ledger id of the container whose region file is st. */
uint64_t gs_compute_ledger_container_id(const struct stat *st);

/* Whether the ledgers lie in our region's own directory (the flat layout),
 * where every container that may join them has its region beside ours. */
int gs_compute_ledger_beside_regions(void);
void gs_compute_ledger_publish(int d, uint32_t use_ppm, uint64_t wants_ns);

/* This process waited for tokens on device d at ns: the other containers
 * see it at once, not at our next outer run (a share pair whose outer
 * loops ran half a period apart read each other's wants a run late, and
 * the side under its weight took the whole GPU every other run). */
void gs_compute_ledger_wanted(int d, uint64_t ns);

/* Whether our container takes turns on device d: held to its limit there,
 * or a job whose collectives spun for their peers lately (out of step with
 * its ranks on other GPUs, which the turn frame puts back in step), or a
 * rank (a process that launched collectives) of a container held to its
 * limit on another of its GPUs. A job held back on one GPU takes its slots
 * on all of them: where its ranks ran free on some, the other container's
 * frame there lost it and that container's ranks took turns first come on
 * those GPUs and by the frame on the rest. A process under its limit that
 * is no rank never waits behind another's windows. */
int gs_compute_contends(int d, const struct gs_lim_account *a, uint64_t now);

/* Whether this process is a rank of a job (gs_compute_is_rank) whose
 * container is held to its limit on a GPU other than d: it takes turns on
 * d too, and its windows there end rather than go on past their length. */
int gs_compute_held_elsewhere(int d, uint64_t now);

/* The other containers of device d's ledger whose claims were verified,
 * each with the most it may claim of the turn frame (gs_ledger_trust). */
void gs_compute_ledger_trust(int d, const struct gs_turn_claim *trusted, unsigned n);

/* What our container claims of the turn frame (turn_frame.h): a capped
 * account its rate; a share-mode one nothing (it takes first-come turns:
 * its target moves with the others' demand every outer run, and slots
 * sized by it upset the water-filling that sets it). */
uint32_t gs_compute_ledger_claim(const struct gs_lim_account *a);

/* Where our container stands in device d's turn frame at now
 * (gs_ledger_frame, with gs_compute_ledger_claim): 1 with *f set, 0 when
 * there is no frame to follow. */
int gs_compute_ledger_frame(int d, const struct gs_lim_account *a, uint64_t now, struct gs_turn_slot *f);

#endif
