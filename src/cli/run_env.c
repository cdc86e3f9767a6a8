/* gpuslice run takes its limits from its options alone: a limit variable
 * inherited from the caller's environment would silently beat them (the
 * interposer reads the environment), so it is refused, naming the option to
 * use instead. */
#include "run_checks.h"
#include "cli.h"
#include "config.h"
#include "config_keys.h"
#include "size_parse.h"
#include "text_escape.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct field_flag {
    size_t offset;
    const char *flag;
};

/* The fields a run's options set, and the option that sets each. */
static const struct field_flag owned[] = {
    { offsetof(struct gs_config, mem_limit), "--memory" },
    { offsetof(struct gs_config, sm_limit), "--cores" },
    { offsetof(struct gs_config, core_policy), "--cores" },
    { offsetof(struct gs_config, compute_mode), "--mode" },
    { offsetof(struct gs_config, share_weight), "--weight" },
    { offsetof(struct gs_config, managed_policy), "--managed" },
    { offsetof(struct gs_config, ledger_dir), "--state-dir" },
};

static const char *flag_for(const struct gs_cfg_key *k)
{
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        if (owned[i].offset == k->offset)
            return owned[i].flag;
    return NULL;
}

/* A context charge of 0 leaves every context uncharged: never inherited. */
static int zero_ctx_overhead(const struct gs_cfg_key *k, const char *value)
{
    uint64_t bytes = 1;
    char err[128];
    return k->offset == offsetof(struct gs_config, ctx_overhead) &&
           gs_parse_size(value, &bytes, err, sizeof err) == 0 && bytes == 0;
}

static int refuse(const char *entry, size_t name_len, const char *flag)
{
    char shown[160];
    const char *value = entry + name_len + 1;
    gs_escape_text(shown, sizeof shown, value, strlen(value), 96);
    if (flag)
        fprintf(stderr,
                "gpuslice run: %.*s='%s' is set in the environment and would override %s; gpuslice run "
                "takes limits only from its options: unset %.*s and use %s\n",
                (int)name_len, entry, shown, flag, (int)name_len, entry, flag);
    else
        fprintf(stderr,
                "gpuslice run: %.*s='%s' is set in the environment and would leave every CUDA context "
                "uncharged; unset %.*s\n",
                (int)name_len, entry, shown, (int)name_len, entry);
    return -1;
}

int gs_run_refuse_inherited(char *const *envp)
{
    for (; *envp; envp++) {
        const char *eq = strchr(*envp, '=');
        if (!eq)
            continue;
        size_t len = (size_t)(eq - *envp);
        int dev = -1;
        int slot = gs_key_lookup(*envp, len);
        const struct gs_cfg_key *k = slot >= 0 ? gs_key_of_slot(slot, &dev) : NULL;
        if (!k)
            continue;
        const char *flag = flag_for(k);
        if (flag || zero_ctx_overhead(k, eq + 1))
            return refuse(*envp, len, flag);
    }
    return 0;
}
