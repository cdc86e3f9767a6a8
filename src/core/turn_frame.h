/*
 * The turn frame: when several containers held to their limits take turns
 * on one GPU, whose turn it is follows the wall clock, not who asked first.
 * Time is cut into frames of GS_TURN_FRAME_NS; each frame gives every
 * contending container one slot, in the order of their container ids, as
 * long as its claim's part of the frame (of the claims' total, if they
 * claim more than the whole GPU); the frame's rest is nobody's. A job with a rank on each of
 * several GPUs meets the same containers with the same claims in each
 * GPU's ledger, so its slots fall at the same moments on all of them: its
 * ranks run together and its collectives do not spin while a peer waits on
 * another GPU for a turn that another container holds there (two TP jobs
 * capped 30 / 70 on 2 x H200 got 0.12-0.14 / 0.31-0.39 when each GPU's
 * turns went to whoever asked first; docs/compute.md, "Several GPUs").
 * Pure logic, unit-tested; the device ledger (ledger.c) applies it.
 */
#ifndef GPUSLICE_TURN_FRAME_H
#define GPUSLICE_TURN_FRAME_H

#include <stdint.h>

#define GS_TURN_FRAME_NS 50000000ULL /* one duty cycle (GS_LIM_DEFAULT_PERIOD_NS) */
#define GS_TURN_MAX_CLAIM 1000000U   /* the whole GPU, in ppm */

/* A contending container: its id and the part of the GPU it is allowed
 * now (a capped container's token rate), which sizes its slot. Share
 * containers claim 0 and take no slot (gs_compute_ledger_claim: their
 * turns go to whoever asks first); the ledger leaves claims of 0 out.
 * Claims outside [1, GS_TURN_MAX_CLAIM] are clamped into it, so a forged
 * member gets no more of the frame than a container allowed the whole GPU
 * would. */
struct gs_turn_claim {
    uint64_t container;
    uint32_t claim_ppm;
};

/* Where `me` stands at now. */
struct gs_turn_slot {
    uint64_t owner;    /* whose slot now falls in; 0: the frame's rest, nobody's */
    uint64_t end_ns;   /* when the owner's slot (or the rest) ends */
    uint64_t mine_ns;  /* when me's slot begins (now, if it is me's) */
    uint64_t mine_end; /* ... and ends */
    int mine;          /* the slot now is me's */
};

/* The claims as far as they can be trusted, in place (n: their count;
 * room for n + 1). Any container can write any member record of a device
 * ledger, so a record naming us, or a neighbour with a larger claim than
 * its own, or a container nobody knows, can be forged:
 * - me's claim is my_claim (0: me takes no slot), whatever records say;
 * - a container in trusted (its region beside ours, or the node's roster,
 *   verified it: compute_outer.c) claims at most its entry's claim;
 * - the others, unverified, share what the trusted claims leave of the
 *   whole GPU: scaled down together where they claim more.
 * Verified containers thus keep slots as long as their claims, however
 * many claims are forged (a forged claim of the whole GPU cut a capped
 * neighbour's slot, and its cap, by its claim's part of the total). */
unsigned gs_turn_trusted_claims(struct gs_turn_claim *claims, unsigned n, uint64_t me, uint32_t my_claim,
                                const struct gs_turn_claim *trusted, unsigned ntrusted);

/* Sorts and merges claims (a container that appears twice counts once, at
 * its larger claim) and places now in the frame. Returns 1 with *out set
 * if at least two containers contend and me is one of them; 0 when there
 * is no frame to follow (the turn goes to whoever asks). n is updated to
 * the count of distinct containers. */
int gs_turn_frame(struct gs_turn_claim *claims, unsigned *n, uint64_t me, uint64_t now, struct gs_turn_slot *out);

#endif
