/* FGD baseline: choose the placement that grows expected fragmentation
 * least (score = fragmentation before - fragmentation after). */
#include "policy_internal.h"

double gs_score_fgd(gs_engine *e, const gs_node *n, const gs_request *r, const gs_candidate *cand)
{
    gs_view before, after;
    gs_view_of(n, &before);
    after = before;
    gs_view_place(&after, n, r, cand);
    return gs_frag_of(&e->frag, &before) - gs_frag_of(&e->frag, &after);
}
