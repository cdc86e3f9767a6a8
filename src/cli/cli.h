/* The gpuslice command line: one file per subcommand. Exit codes follow
 * env(1)/timeout(1) so scripts can trust them:
 *   0 success, 1 runtime error, 2 usage error, 125 gpuslice itself failed
 *   before running the command, 126 command not executable, 127 not found;
 *   `run` otherwise returns the command's own status (128+N for signal N). */
#ifndef GPUSLICE_CLI_H
#define GPUSLICE_CLI_H

#include <stddef.h>

#define GS_EXIT_USAGE 2
#define GS_EXIT_SETUP 125

int gs_cmd_run(int argc, char **argv);
int gs_cmd_top(int argc, char **argv);
int gs_cmd_inspect(int argc, char **argv);
int gs_cmd_rm(int argc, char **argv);

/* Removes the region at path if no live process holds a slot in it.
 * Returns 0 (and the number of live processes in *live: when non-zero,
 * nothing was removed), or -1 with the reason in err. */
int gs_cli_remove_unused_region(const char *path, int *live, char *err, size_t errlen);

/* Full path of this executable's directory. */
int gs_cli_self_dir(char *buf, size_t len);

#endif
