/*
 * The turn frame (turn_frame.h).
 */
#include "turn_frame.h"

#include <stdlib.h>

static int by_container(const void *a, const void *b)
{
    uint64_t x = ((const struct gs_turn_claim *)a)->container, y = ((const struct gs_turn_claim *)b)->container;
    return x < y ? -1 : x > y;
}

static uint32_t clamp_claim(uint32_t c)
{
    return c < 1 ? 1 : c > GS_TURN_MAX_CLAIM ? GS_TURN_MAX_CLAIM : c;
}

/* Sorts by container and merges repeats in place; returns the new count. */
static unsigned merge(struct gs_turn_claim *c, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        c[i].claim_ppm = clamp_claim(c[i].claim_ppm);
    qsort(c, n, sizeof *c, by_container);
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        if (k > 0 && c[k - 1].container == c[i].container) {
            if (c[i].claim_ppm > c[k - 1].claim_ppm)
                c[k - 1].claim_ppm = c[i].claim_ppm;
        } else {
            c[k++] = c[i];
        }
    }
    return k;
}

/* The most trusted lets container claim; 0: not trusted. */
static uint32_t trusted_max(const struct gs_turn_claim *trusted, unsigned n, uint64_t container)
{
    for (unsigned i = 0; i < n; i++)
        if (trusted[i].container == container)
            return trusted[i].claim_ppm;
    return 0;
}

unsigned gs_turn_trusted_claims(struct gs_turn_claim *claims, unsigned n, uint64_t me, uint32_t my_claim,
                                const struct gs_turn_claim *trusted, unsigned ntrusted)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        if (claims[i].container == me)
            continue;
        uint32_t most = trusted_max(trusted, ntrusted, claims[i].container);
        if (most && claims[i].claim_ppm > most)
            claims[i].claim_ppm = most;
        claims[k++] = claims[i];
    }
    if (my_claim)
        claims[k++] = (struct gs_turn_claim){ me, my_claim };
    k = merge(claims, k);
    uint64_t verified = 0, unverified = 0;
    for (unsigned i = 0; i < k; i++)
        *(claims[i].container == me || trusted_max(trusted, ntrusted, claims[i].container) ? &verified : &unverified) +=
            claims[i].claim_ppm;
    uint64_t left = verified < GS_TURN_MAX_CLAIM ? GS_TURN_MAX_CLAIM - verified : 0;
    if (unverified <= left)
        return k;
    for (unsigned i = 0; i < k; i++)
        if (claims[i].container != me && !trusted_max(trusted, ntrusted, claims[i].container))
            claims[i].claim_ppm = (uint32_t)(claims[i].claim_ppm * left / unverified);
    return merge(claims, k); /* clamps a part scaled to 0 to the least claim */
}

/* Offset of the start of slot i into the frame: slots are as long as
 * their claims' parts of the frame, the frame's rest nobody's; or, claimed
 * past the whole GPU, their parts of the claims' total. */
static uint64_t slot_start(const struct gs_turn_claim *c, unsigned i, uint64_t total)
{
    uint64_t before = 0;
    for (unsigned j = 0; j < i; j++)
        before += c[j].claim_ppm;
    uint64_t scale = total > GS_TURN_MAX_CLAIM ? total : GS_TURN_MAX_CLAIM;
    return (uint64_t)((unsigned __int128)GS_TURN_FRAME_NS * before / scale);
}

int gs_turn_frame(struct gs_turn_claim *claims, unsigned *n, uint64_t me, uint64_t now, struct gs_turn_slot *out)
{
    unsigned k = merge(claims, *n);
    *n = k;
    uint64_t total = 0;
    unsigned mine = k;
    for (unsigned i = 0; i < k; i++) {
        total += claims[i].claim_ppm;
        if (claims[i].container == me)
            mine = i;
    }
    if (k < 2 || mine == k)
        return 0;
    uint64_t frame = now - now % GS_TURN_FRAME_NS, at = now % GS_TURN_FRAME_NS;
    unsigned owner = 0;
    while (owner < k && slot_start(claims, owner + 1, total) <= at)
        owner++;
    /* owner == k: the frame's rest, nobody's, until the next frame */
    out->owner = owner < k ? claims[owner].container : 0;
    out->end_ns = owner < k ? frame + slot_start(claims, owner + 1, total) : frame + GS_TURN_FRAME_NS;
    uint64_t from = slot_start(claims, mine, total), to = slot_start(claims, mine + 1, total);
    out->mine = mine == owner;
    if (mine == owner) {
        out->mine_ns = now;
        out->mine_end = out->end_ns;
    } else {
        uint64_t base = from > at ? frame : frame + GS_TURN_FRAME_NS;
        out->mine_ns = base + from;
        out->mine_end = base + to;
    }
    return 1;
}
