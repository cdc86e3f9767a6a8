/* What the other containers of a device ledger claim, weighed: their
 * weights' parts, who wants more, the share targets by water-filling and
 * the claims a container can verify (docs/compute.md, "Share targets",
 * "Claims, not facts"). */
#include "limiter_internal.h"

/* Our weight (at least 1) plus the n others', summed. */
static uint64_t weights_of(unsigned weight, const struct gs_lim_demand *others, unsigned n)
{
    uint64_t sum = weight ? weight : 1;
    for (unsigned i = 0; i < n; i++)
        sum += others[i].weight;
    return sum;
}

uint32_t gs_lim_weight_part(unsigned weight, const struct gs_lim_demand *others, unsigned n)
{
    return (uint32_t)((uint64_t)(weight ? weight : 1) * GS_LIM_PPM / weights_of(weight, others, n));
}

int gs_lim_share_wants_more(unsigned weight, uint64_t use_ppm, uint64_t queued_ppm, const struct gs_lim_demand *others,
                            unsigned n)
{
    return n > 0 && (use_ppm > gs_lim_weight_part(weight, others, n) || queued_ppm >= GS_LIM_QUEUED_PPM);
}

unsigned gs_lim_count_busy(const struct gs_lim_demand *others, unsigned n, uint64_t within_ns)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++)
        k += others[i].quiet_ns <= within_ns && (others[i].wants_more || others[i].use_ppm >= GS_LIM_SEEN_PPM);
    return k;
}

int gs_lim_any_wants_more(const struct gs_lim_demand *others, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (others[i].wants_more)
            return 1;
    return 0;
}

int gs_lim_yields(unsigned weight, uint64_t use_ppm, const struct gs_lim_demand *others, unsigned n)
{
    if (n == 0 || use_ppm <= gs_lim_weight_part(weight, others, n))
        return 0;
    uint64_t sum = weights_of(weight, others, n);
    for (unsigned i = 0; i < n; i++) {
        uint64_t part = (uint64_t)others[i].weight * GS_LIM_PPM / sum;
        if (!others[i].wants_more && others[i].use_ppm >= GS_LIM_SEEN_PPM && others[i].use_ppm < part)
            return 1;
    }
    return 0;
}

uint64_t gs_lim_bound_use(uint64_t charged_ppm, uint64_t dev_ppm, const struct gs_lim_demand *others, unsigned n)
{
    uint64_t theirs = gs_lim_uses_of(others, n);
    uint64_t left = dev_ppm > theirs ? dev_ppm - theirs : 0;
    return charged_ppm < left ? charged_ppm : left;
}

uint64_t gs_lim_device_busy(uint64_t dev_ppm, uint64_t our_use_ppm, const struct gs_lim_demand *others, unsigned n,
                            uint64_t interval_ns)
{
    uint64_t sum = our_use_ppm + gs_lim_active_uses_of(others, n, interval_ns);
    if (sum > GS_LIM_PPM)
        sum = GS_LIM_PPM;
    return sum > dev_ppm ? sum : dev_ppm;
}

uint32_t gs_lim_share_target(unsigned weight, uint64_t busy_others_weight)
{
    if (busy_others_weight == 0 || weight == 0)
        return GS_LIM_PPM;
    return (uint32_t)((uint64_t)weight * GS_LIM_PPM / (weight + busy_others_weight));
}

/* Whether other i settles at the water level left / wsum: a capped one
 * always does (at its cap, or at its use if it wants no more); another if
 * it wants no more than it uses, and uses no more than its weight's part
 * of what is left. */
static int settles(const struct gs_lim_demand *o, uint64_t left, uint64_t wsum)
{
    return o->cap_ppm ||
           (!o->wants_more && (unsigned __int128)o->use_ppm * wsum <= (unsigned __int128)left * o->weight);
}

/* What a settled other keeps. */
static uint64_t settled_use(const struct gs_lim_demand *o)
{
    return o->cap_ppm && (o->wants_more || o->use_ppm > o->cap_ppm) ? o->cap_ppm : o->use_ppm;
}

uint32_t gs_lim_share_fill(unsigned weight, const struct gs_lim_demand *others, unsigned n)
{
    /* water-filling: the level only rises as tenants under it settle, so
     * the settled set is recomputed at each level until it stays the same
     * (no per-entry state: any n) */
    uint64_t all = weights_of(weight, others, n), left = GS_LIM_PPM, wsum = all;
    unsigned settled = 0;
    for (;;) {
        uint64_t used = 0, capped = 0, wset = 0;
        unsigned k = 0;
        for (unsigned i = 0; i < n; i++)
            if (settles(&others[i], left, wsum)) {
                *(others[i].cap_ppm ? &capped : &used) += settled_use(&others[i]);
                wset += others[i].weight;
                k++;
            }
        if (k == settled)
            break;
        settled = k;
        used += capped < GS_LIM_PPM - GS_LIM_CAPS_LEAVE_PPM ? capped : GS_LIM_PPM - GS_LIM_CAPS_LEAVE_PPM;
        left = used < GS_LIM_PPM ? GS_LIM_PPM - used : 0;
        wsum = all - wset;
    }
    int caps_want = 0;
    for (unsigned i = 0; i < n; i++)
        caps_want |= others[i].cap_ppm && others[i].wants_more;
    if (settled == n && !caps_want)
        return GS_LIM_PPM; /* nobody else wants more than they use */
    uint64_t mine = left * (weight ? weight : 1) / (wsum ? wsum : 1);
    return (uint32_t)(mine > GS_LIM_PPM ? GS_LIM_PPM : mine);
}

unsigned gs_lim_trusted_demands(const struct gs_lim_claim *c, unsigned n, int drop_unverified, int64_t dev_ppm,
                                struct gs_lim_demand *out)
{
    struct gs_lim_demand rest = { 0, 0, 0, 0, UINT64_MAX };
    uint64_t rest_use = 0;
    unsigned k = 0, unverified = 0;
    for (unsigned i = 0; i < n; i++) {
        if (c[i].verified_weight && k < GS_LIM_MAX_DEMANDS - 1) {
            out[k] = c[i].d;
            out[k].cap_ppm = c[i].verified_cap_ppm;
            out[k++].weight = c[i].verified_weight;
            continue;
        }
        unverified++;
        rest.weight = c[i].d.weight > rest.weight ? c[i].d.weight : rest.weight;
        rest_use += c[i].d.use_ppm;
        rest.wants_more |= c[i].d.wants_more;
        rest.quiet_ns = c[i].d.quiet_ns < rest.quiet_ns ? c[i].d.quiet_ns : rest.quiet_ns;
    }
    if (unverified == 0 || drop_unverified)
        return k;
    uint64_t seen = dev_ppm >= 0 && (uint64_t)dev_ppm < GS_LIM_PPM ? (uint64_t)dev_ppm : GS_LIM_PPM;
    rest.weight = rest.weight < GS_LIM_DEFAULT_WEIGHT ? rest.weight : GS_LIM_DEFAULT_WEIGHT;
    rest.use_ppm = (uint32_t)(rest_use < seen ? rest_use : seen);
    out[k++] = rest;
    return k;
}
