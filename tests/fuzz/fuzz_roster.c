/*
 * Fuzzes the roster parser (roster.c) with any bytes as the file's text.
 *
 * Invariants: no crash; a refusal leaves the roster empty and says why in
 * one line; an accepted roster holds at most GS_ROSTER_MAX entries of
 * distinct non-zero ids, weights 1..10000 (caps 1..100), and, the format having one
 * spelling per roster, formats back to exactly the input.
 */
#include "fuzz_target.h"
#include "roster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gs_roster r;
    static char back[GS_ROSTER_MAX_BYTES + 1];
    char err[200] = "";
    if (gs_roster_parse((const char *)data, size, &r, err, sizeof err) != 0) {
        FUZZ_CHECK(r.n == 0);
        fuzz_check_refusal(err, sizeof err);
        return 0;
    }
    FUZZ_CHECK(r.n <= GS_ROSTER_MAX);
    for (unsigned i = 0; i < r.n; i++) {
        FUZZ_CHECK(r.e[i].container != 0);
        FUZZ_CHECK(r.e[i].weight >= 1 && r.e[i].weight <= (r.e[i].capped ? 100U : 10000U));
        FUZZ_CHECK(gs_roster_find(&r, r.e[i].container) == &r.e[i]); /* the first with its id: distinct */
    }
    FUZZ_CHECK(gs_roster_format(&r, back, sizeof back) == 0);
    FUZZ_CHECK(strlen(back) == size && memcmp(back, data, size) == 0);
    return 0;
}
