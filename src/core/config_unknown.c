/* gs_config_check_unknown: catches misspelt gpuslice variables, which getenv probing
 * alone would never see, so a typo cannot silently leave a container unlimited. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"
#include "suggest.h"
#include "text_escape.h"

const char *gs_cfg_suggest(const char *name, size_t len, char *buf, size_t buflen)
{
    char cand[GS_KEY_NAME_MAX];
    size_t best = 3; /* suggest only at distance 1 or 2, as gs_suggest */
    int slot;

    if (len > GS_SUGGEST_MAX || buflen == 0)
        return NULL;
    buf[0] = '\0';
    for (slot = 0; slot < GS_KEY_COUNT; slot++) {
        size_t d;
        size_t cl;

        gs_key_name(slot, cand, sizeof(cand));
        cl = strlen(cand);
        if (cl + 2 < len || len + 2 < cl)
            continue; /* the distance is at least the length difference */
        d = gs_edit_distance(name, len, cand, cl);
        if (d < best) {
            best = d;
            snprintf(buf, buflen, "%s", cand);
        }
    }
    return buf[0] != '\0' ? buf : NULL;
}

int gs_config_check_unknown(char **environ_list, char *err, size_t errlen)
{
    static const char prefix[] = "GPUSLICE_";
    size_t i;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (environ_list == NULL)
        return 0;
    for (i = 0; environ_list[i] != NULL; i++) {
        const char *entry = environ_list[i];
        const char *eq = strchr(entry, '=');
        size_t len = eq ? (size_t)(eq - entry) : strlen(entry);
        const char *val = eq ? eq + 1 : "";
        char shown_name[GS_ESCAPE_BUF];
        char shown_val[GS_ESCAPE_BUF];
        char sugg[GS_KEY_NAME_MAX];
        int slot = gs_key_lookup(entry, len);

        if (slot >= 0)
            continue;
        /* Any case: "Gpuslice_cores" is as much a typo as GPUSLICE_CORE. */
        if (slot == GS_KEY_UNKNOWN &&
            (len < sizeof(prefix) - 1 || strncasecmp(entry, prefix, sizeof(prefix) - 1) != 0 ||
             gs_key_is_other(entry, len)))
            continue;
        if (err == NULL || errlen == 0)
            return -1;
        gs_escape_text(shown_name, sizeof(shown_name), entry, len, GS_ESCAPE_SHOW);
        gs_escape_text(shown_val, sizeof(shown_val), val, strlen(val), GS_ESCAPE_SHOW);
        if (slot == GS_KEY_BAD_INDEX) {
            snprintf(err, errlen, "gpuslice: %s='%s': device index must be 0..%d (no leading zeros)", shown_name,
                     shown_val, GS_MAX_DEVICES - 1);
        } else if (gs_cfg_suggest(entry, len, sugg, sizeof(sugg)) != NULL) {
            snprintf(err, errlen, "gpuslice: unknown variable %s='%s'; did you mean %s?", shown_name, shown_val, sugg);
        } else {
            snprintf(err, errlen, "gpuslice: unknown variable %s='%s' (see docs/configuration.md)", shown_name,
                     shown_val);
        }
        return -1;
    }
    return 0;
}
