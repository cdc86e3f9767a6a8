/* gpuslice rm: remove named containers' state once no process uses it. */
#include "cli.h"
#include "statedir.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char rm_usage[] = "Usage: gpuslice rm [--state-dir DIR] NAME...\n"
                               "\n"
                               "Remove the state of containers started with 'gpuslice run --name NAME':\n"
                               "their limits and usage records. A container with a live process is left\n"
                               "alone. 'gpuslice top' marks containers that have none as idle.\n"
                               "\n"
                               "Options:\n"
                               "      --state-dir DIR   state directory (default as for 'gpuslice run')\n"
                               "  -h, --help            show this help\n"
                               "\n"
                               "Exit status: 0 every NAME removed, 1 some NAME in use or not removable,\n"
                               "2 usage error.\n";

int gs_cmd_rm(int argc, char **argv)
{
    static const struct option opts[] = { { "state-dir", required_argument, NULL, 'S' },
                                          { "help", no_argument, NULL, 'h' },
                                          { NULL, 0, NULL, 0 } };
    const char *given = NULL;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == 'S') {
            given = optarg;
        } else if (c == 'h') {
            fputs(rm_usage, stdout);
            return 0;
        } else {
            return gs_cli_bad_option("rm", c, argv, opts);
        }
    }
    if (optind >= argc)
        return gs_cli_usage_error("rm", "no NAME given (gpuslice rm NAME...)");
    char dir[PATH_MAX];
    int found = gs_cli_state_dir("rm", given, 0, dir, sizeof dir);
    if (found < 0)
        return 1;
    int rc = 0;
    for (int i = optind; i < argc; i++) {
        char path[PATH_MAX + 80], err[512];
        struct stat st;
        if (gs_statedir_region_path(path, sizeof path, dir, argv[i]) != 0 || strchr(argv[i], '/')) {
            fprintf(stderr, "gpuslice rm: '%s' is not a container name\n", argv[i]);
            rc = 1;
            continue;
        }
        if (found == 1 || lstat(path, &st) != 0) {
            fprintf(stderr, "gpuslice rm: no container '%s' in %s\n", argv[i], dir);
            rc = 1;
            continue;
        }
        int live = 0;
        if (gs_cli_remove_unused_region(path, &live, err, sizeof err) != 0) {
            fprintf(stderr, "gpuslice rm: %s\n", err);
            rc = 1;
        } else if (live) {
            fprintf(stderr, "gpuslice rm: container '%s' is in use by %d process%s; stop %s first\n", argv[i], live,
                    live == 1 ? "" : "es", live == 1 ? "it" : "them");
            rc = 1;
        } else {
            printf("removed %s\n", argv[i]);
        }
    }
    return rc;
}
