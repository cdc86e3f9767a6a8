/* "Did you mean": the known word closest to a mistyped one. One edit
 * distance for every caller (variables, flags, subcommands), so that all of
 * gpuslice suggests by the same rule. */
#ifndef GPUSLICE_SUGGEST_H
#define GPUSLICE_SUGGEST_H

#include <stddef.h>

/* Words longer than this are not compared (keeps the work table small). */
#define GS_SUGGEST_MAX 64

/* Case-blind Levenshtein distance between a[0..an) and b[0..bn); both must
 * be at most GS_SUGGEST_MAX long. */
size_t gs_edit_distance(const char *a, size_t an, const char *b, size_t bn);

/* The candidate closest to word[0..len) at distance 1 or 2, or NULL; the
 * first of equals wins. cands ends with NULL. */
const char *gs_suggest(const char *word, size_t len, const char *const *cands);

#endif
