#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

int gs_log_threshold = GS_LOG_WARN;

void gs_log_write(int level, const char *fmt, ...)
{
    static const char *const names[] = { "error", "warn", "info", "debug" };
    char buf[512];
    int n = snprintf(buf, sizeof buf, "gpuslice[%d] %s: ", (int)getpid(), names[level < 0 ? 0 : level > 3 ? 3 : level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}
