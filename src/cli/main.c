/* gpuslice: share one GPU between many containers or jobs. */
#include "cli.h"
#include "sim_main.h"
#include "suggest.h"

#include <stdio.h>
#include <string.h>

extern const char gs_cli_commit[]; /* commit.c, written at build time */

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static int print_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("gpuslice %s (commit %s)\n", GPUSLICE_VERSION, gs_cli_commit);
    return 0;
}

static const struct command commands[] = {
    { "run", gs_cmd_run, "run a command under GPU limits (see 'gpuslice run --help')" },
    { "top", gs_cmd_top, "show the GPUs and each container's use against its limits" },
    { "rm", gs_cmd_rm, "remove an idle named container's state" },
    { "sim", gpuslice_sim_main, "replay a cluster trace through the scheduling policies" },
    { "inspect", gs_cmd_inspect, "per-node, per-GPU allocation from the scheduler extender" },
    { "version", print_version, "print the version and the commit it was built from" },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fputs("Usage: gpuslice COMMAND [ARGS...]\n"
          "\n"
          "Share NVIDIA GPUs between jobs with hard memory limits.\n"
          "\n"
          "Commands:\n",
          out);
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-8s%s\n", commands[i].name, commands[i].summary);
    fputs("\n"
          "Options:\n"
          "  -h, --help     show this help\n"
          "  -V, --version  print the version\n"
          "\n"
          "Exit status: 0 success, 1 runtime error, 2 usage error; 'run' returns\n"
          "the command's own status, or 125/126/127 if it could not be started.\n",
          out);
}

static int unknown_command(const char *cmd)
{
    const char *names[NCOMMANDS + 1];
    for (size_t i = 0; i < NCOMMANDS; i++)
        names[i] = commands[i].name;
    names[NCOMMANDS] = NULL;
    const char *near = gs_suggest(cmd, strlen(cmd), names);
    if (near)
        return gs_cli_usage_error(NULL, "unknown command '%s'; did you mean '%s'?", cmd, near);
    return gs_cli_usage_error(NULL, "unknown command '%s'", cmd);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return gs_cli_usage_error(NULL, "no command given");
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version"))
        return print_version(0, NULL);
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    if (cmd[0] == '-')
        return gs_cli_usage_error(NULL, "unknown option '%s'", cmd);
    return unknown_command(cmd);
}
