/* The node agent's per-GPU roster; see roster.h. */
#define _GNU_SOURCE
#include "roster.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "limiter.h"

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* One entry line (without its newline) into e: 0, or -1 with why. */
static int parse_line(const char *s, size_t len, struct gs_roster_entry *e, const char **why)
{
    size_t i = 0;
    uint64_t id = 0;
    for (; i < 16; i++) {
        int d = i < len ? hex_digit(s[i]) : -1;
        if (d < 0) {
            *why = "the container id is not 16 lowercase hex digits";
            return -1;
        }
        id = id << 4 | (uint64_t)d;
    }
    if (id == 0 || i >= len || s[i++] != ' ') {
        *why = id == 0 ? "container id 0 names no container" : "no mode after the container id";
        return -1;
    }
    int capped = len - i > 4 && memcmp(s + i, "cap ", 4) == 0;
    if (!capped && !(len - i > 6 && memcmp(s + i, "share ", 6) == 0)) {
        *why = "the mode is neither \"cap\" nor \"share\"";
        return -1;
    }
    i += capped ? 4 : 6;
    uint32_t w = 0, most = capped ? 100 : GS_LIM_MAX_WEIGHT;
    size_t from = i;
    while (i < len && s[i] >= '0' && s[i] <= '9' && i - from < 6)
        w = w * 10 + (uint32_t)(s[i++] - '0');
    if (i == from || w == 0 || w > most || s[from] == '0' || i >= len || s[i++] != ' ') {
        *why = capped ? "the cap is not an integer 1..100 followed by a key"
                      : "the weight is not an integer 1..10000 followed by a key";
        return -1;
    }
    size_t k = 0;
    while (i < len && key_char(s[i]) && k < GS_ROSTER_KEY_MAX - 1)
        e->key[k++] = s[i++];
    if (k == 0 || i != len) {
        *why = "the key is not 1..31 characters of [A-Za-z0-9_-]";
        return -1;
    }
    e->key[k] = '\0';
    e->container = id;
    e->weight = w;
    e->capped = capped;
    return 0;
}

int gs_roster_parse(const char *text, size_t len, struct gs_roster *r, char *err, size_t errlen)
{
    r->n = 0;
    size_t hl = strlen(GS_ROSTER_HEADER);
    if (len > GS_ROSTER_MAX_BYTES) {
        snprintf(err, errlen, "longer than %d bytes", GS_ROSTER_MAX_BYTES);
        return -1;
    }
    if (len < hl || memcmp(text, GS_ROSTER_HEADER, hl) != 0) {
        snprintf(err, errlen, "line 1 is not \"%.*s\"", (int)hl - 1, GS_ROSTER_HEADER);
        return -1;
    }
    unsigned line = 1;
    for (size_t at = hl; at < len;) {
        line++;
        const char *nl = memchr(text + at, '\n', len - at);
        const char *why = NULL;
        struct gs_roster_entry e = { 0 };
        if (!nl)
            why = "it does not end in a newline";
        else if (r->n == GS_ROSTER_MAX)
            why = "more entries than a ledger has members (128)";
        else if (parse_line(text + at, (size_t)(nl - (text + at)), &e, &why) == 0 && gs_roster_find(r, e.container))
            why = "the container id is listed twice";
        if (why) {
            snprintf(err, errlen, "line %u: %s", line, why);
            r->n = 0;
            return -1;
        }
        r->e[r->n++] = e;
        at = (size_t)(nl - text) + 1;
    }
    return 0;
}

int gs_roster_load(const char *path, struct gs_roster *r, char *err, size_t errlen)
{
    static char buf[GS_ROSTER_MAX_BYTES + 1]; /* not reentrant: roster.h */
    r->n = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    struct statvfs vfs;
    const char *why = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (fstatvfs(fd, &vfs) != 0 || !(vfs.f_flag & ST_RDONLY))
        why = "not on a read-only mount (a tenant could have written it)";
    ssize_t got = why ? -1 : read(fd, buf, sizeof buf);
    close(fd);
    if (!why && (got < 0 || got > GS_ROSTER_MAX_BYTES))
        why = got < 0 ? "unreadable" : "longer than 16384 bytes";
    if (why) {
        snprintf(err, errlen, "%s: %s", path, why);
        return -1;
    }
    char perr[200];
    if (gs_roster_parse(buf, (size_t)got, r, perr, sizeof perr) != 0) {
        snprintf(err, errlen, "%s: %s", path, perr);
        return -1;
    }
    return 0;
}

const struct gs_roster_entry *gs_roster_find(const struct gs_roster *r, uint64_t container)
{
    for (unsigned i = 0; i < r->n; i++)
        if (r->e[i].container == container)
            return &r->e[i];
    return NULL;
}

int gs_roster_format(const struct gs_roster *r, char *out, size_t len)
{
    int l = snprintf(out, len, "%s", GS_ROSTER_HEADER);
    for (unsigned i = 0; i < r->n && l >= 0 && (size_t)l < len; i++)
        l += snprintf(out + l, len - (size_t)l, "%016llx %s %u %s\n", (unsigned long long)r->e[i].container,
                      r->e[i].capped ? "cap" : "share", r->e[i].weight, r->e[i].key);
    return l >= 0 && (size_t)l < len ? 0 : -1;
}
