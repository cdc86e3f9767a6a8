/* The gpuslice command line: one file per subcommand. Exit codes follow
 * env(1)/timeout(1) so scripts can trust them:
 *   0 success, 1 runtime error, 2 usage error, 125 gpuslice itself failed
 *   before running the command, 126 command not executable, 127 not found;
 *   `run` otherwise returns the command's own status (128+N for signal N). */
#ifndef GPUSLICE_CLI_H
#define GPUSLICE_CLI_H

#include <getopt.h>
#include <stddef.h>

#define GS_EXIT_USAGE 2
#define GS_EXIT_SETUP 125

int gs_cmd_run(int argc, char **argv);
int gs_cmd_top(int argc, char **argv);
int gs_cmd_inspect(int argc, char **argv);
int gs_cmd_rm(int argc, char **argv);

/* The most long options one subcommand has (for suggestions). */
#define GS_CLI_MAX_OPTIONS 32

/* Prints "gpuslice CMD: <message>" and a line pointing at 'gpuslice CMD
 * --help' on stderr (cmd NULL: the top level); returns GS_EXIT_USAGE. */
int gs_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The line that ends every usage error: "Try 'gpuslice CMD --help' ...". */
void gs_cli_usage_hint(const char *cmd);

/* Reports what getopt_long refused (c is '?' or ':'; opterr must be 0 and
 * the option string start with ':'), with the closest of opts as "did you
 * mean"; returns GS_EXIT_USAGE. */
int gs_cli_bad_option(const char *cmd, int c, char *const *argv, const struct option *opts);

/* msg without a leading "gpuslice: ", which core messages carry for the
 * interposer, so that the CLI can name its subcommand instead. */
const char *gs_cli_drop_prefix(const char *msg);

/* Removes the region at path if no live process holds a slot in it.
 * Returns 0 (and the number of live processes in *live: when non-zero,
 * nothing was removed), or -1 with the reason in err. */
int gs_cli_remove_unused_region(const char *path, int *live, char *err, size_t errlen);

/* Removes the regions of private runs (run-<pid>) under dir that no live
 * process holds: a run killed by SIGKILL cannot remove its own. */
void gs_cli_sweep_private_regions(const char *dir);

/* The state directory command cmd uses, into out: given (--state-dir), else
 * gs_statedir_default's; made absolute, without '.' parts or trailing
 * slashes, the directories above it resolved, so that later opens by name
 * reach what was checked. Every directory on the way must be root's or
 * ours and writable by nobody else unless sticky; the directory itself
 * must be no symbolic link, root's or ours, writable by nobody else.
 * create: made (mode 0700) when missing. 0; 1 when it does not exist (and
 * not create); -1 after a message naming what was refused. */
int gs_cli_state_dir(const char *cmd, const char *given, int create, char *out, size_t len);

/* Full path of this executable's directory. */
int gs_cli_self_dir(char *buf, size_t len);

#endif
