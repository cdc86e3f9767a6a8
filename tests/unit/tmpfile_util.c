/* Temporary files for config-file tests, removed as soon as the next one is made. */
#include "tmpfile_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_path[256];

void tmpfile_cleanup(void)
{
    if (g_path[0] != '\0')
        unlink(g_path);
    g_path[0] = '\0';
}

const char *tmpfile_write(const void *data, size_t len)
{
    const char *dir = getenv("TMPDIR");
    const char *p = data;
    int fd;

    tmpfile_cleanup();
    snprintf(g_path, sizeof(g_path), "%s/gs_unit_conf_XXXXXX", dir && *dir ? dir : "/tmp");
    fd = mkstemp(g_path);
    if (fd < 0)
        abort();
    while (len > 0) {
        ssize_t n = write(fd, p, len);

        if (n <= 0)
            abort();
        p += n;
        len -= (size_t)n;
    }
    close(fd);
    return g_path;
}

const char *tmpfile_write_str(const char *text)
{
    return tmpfile_write(text, strlen(text));
}
