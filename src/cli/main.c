/* gpuslice: share one GPU between many containers or jobs. */
#include "cli.h"
#include "sim_main.h"

#include <stdio.h>
#include <string.h>

static const char usage[] = "Usage: gpuslice COMMAND [ARGS...]\n"
                            "\n"
                            "Share NVIDIA GPUs between jobs with hard memory limits.\n"
                            "\n"
                            "Commands:\n"
                            "  run     run a command under GPU limits (see 'gpuslice run --help')\n"
                            "  top     show each container's GPU memory use against its limit\n"
                            "  rm      remove an idle named container's state\n"
                            "  sim     replay a cluster trace through the scheduling policies\n"
                            "  inspect per-node, per-GPU allocation from the scheduler extender\n"
                            "  version print the version\n"
                            "\n"
                            "Exit status: 0 success, 1 runtime error, 2 usage error; 'run' returns\n"
                            "the command's own status, or 125/126/127 if it could not be started.\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return GS_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("gpuslice %s\n", GPUSLICE_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "run"))
        return gs_cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "top"))
        return gs_cmd_top(argc - 1, argv + 1);
    if (!strcmp(cmd, "rm"))
        return gs_cmd_rm(argc - 1, argv + 1);
    if (!strcmp(cmd, "inspect"))
        return gs_cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(cmd, "sim"))
        return gpuslice_sim_main(argc - 1, argv + 1);
    fprintf(stderr, "gpuslice: unknown command '%s'\n\n%s", cmd, usage);
    return GS_EXIT_USAGE;
}
