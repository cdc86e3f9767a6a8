/* How every subcommand reports a usage error, in one style: the error first,
 * naming what was typed, then one line pointing at --help (not the whole
 * usage, which would push the error off the screen). */
#define _GNU_SOURCE
#include "cli.h"
#include "suggest.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gs_cli_usage_hint(const char *cmd)
{
    fprintf(stderr, "Try 'gpuslice%s%s --help' for more information.\n", cmd ? " " : "", cmd ? cmd : "");
}

int gs_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "gpuslice%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    gs_cli_usage_hint(cmd);
    return GS_EXIT_USAGE;
}

/* "--memroy=4GiB" -> the closest long option's name, or NULL. */
static const char *closest_option(const char *typed, const struct option *opts)
{
    const char *names[GS_CLI_MAX_OPTIONS + 1];
    size_t n = 0;
    for (; n < GS_CLI_MAX_OPTIONS && opts[n].name; n++)
        names[n] = opts[n].name;
    names[n] = NULL;
    typed += strspn(typed, "-");
    return gs_suggest(typed, strcspn(typed, "="), names);
}

int gs_cli_bad_option(const char *cmd, int c, char *const *argv, const struct option *opts)
{
    /* getopt_long leaves optind past the word it refused. */
    const char *typed = argv[optind - 1];
    if (c == ':')
        return gs_cli_usage_error(cmd, "option '%s' needs a value", typed);
    if (optopt) /* a short option; optind may still point into its cluster */
        return gs_cli_usage_error(cmd, "unknown option '-%c'", optopt);
    const char *near = closest_option(typed, opts);
    if (near)
        return gs_cli_usage_error(cmd, "unknown option '%.*s'; did you mean --%s?", (int)strcspn(typed, "="), typed,
                                  near);
    return gs_cli_usage_error(cmd, "unknown option '%.*s'", (int)strcspn(typed, "="), typed);
}

const char *gs_cli_drop_prefix(const char *msg)
{
    static const char prefix[] = "gpuslice: ";
    return strncmp(msg, prefix, sizeof prefix - 1) == 0 ? msg + sizeof prefix - 1 : msg;
}
