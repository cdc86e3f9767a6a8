/*
 * Fuzzes the device ledger (ledger.c) as a hostile container sees it: a
 * shared file that every tenant on the GPU can write at any moment. The
 * input is a script run against a ledger this process has joined:
 *
 *   [u8 op][u8 arg][u16 delta_us] ...
 *
 * op % 8: 0 patch the mapping (arg bytes at offset delta % size, taken from
 * the script's following bytes), 1 open a window (until = now + arg ms),
 * 2 close one, 3 extend the turn, 4 read the demands, 5 reap, 6 the other
 * readers (busy weight, has_pid, others), 7 open the file anew (a second
 * handle of another container). The clock advances by delta_us each step.
 * The very first byte chooses whether the file starts empty (created
 * here) or holds a forged image of that script's first patches.
 *
 * Invariants: no crash; a ledger of another size or version is refused
 * with a one-line reason (a header that is not a ledger's is laid out
 * afresh); a refused turn never asks for a wait past
 * GS_LEDGER_MAX_HOLD_NS; the demands stay within their documented ranges;
 * the node agent's lay-out (gs_ledger_lay_out) keeps exactly the files an
 * opener takes, and refuses one of another size.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_target.h"
#include "ledger.h"
#include "turn_frame.h"

#define STEP 4

static char ledger_file[64];

/* libFuzzer ends a fixed-count run with exit(): the file goes with it. */
static void remove_ledger(void)
{
    unlink(ledger_file);
}

static const char *ledger_path(void)
{
    if (!ledger_file[0]) {
        snprintf(ledger_file, sizeof ledger_file, "/tmp/gs-fuzz-ledger-XXXXXX");
        int fd = mkstemp(ledger_file);
        FUZZ_CHECK(fd >= 0);
        close(fd);
        FUZZ_CHECK(atexit(remove_ledger) == 0);
    }
    return ledger_file;
}

/* gs_ledger_pid_named's test: never asked of the caller's own container
 * (ctx) or of an empty slot. */
static int not_mine(uint64_t c, void *ctx)
{
    FUZZ_CHECK(c != 0 && c != *(const uint64_t *)ctx);
    return 1;
}

static void check_demands(struct gs_ledger *l, uint64_t container, uint64_t now)
{
    struct gs_lim_demand d[GS_LEDGER_MEMBERS + 1];
    unsigned n = gs_ledger_demands(l, container, now > 1000000000ULL ? now - 1000000000ULL : 0, 0, d, 8);
    FUZZ_CHECK(n <= 8);
    for (unsigned i = 0; i < n; i++) {
        FUZZ_CHECK(d[i].weight <= 65535);
        FUZZ_CHECK(d[i].use_ppm <= 1000000);
    }
    n = gs_ledger_demands(l, container, 0, 0, d, GS_LEDGER_MEMBERS);
    FUZZ_CHECK(n <= GS_LEDGER_MEMBERS);
}

/* Writes a forged image: zeros with the header right, then the patches. */
static size_t forge(const char *path, const uint8_t *data, size_t size)
{
    static struct gs_ledger_file img;
    memset(&img, 0, sizeof img);
    img.magic = GS_LEDGER_MAGIC;
    img.version = GS_LEDGER_VERSION;
    img.size = (uint32_t)sizeof img;
    size_t at = 0;
    while (at + 3 <= size && data[at] != 0xff) {
        size_t off = ((size_t)data[at] | (size_t)data[at + 1] << 8) % sizeof img, len = data[at + 2];
        at += 3;
        if (len > size - at)
            len = size - at;
        if (len > sizeof img - off)
            len = sizeof img - off;
        memcpy((char *)&img + off, data + at, len);
        at += len;
    }
    FILE *f = fopen(path, "w");
    FUZZ_CHECK(f != NULL);
    FUZZ_CHECK(fwrite(&img, 1, sizeof img, f) == sizeof img);
    fclose(f);
    return at < size ? at + 1 : size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = ledger_path();
    char err[512] = "";
    if (size == 0)
        return 0;
    size_t at = 1;
    switch (data[0] % 3) {
    case 0: /* empty: created by the first opener */ FUZZ_CHECK(truncate(path, 0) == 0); break;
    case 1: /* a forged image */ at += forge(path, data + 1, size - 1); break;
    default: /* a file of another size: the node agent makes it afresh; an opener sizes it back, or refuses
              * another layout version's */
        FUZZ_CHECK(truncate(path, (off_t)(data[0] % 64) * 97 + 1) == 0);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        FUZZ_CHECK(fd >= 0);
        FUZZ_CHECK(gs_ledger_lay_out(fd) == -1 && errno == EINVAL);
        close(fd);
        struct gs_ledger *sized = gs_ledger_open(path, err, sizeof err);
        struct stat st;
        if (sized) {
            FUZZ_CHECK(stat(path, &st) == 0 && (size_t)st.st_size == sizeof(struct gs_ledger_file));
            gs_ledger_forget(sized);
        } else {
            fuzz_check_refusal(err, sizeof err);
        }
        return 0;
    }
    /* the node agent's lay-out keeps what an opener takes and refuses the rest */
    int fd = data[0] % 2 == 1 && data[size - 1] % 2 ? open(path, O_RDWR | O_CLOEXEC) : -1;
    int kept = fd >= 0 ? gs_ledger_lay_out(fd) == 0 : -1;
    if (fd >= 0)
        close(fd);
    struct gs_ledger *l = gs_ledger_open(path, err, sizeof err);
    FUZZ_CHECK(kept < 0 || kept == (l != NULL));
    if (!l) {
        fuzz_check_refusal(err, sizeof err);
        return 0;
    }
    struct gs_ledger *other = NULL;
    const uint64_t us = 1000, me = 0x1111, them = 0x2222;
    uint64_t now = 1000000000000ULL;
    int slot = gs_ledger_join(l, 7, me, 30);
    FUZZ_CHECK(slot >= -1 && slot < GS_LEDGER_MEMBERS);
    int oslot = -1;
    while (at + STEP <= size) {
        uint8_t op = data[at], arg = data[at + 1];
        uint16_t delta = (uint16_t)(data[at + 2] | data[at + 3] << 8);
        at += STEP;
        now += delta * us;
        struct gs_ledger_turn turn;
        switch (op % 8) {
        case 0: {
            size_t off = delta % sizeof *l->f, len = arg;
            if (len > size - at)
                len = size - at;
            if (len > sizeof *l->f - off)
                len = sizeof *l->f - off;
            memcpy((char *)l->f + off, data + at, len);
            at += len;
            break;
        }
        case 1: {
            struct gs_ledger *h = (arg & 1) && other ? other : l;
            int s = h == other ? oslot : slot;
            uint64_t wait = gs_ledger_open_window(h, s, now, now + (uint64_t)arg * 1000000ULL, &turn);
            FUZZ_CHECK(wait <= GS_LEDGER_MAX_HOLD_NS);
            FUZZ_CHECK(!(wait && turn.took));
            FUZZ_CHECK(!turn.slot_end || (turn.took && turn.slot_end > now && turn.slot_end <= now + GS_TURN_FRAME_NS));
            break;
        }
        case 2: {
            /* a close only ever shortens the turn */
            uint64_t until = l->f->turn_until_ns;
            gs_ledger_close_window((arg & 1) && other ? other : l, (arg & 1) && other ? oslot : slot, now, arg & 2);
            FUZZ_CHECK(l->f->turn_until_ns <= until);
            break;
        }
        case 3: (void)gs_ledger_extend(l, slot, now, now + (uint64_t)arg * 10000000ULL); break;
        case 4: check_demands(l, me, now); break;
        case 5: gs_ledger_reap(l); break;
        case 6: {
            uint64_t mine = me;
            (void)gs_ledger_busy_weight(l, me, now > us ? now - us : 0);
            (void)gs_ledger_pid_named(l, me, arg, not_mine, &mine);
            FUZZ_CHECK(gs_ledger_others(l, me) >= 0);
            break;
        }
        default:
            if (!other) {
                other = gs_ledger_open(path, err, sizeof err);
                if (other)
                    oslot = gs_ledger_join(other, 8, them, 70);
                else
                    fuzz_check_refusal(err, sizeof err);
            }
            break;
        }
    }
    gs_ledger_close(other);
    gs_ledger_close(l);
    return 0;
}
