/* The configuration key table (src/core/config_keys.def): every GPUSLICE_* variable a
 * gpuslice program reads or sets is in it, nothing in it is stale, and every name in it
 * maps back to itself and passes the interposer's unknown-variable check. The source
 * tree is scanned from GS_SOURCE_DIR, set by CMake. */
#define _GNU_SOURCE /* nftw's FTW_PHYS */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_keys.h"

#define MAX_FOUND 256
#define NAME_LEN 64

/* Where the scan found a name: "file:line". */
struct found {
    char name[NAME_LEN];
    char where[512];
};

static struct found g_found[MAX_FOUND];
static int g_nfound;
static int g_nfiles;
static regex_t g_use;      /* a GPUSLICE_* literal handed to getenv/setenv/add_env */
static regex_t g_literal;  /* any complete "GPUSLICE_*" literal */
static const char *g_want; /* for the stale check: the name looked for */
static int g_seen;

static int is_source(const char *path)
{
    const char *dot = strrchr(path, '.');

    return dot != NULL && (strcmp(dot, ".c") == 0 || strcmp(dot, ".h") == 0 || strcmp(dot, ".def") == 0);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    long n;

    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    if (buf != NULL) {
        size_t got = fread(buf, 1, (size_t)n, f);
        buf[got] = '\0';
    }
    fclose(f);
    return buf;
}

/* Records every name passed by literal to getenv, secure_getenv, setenv, unsetenv or
 * the node agent's add_env. */
static int scan_uses(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    regmatch_t m[3];
    char *buf;
    const char *p;

    (void)st;
    (void)ftw;
    if (type != FTW_F || !is_source(path) || strstr(path, "config_keys.def") != NULL)
        return 0;
    buf = slurp(path);
    assert_non_null(buf);
    g_nfiles++;
    for (p = buf; regexec(&g_use, p, 3, m, 0) == 0; p += m[0].rm_eo) {
        regoff_t so = m[2].rm_so, eo = m[2].rm_eo;
        struct found *f;
        int line = 1;
        const char *q;

        assert_true(g_nfound < MAX_FOUND);
        assert_true(eo - so < NAME_LEN);
        f = &g_found[g_nfound++];
        memcpy(f->name, p + so, (size_t)(eo - so));
        f->name[eo - so] = '\0';
        for (q = buf; q < p + so; q++)
            line += *q == '\n';
        snprintf(f->where, sizeof f->where, "%s:%d", path, line);
    }
    free(buf);
    return 0;
}

/* Sets g_seen when the file holds g_want as a complete literal. */
static int scan_literal(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    regmatch_t m[2];
    char *buf;
    const char *p;

    (void)st;
    (void)ftw;
    if (type != FTW_F || !is_source(path) || strstr(path, "config_keys.def") != NULL)
        return 0;
    buf = slurp(path);
    assert_non_null(buf);
    for (p = buf; regexec(&g_literal, p, 2, m, 0) == 0; p += m[0].rm_eo)
        if ((size_t)(m[1].rm_eo - m[1].rm_so) == strlen(g_want) && memcmp(p + m[1].rm_so, g_want, strlen(g_want)) == 0)
            g_seen = 1;
    free(buf);
    return g_seen; /* stops the walk once found */
}

/* The programs' sources, and the simulated driver's (a gpuslice program too). */
static const char *const g_dirs[] = { GS_SOURCE_DIR "/src", GS_SOURCE_DIR "/tests/simdriver" };

static int setup(void **state)
{
    size_t i;

    (void)state;
    assert_int_equal(
        regcomp(&g_use,
                "(secure_getenv|getenv|setenv|unsetenv|add_env)[[:space:]]*\\([^\"();]*\"(GPUSLICE_[A-Za-z0-9_]*)\"",
                REG_EXTENDED),
        0);
    assert_int_equal(regcomp(&g_literal, "\"(GPUSLICE_[A-Za-z0-9_]*)\"", REG_EXTENDED), 0);
    for (i = 0; i < sizeof g_dirs / sizeof g_dirs[0]; i++)
        assert_int_equal(nftw(g_dirs[i], scan_uses, 16, FTW_PHYS), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    regfree(&g_use);
    regfree(&g_literal);
    return 0;
}

static int in_table(const char *name)
{
    return gs_key_lookup(name, strlen(name)) >= 0 || gs_key_is_other(name, strlen(name));
}

/* The scan itself works: it read the tree and found the uses we know of. */
static void test_scan_finds_uses(void **state)
{
    (void)state;
    assert_true(g_nfiles >= 50);
    assert_true(g_nfound >= 10);
}

static void test_every_use_is_in_the_table(void **state)
{
    int i;
    int bad = 0;

    (void)state;
    for (i = 0; i < g_nfound; i++) {
        if (!in_table(g_found[i].name)) {
            print_error("%s: %s is not in src/core/config_keys.def\n", g_found[i].where, g_found[i].name);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* An allow-list entry nothing reads any more would let a typo of it pass. */
static void test_no_stale_other_keys(void **state)
{
    int i;
    size_t d;

    (void)state;
    for (i = 0; gs_cfg_other_keys[i].name != NULL; i++) {
        g_want = gs_cfg_other_keys[i].name;
        g_seen = 0;
        for (d = 0; d < sizeof g_dirs / sizeof g_dirs[0] && !g_seen; d++)
            assert_true(nftw(g_dirs[d], scan_literal, 16, FTW_PHYS) >= 0);
        if (!g_seen)
            fail_msg("%s (%s) is listed but no source names it", g_want, gs_cfg_other_keys[i].owner);
    }
}

/* Every slot has a name that maps back to it, no two keys share a name, and all of them
 * (other programs' included) pass the unknown-variable check. */
static void test_names_round_trip(void **state)
{
    char name[GS_KEY_NAME_MAX];
    char entry[GS_KEY_NAME_MAX + 8];
    char err[256];
    char *list[2] = { entry, NULL };
    int slot;
    int i;

    (void)state;
    for (slot = 0; slot < GS_KEY_COUNT; slot++) {
        gs_key_name(slot, name, sizeof name);
        assert_true(strlen(name) > 0 && strlen(name) + 1 < sizeof name);
        assert_int_equal(gs_key_lookup(name, strlen(name)), slot);
        assert_false(gs_key_is_other(name, strlen(name)));
        snprintf(entry, sizeof entry, "%s=1", name);
        assert_int_equal(gs_config_check_unknown(list, err, sizeof err), 0);
    }
    for (i = 0; gs_cfg_other_keys[i].name != NULL; i++) {
        const char *n = gs_cfg_other_keys[i].name;

        assert_int_equal(gs_key_lookup(n, strlen(n)), GS_KEY_UNKNOWN);
        snprintf(entry, sizeof entry, "%s=x", n);
        if (gs_config_check_unknown(list, err, sizeof err) != 0)
            fail_msg("%s", err);
    }
}

/* The merge decides per field, so keys sharing a field must agree on who decides it;
 * every limit can be ordered and shown. */
static void test_field_authority_is_consistent(void **state)
{
    size_t i;
    size_t j;

    (void)state;
    for (i = 0; i < gs_cfg_nkeys; i++) {
        const struct gs_cfg_key *a = &gs_cfg_keys[i];

        if (a->parse == NULL)
            continue;
        assert_int_equal(a->auth == GS_AUTH_LIMIT, a->rank != NULL && a->show != NULL);
        for (j = 0; j < gs_cfg_nkeys; j++) {
            const struct gs_cfg_key *b = &gs_cfg_keys[j];

            if (b->parse != NULL && b->offset == a->offset) {
                if (b->auth != a->auth || b->per_device != a->per_device || b->size != a->size)
                    fail_msg("%s and %s share a field but not its authority or shape", a->name, b->name);
            }
        }
    }
}

/* Each field starts from at most one default, which its own key's parser takes;
 * no per-device family has one (unset is no limit). */
static void test_defaults_parse_once_per_field(void **state)
{
    struct gs_config cfg;
    char why[256];
    size_t i;
    size_t j;

    (void)state;
    for (i = 0; i < gs_cfg_nkeys; i++) {
        const struct gs_cfg_key *a = &gs_cfg_keys[i];

        if (a->dflt == NULL)
            continue;
        assert_false(a->per_device);
        if (a->parse(a->dflt, a, (char *)&cfg + a->offset, why, sizeof(why)) != 0)
            fail_msg("the default of %s, '%s', does not parse: %s", a->name, a->dflt, why);
        for (j = i + 1; j < gs_cfg_nkeys; j++)
            if (gs_cfg_keys[j].dflt != NULL && gs_cfg_keys[j].offset == a->offset)
                fail_msg("%s and %s share a field and both carry a default", a->name, gs_cfg_keys[j].name);
    }
    assert_string_equal(gs_key_default(GS_KEY_WEIGHT), "100");
    assert_null(gs_key_default(GS_KEY_REGION));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_finds_uses),
        cmocka_unit_test(test_every_use_is_in_the_table),
        cmocka_unit_test(test_no_stale_other_keys),
        cmocka_unit_test(test_names_round_trip),
        cmocka_unit_test(test_field_authority_is_consistent),
        cmocka_unit_test(test_defaults_parse_once_per_field),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
