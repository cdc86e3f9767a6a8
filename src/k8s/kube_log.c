/* One-line logging for the k8s client and the node agent. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kube_client.h"

static int g_level = KUBE_LOG_INFO;
static char g_prefix[64] = "gpuslice";

/* enum kube_log_level's names, in its order. */
static const char *const g_level_names[] = { "error", "warn", "info", "debug" };
#define NLEVELS (int)(sizeof g_level_names / sizeof g_level_names[0])

int kube_log_level_parse(const char *s)
{
    for (int i = 0; i < NLEVELS; i++)
        if (strcmp(s, g_level_names[i]) == 0)
            return i;
    return -1;
}

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
    if (level > g_level)
        return;
    if (level < KUBE_LOG_ERROR)
        level = KUBE_LOG_ERROR;
    if (level > KUBE_LOG_DEBUG)
        level = KUBE_LOG_DEBUG;
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
            tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, g_prefix, g_level_names[level], line);
}
