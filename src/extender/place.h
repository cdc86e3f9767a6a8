/* Placement of one pod on one node through the policy engine, honouring the
 * pod's scheduling annotation (policies, models, GPUs to use or avoid). */
#ifndef GPUSLICE_EXT_PLACE_H
#define GPUSLICE_EXT_PLACE_H

#include <stdbool.h>
#include <stddef.h>

#include "podspec.h"
#include "state.h"

struct ext_want {
    struct gs_podspec ps;
    gs_request r;
    gs_policy_kind policy, gpu_policy;
};

/* Builds the engine request for ps against st's model table. */
void ext_want_init(const struct ext_state *st, const struct gs_podspec *ps, struct ext_want *w);

/* GS_FIT, or a reason with a text naming it; *unresolvable says whether
 * evicting pods could never make it fit. */
gs_reject ext_explain(struct ext_state *st, const struct ext_want *w, int idx, char *why, size_t whylen,
                      bool *unresolvable);

/* Scores node idx under policy k; false when it does not fit. */
bool ext_score(struct ext_state *st, const struct ext_want *w, int idx, gs_policy_kind k, double *score,
               gs_placement *pl);

#endif
