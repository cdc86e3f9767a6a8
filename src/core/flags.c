#include "flags.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gs_flag_int(const char *prog, const char *flag, const char *text, long lo, long hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: --%s '%s': expected a whole number from %ld to %ld\n", prog, flag, text, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int gs_flag_readable(const char *prog, const char *flag, const char *path)
{
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "%s: --%s '%s': cannot read it: %s\n", prog, flag, path, strerror(errno));
        return -1;
    }
    return 0;
}

void gs_flag_print_version(const char *prog)
{
    printf("%s %s\n", prog, GPUSLICE_VERSION);
}
