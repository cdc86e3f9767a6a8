/* Fuzzes gs_config_load and gs_config_check_unknown.
 * Input: NUL-separated NAME=VALUE environment entries, then optionally "\0\0" and the
 * bytes of a config file (put in a memfd and named by GPUSLICE_CONFIG when the fuzzed
 * environment sets that variable). Invariants: no crash; failure gives a one-line
 * "gpuslice: " message and leaves *cfg alone; success gives in-range values, and a
 * valid GPUSLICE_MEMORY_LIMIT_<i> in the environment always wins for device i. */
#define _GNU_SOURCE /* memfd_create */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz_target.h"
#include "size_parse.h"

#define MAX_ENV 96

struct fuzz_env {
    char *entry[MAX_ENV + 1]; /* NULL-terminated, for gs_config_check_unknown */
    size_t name_len[MAX_ENV]; /* length before '=': compared first, so the probes stay cheap */
    int n;
    const char *file_path; /* what GPUSLICE_CONFIG reads as, if set */
};

static const char *fuzz_getenv(const char *name, void *ctx)
{
    const struct fuzz_env *e = ctx;
    size_t len = strlen(name);
    int i;

    for (i = 0; i < e->n; i++) {
        if (e->name_len[i] == len && memcmp(e->entry[i], name, len) == 0) {
            const char *v = e->entry[i] + len + 1;

            /* Never let fuzzed paths reach the real file system. */
            if (strcmp(name, "GPUSLICE_CONFIG") == 0 && *v != '\0')
                return e->file_path;
            return v;
        }
    }
    return NULL;
}

/* The memfd holding the fuzzed config file, reused across runs. */
static int config_fd(void)
{
    static int fd = -1;

    if (fd < 0) {
        fd = memfd_create("gpuslice-fuzz.conf", MFD_CLOEXEC);
        FUZZ_CHECK(fd >= 0);
    }
    return fd;
}

static void check_message(const char *err, size_t errlen)
{
    size_t n = strlen(err);

    FUZZ_CHECK(n > 0 && n < errlen);
    FUZZ_CHECK(strncmp(err, "gpuslice: ", 10) == 0);
    FUZZ_CHECK(strchr(err, '\n') == NULL);
}

static void check_config(const struct gs_config *c, const struct fuzz_env *e)
{
    char name[32];
    int any = 0;
    int i;

    FUZZ_CHECK(c->compute_mode == GS_COMPUTE_CAP || c->compute_mode == GS_COMPUTE_SHARE);
    FUZZ_CHECK(c->share_weight >= 1 && c->share_weight <= 10000);
    FUZZ_CHECK(c->power_exp_milli <= 1000);
    FUZZ_CHECK(c->core_policy <= GS_CORE_POLICY_DISABLE);
    FUZZ_CHECK(c->managed_policy <= GS_MANAGED_IGNORE);
    FUZZ_CHECK(c->ctx_overhead >= -1);
    FUZZ_CHECK(c->log_level >= 0 && c->log_level <= 3);
    FUZZ_CHECK(memchr(c->region_path, '\0', sizeof(c->region_path)) != NULL);
    FUZZ_CHECK(c->region_path[0] == '\0' || c->region_path[0] == '/');
    FUZZ_CHECK(memchr(c->container_name, '\0', sizeof(c->container_name)) != NULL);
    for (i = 0; c->container_name[i] != '\0'; i++)
        FUZZ_CHECK(c->container_name[i] >= 0x20 && c->container_name[i] < 0x7f);
    for (i = 0; i < GS_MAX_DEVICES; i++) {
        const char *v;
        uint64_t want;

        FUZZ_CHECK(c->sm_limit[i] <= 100);
        any |= c->mem_limit[i] != 0 || c->sm_limit[i] != 0;
        snprintf(name, sizeof(name), "GPUSLICE_MEMORY_LIMIT_%d", i);
        v = fuzz_getenv(name, (void *)e);
        if (v != NULL) {
            FUZZ_CHECK(gs_parse_size(v, &want, NULL, 0) == 0);
            FUZZ_CHECK(c->mem_limit[i] == want && want != 0);
        }
    }
    FUZZ_CHECK(c->any_limit == any);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_env env;
    struct gs_config cfg, cfg2, sentinel;
    char *buf = malloc(size + 1);
    char err[512];
    char tiny[7];
    size_t env_len = size;
    size_t pos = 0;
    int have_file = 0;
    int rc, rc2;
    const uint8_t *sep;

    if (buf == NULL)
        return 0;
    memset(&env, 0, sizeof(env));
    sep = size >= 2 ? memmem(data, size, "\0\0", 2) : NULL;
    if (sep != NULL) {
        int fd = config_fd();
        size_t off = (size_t)(sep - data) + 2;

        env_len = (size_t)(sep - data);
        have_file = 1;
        FUZZ_CHECK(ftruncate(fd, 0) == 0);
        FUZZ_CHECK(pwrite(fd, data + off, size - off, 0) == (ssize_t)(size - off));
    }
    memcpy(buf, data, env_len);
    buf[env_len] = '\0';
    while (pos < env_len && env.n < MAX_ENV) {
        char *s = buf + pos;

        const char *eq = strchr(s, '=');

        pos += strlen(s) + 1;
        if (eq != NULL) { /* like a real environ: every entry has '=' */
            env.name_len[env.n] = (size_t)(eq - s);
            env.entry[env.n++] = s;
        }
    }
    {
        static char path[64];

        if (have_file)
            snprintf(path, sizeof(path), "/proc/self/fd/%d", config_fd());
        else
            snprintf(path, sizeof(path), "/nonexistent/gpuslice-fuzz.conf");
        env.file_path = path;
    }

    memset(&sentinel, 0xa5, sizeof(sentinel));
    cfg = sentinel;
    rc = gs_config_load(&cfg, fuzz_getenv, &env, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || rc == -1);
    if (rc != 0) {
        check_message(err, sizeof(err));
        FUZZ_CHECK(memcmp(&cfg, &sentinel, sizeof(cfg)) == 0);
    } else {
        FUZZ_CHECK(err[0] == '\0');
        check_config(&cfg, &env);
    }
    /* Deterministic, and a truncated message buffer gives the same verdict. */
    FUZZ_CHECK(gs_config_load(&cfg2, fuzz_getenv, &env, tiny, 1 + size % sizeof(tiny)) == rc);
    FUZZ_CHECK(strlen(tiny) < 1 + size % sizeof(tiny));
    if (rc == 0) {
        FUZZ_CHECK(memcmp(cfg.mem_limit, cfg2.mem_limit, sizeof(cfg.mem_limit)) == 0);
        FUZZ_CHECK(memcmp(cfg.sm_limit, cfg2.sm_limit, sizeof(cfg.sm_limit)) == 0);
        FUZZ_CHECK(strcmp(cfg.region_path, cfg2.region_path) == 0);
        FUZZ_CHECK(strcmp(cfg.container_name, cfg2.container_name) == 0);
        FUZZ_CHECK(cfg.ctx_overhead == cfg2.ctx_overhead && cfg.log_level == cfg2.log_level);
        FUZZ_CHECK(cfg.compute_mode == cfg2.compute_mode && cfg.share_weight == cfg2.share_weight);
    }

    rc2 = gs_config_check_unknown(env.entry, err, sizeof(err));
    FUZZ_CHECK(rc2 == 0 || rc2 == -1);
    if (rc2 != 0)
        check_message(err, sizeof(err));
    else
        FUZZ_CHECK(err[0] == '\0');
    free(buf);
    return 0;
}
