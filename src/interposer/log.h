/* Messages from the interposer go to stderr with a "gpuslice" prefix and the
 * pid, one write() each so lines from many processes never interleave. */
#ifndef GPUSLICE_LOG_H
#define GPUSLICE_LOG_H

enum gs_log_level { GS_LOG_ERROR = 0, GS_LOG_WARN = 1, GS_LOG_INFO = 2, GS_LOG_DEBUG = 3 };

extern int gs_log_threshold;

__attribute__((format(printf, 2, 3))) void gs_log_write(int level, const char *fmt, ...);
#define gs_log(level, ...)                                                                                             \
    do {                                                                                                               \
        if ((level) <= gs_log_threshold)                                                                               \
            gs_log_write((level), __VA_ARGS__);                                                                        \
    } while (0)

#endif
