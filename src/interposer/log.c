#define _GNU_SOURCE /* F_GETPIPE_SZ */
#include "log.h"

#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

int gs_log_threshold = GS_LOG_WARN;

/* Lines at info and debug left out while stderr had no room for them. */
static unsigned long dropped;

/* Whether stderr takes len bytes now without blocking. A pipe whose reader
 * lags (a container runtime's log shim on a loaded node) fills, and a write
 * then holds the caller, a launching thread at debug level (a line a
 * window), until the reader catches up. A pipe's room is its size less
 * what it holds; anything else is asked with poll (a file always has
 * room). */
static int room_for(size_t len)
{
    int size = fcntl(STDERR_FILENO, F_GETPIPE_SZ);
    int held = 0;
    if (size > 0)
        return ioctl(STDERR_FILENO, FIONREAD, &held) == 0 && held >= 0 && held <= size && (size_t)(size - held) >= len;
    struct pollfd p = { .fd = STDERR_FILENO, .events = POLLOUT };
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLOUT | POLLERR | POLLHUP | POLLNVAL)) == POLLOUT;
}

static void put(const char *buf, size_t len)
{
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}

void gs_log_write(int level, const char *fmt, ...)
{
    static const char *const names[] = { "error", "warn", "info", "debug" };
    char buf[512], note[128];
    int n = snprintf(buf, sizeof buf, "gpuslice[%d] %s: ", (int)getpid(), names[level < 0 ? 0 : level > 3 ? 3 : level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    buf[len++] = '\n';
    unsigned long lost = __atomic_load_n(&dropped, __ATOMIC_RELAXED);
    int k = lost ? snprintf(note, sizeof note, "gpuslice[%d] info: %lu log lines left out while stderr had no room\n",
                            (int)getpid(), lost)
                 : 0;
    size_t nlen = k < 0 ? 0 : (size_t)k < sizeof note ? (size_t)k : sizeof note - 1;
    /* errors and warnings wait for room: they say why the program is
     * refused or limited */
    if (level >= GS_LOG_INFO && !room_for(nlen + len)) {
        __atomic_fetch_add(&dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    if (lost) {
        __atomic_fetch_sub(&dropped, lost, __ATOMIC_RELAXED);
        put(note, nlen);
    }
    put(buf, len);
}
