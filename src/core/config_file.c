/* The optional config file: KEY=VALUE lines with the environment's variable names. */
#define _GNU_SOURCE /* O_CLOEXEC, O_NOCTTY on older libcs */
#include "config_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "text_escape.h"

static int file_fail(char *err, size_t errlen, const char *path, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* "gpuslice: <path>:<line>: <detail>" (line 0: no line number). */
static int file_fail(char *err, size_t errlen, const char *path, unsigned line, const char *fmt, ...)
{
    char shown[GS_ESCAPE_BUF];
    char detail[GS_ESCAPE_BUF + 256];
    va_list ap;

    if (err == NULL || errlen == 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    gs_escape_text(shown, sizeof(shown), path, strlen(path), GS_ESCAPE_SHOW);
    if (line > 0)
        snprintf(err, errlen, "gpuslice: %s:%u: %s", shown, line, detail);
    else
        snprintf(err, errlen, "gpuslice: GPUSLICE_CONFIG='%s': %s", shown, detail);
    return -1;
}

/* Reads the whole file. Non-blocking open and the regular-file check keep a FIFO or
 * device named by mistake from hanging the process we are loaded into. */
static int slurp(const char *path, char **buf_out, size_t *len_out, char *err, size_t errlen)
{
    struct stat st;
    char *buf;
    size_t len = 0;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return file_fail(err, errlen, path, 0, "cannot open: %s", strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return file_fail(err, errlen, path, 0, "not a regular file");
    }
    buf = malloc(GS_CONFIG_FILE_MAX + 2);
    if (buf == NULL) {
        close(fd);
        return file_fail(err, errlen, path, 0, "out of memory");
    }
    for (;;) {
        ssize_t n = read(fd, buf + len, GS_CONFIG_FILE_MAX + 1 - len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;

            close(fd);
            free(buf);
            return file_fail(err, errlen, path, 0, "cannot read: %s", strerror(e));
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > GS_CONFIG_FILE_MAX) {
            close(fd);
            free(buf);
            return file_fail(err, errlen, path, 0, "larger than %d bytes", GS_CONFIG_FILE_MAX);
        }
    }
    close(fd);
    buf[len] = '\0';
    *buf_out = buf;
    *len_out = len;
    return 0;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Parses one line (NUL-terminated in place, no newline) into layer. */
static int parse_line(char *s, unsigned lineno, struct gs_cfg_layer *layer, char *err, size_t errlen)
{
    char shown[GS_ESCAPE_BUF];
    char hint[GS_KEY_NAME_MAX + 32];
    char sugg[GS_KEY_NAME_MAX];
    char *end = s + strlen(s);
    char *eq;
    char *kend;
    int slot;

    if (end > s && end[-1] == '\r') /* tolerate CRLF files */
        *--end = '\0';
    while (is_blank(*s))
        s++;
    while (end > s && is_blank(end[-1]))
        *--end = '\0';
    if (*s == '\0' || *s == '#')
        return 0;
    eq = strchr(s, '=');
    if (eq == NULL) {
        gs_escape_text(shown, sizeof(shown), s, (size_t)(end - s), 40);
        return file_fail(err, errlen, layer->file, lineno, "missing '=' in '%s' (expected KEY=VALUE)", shown);
    }
    for (kend = eq; kend > s && is_blank(kend[-1]); kend--)
        ;
    if (kend == s)
        return file_fail(err, errlen, layer->file, lineno, "missing key before '='");
    gs_escape_text(shown, sizeof(shown), s, (size_t)(kend - s), 64);
    slot = gs_key_lookup(s, (size_t)(kend - s));
    if (slot == GS_KEY_BAD_INDEX)
        return file_fail(err, errlen, layer->file, lineno, "%s: device index must be 0..%d", shown, GS_MAX_DEVICES - 1);
    if (slot == GS_KEY_UNKNOWN) {
        hint[0] = '\0';
        if (gs_cfg_suggest(s, (size_t)(kend - s), sugg, sizeof(sugg)) != NULL)
            snprintf(hint, sizeof(hint), "; did you mean %s?", sugg);
        return file_fail(err, errlen, layer->file, lineno, "unknown key '%s'%s", shown, hint);
    }
    if (slot == GS_KEY_CONFIG)
        return file_fail(err, errlen, layer->file, lineno, "GPUSLICE_CONFIG is only read from the environment");
    if (layer->val[slot] != NULL)
        return file_fail(err, errlen, layer->file, lineno, "duplicate key '%s' (first set on line %u)", shown,
                         layer->line[slot]);
    *kend = '\0';
    for (eq++; is_blank(*eq); eq++)
        ;
    layer->val[slot] = eq;
    layer->line[slot] = lineno;
    return 0;
}

int gs_config_file_read(const char *path, char **buf_out, struct gs_cfg_layer *layer, char *err, size_t errlen)
{
    size_t len = 0;
    size_t pos = 0;
    unsigned lineno = 0;
    char *buf = NULL;

    memset(layer, 0, sizeof(*layer));
    layer->file = path;
    *buf_out = NULL;
    if (slurp(path, &buf, &len, err, errlen) != 0)
        return -1;
    *buf_out = buf;
    while (pos < len) {
        char *line = buf + pos;
        char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;

        lineno++;
        if (ll > GS_CONFIG_LINE_MAX)
            return file_fail(err, errlen, path, lineno, "line longer than %d bytes", GS_CONFIG_LINE_MAX);
        if (memchr(line, '\0', ll) != NULL)
            return file_fail(err, errlen, path, lineno, "NUL byte in line (not a text file?)");
        line[ll] = '\0';
        if (parse_line(line, lineno, layer, err, errlen) != 0)
            return -1;
        pos += ll + 1;
    }
    return 0;
}
