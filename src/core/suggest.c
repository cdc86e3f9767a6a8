#include "suggest.h"

#include <string.h>

#define GS_SUGGEST_WORST 3 /* suggest only at distance 1 or 2 */

static char fold(char c)
{
    return (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
}

size_t gs_edit_distance(const char *a, size_t an, const char *b, size_t bn)
{
    size_t row[GS_SUGGEST_MAX + 1];

    for (size_t j = 0; j <= bn; j++)
        row[j] = j;
    for (size_t i = 1; i <= an; i++) {
        size_t diag = row[0];

        row[0] = i;
        for (size_t j = 1; j <= bn; j++) {
            size_t up = row[j];
            size_t best = diag + (fold(a[i - 1]) != fold(b[j - 1]));

            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[bn];
}

const char *gs_suggest(const char *word, size_t len, const char *const *cands)
{
    const char *found = NULL;
    size_t best = GS_SUGGEST_WORST;

    if (len > GS_SUGGEST_MAX)
        return NULL;
    for (; *cands; cands++) {
        size_t cl = strlen(*cands);
        if (cl > GS_SUGGEST_MAX || cl + GS_SUGGEST_WORST <= len || len + GS_SUGGEST_WORST <= cl)
            continue; /* the distance is at least the length difference */
        size_t d = gs_edit_distance(word, len, *cands, cl);
        if (d < best) {
            best = d;
            found = *cands;
        }
    }
    return found;
}
