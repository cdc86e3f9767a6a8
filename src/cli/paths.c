#include "cli.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void gs_cli_state_dir(char *buf, size_t len)
{
    const char *env = getenv("GPUSLICE_STATE_DIR");
    if (env && *env)
        snprintf(buf, len, "%s", env);
    else if (access("/run/gpuslice", W_OK) == 0 || (geteuid() == 0 && access("/run", W_OK) == 0))
        snprintf(buf, len, "/run/gpuslice");
    else
        snprintf(buf, len, "/tmp/gpuslice-%u", (unsigned)getuid());
}

int gs_cli_self_dir(char *buf, size_t len)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0)
        return -1;
    path[n] = '\0';
    snprintf(buf, len, "%s", dirname(path));
    return 0;
}
