/* Fuzzes gs_parse_size and gs_format_size. Invariants: no crash; failure leaves *out
 * alone and gives a one-line reason; success round-trips through decimal printing; the
 * formatted size is within half a display digit of the value. */
#include <inttypes.h>
#include <string.h>

#include "fuzz_target.h"
#include "size_parse.h"

#define SENTINEL UINT64_C(0x5a5a5a5a5a5a5a5a)

static void check_failure_message(const char *err, size_t errlen)
{
    size_t n = strlen(err);

    FUZZ_CHECK(n > 0 && n < errlen);
    FUZZ_CHECK(strchr(err, '\n') == NULL);
}

/* Parses gs_format_size's output back and checks it against v. */
static void check_format(uint64_t v)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    char buf[GS_FORMAT_SIZE_MAX];
    char joined[GS_FORMAT_SIZE_MAX];
    uint64_t ip = 0, fp = 0, scale = 1, unit = 1, back = 0;
    unsigned __int128 shown, exact;
    const char *p = buf;
    int n = gs_format_size(v, buf, sizeof(buf));
    int u;
    char *sp;

    FUZZ_CHECK(n > 0 && (size_t)n == strlen(buf));
    for (; *p >= '0' && *p <= '9'; p++)
        ip = ip * 10 + (uint64_t)(*p - '0');
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, scale *= 10)
            fp = fp * 10 + (uint64_t)(*p - '0');
    FUZZ_CHECK(*p == ' ');
    for (u = 0; u < 5 && strcmp(p + 1, units[u]) != 0; u++)
        ;
    FUZZ_CHECK(u < 5);
    unit = UINT64_C(1) << (10 * u);
    FUZZ_CHECK(scale <= 100 && (u > 0 || scale == 1));
    /* |shown - v| <= unit / (2 * scale), computed in units of 1/(2*scale) bytes. */
    shown = ((unsigned __int128)ip * scale + fp) * unit * 2;
    exact = (unsigned __int128)v * scale * 2;
    FUZZ_CHECK((shown > exact ? shown - exact : exact - shown) <= unit);
    /* Without its space the text is in the parser's grammar: if it parses, it agrees. */
    memcpy(joined, buf, (size_t)n + 1);
    sp = strchr(joined, ' ');
    memmove(sp, sp + 1, strlen(sp + 1) + 1);
    if (gs_parse_size(joined, &back, NULL, 0) == 0)
        FUZZ_CHECK((unsigned __int128)back * scale * 2 == shown);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    char err[256];
    char dec[32];
    uint64_t v = SENTINEL, again = SENTINEL;
    int rc;

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    rc = gs_parse_size(text, &v, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || rc == -1);
    /* Same answer with no room for a message, and with a tiny one. */
    FUZZ_CHECK(gs_parse_size(text, &again, NULL, 0) == rc);
    {
        char tiny[5] = "";

        FUZZ_CHECK(gs_parse_size(text, &again, tiny, 1 + size % sizeof(tiny)) == rc);
        FUZZ_CHECK(strlen(tiny) < 1 + size % sizeof(tiny));
    }
    if (rc != 0) {
        FUZZ_CHECK(v == SENTINEL);
        check_failure_message(err, sizeof(err));
    } else {
        FUZZ_CHECK(again == v);
        FUZZ_CHECK(text[0] >= '0' && text[0] <= '9');
        snprintf(dec, sizeof(dec), "%" PRIu64, v);
        FUZZ_CHECK(gs_parse_size(dec, &again, NULL, 0) == 0 && again == v);
        check_format(v);
    }
    /* Formatting any 8 input bytes as a size must also hold up. */
    if (size >= 8) {
        uint64_t raw;

        memcpy(&raw, data, sizeof(raw));
        check_format(raw);
    }
    free(text);
    return 0;
}
