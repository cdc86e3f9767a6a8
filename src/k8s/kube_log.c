/* One-line logging for the k8s client and the node agent. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kube_client.h"

static int g_level = 2;
static char g_prefix[64] = "gpuslice";

void kube_log_set_level(int level)
{
    g_level = level;
}

void kube_log_set_prefix(const char *prefix)
{
    snprintf(g_prefix, sizeof g_prefix, "%s", prefix);
}

void kube_log(int level, const char *fmt, ...)
{
    static const char *const names[] = { "error", "warn", "info", "debug" };
    if (level > g_level)
        return;
    if (level < 0)
        level = 0;
    if (level > 3)
        level = 3;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s: %s: %s\n", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
            tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, g_prefix, names[level], line);
}
