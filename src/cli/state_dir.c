/* The state directory a command uses. Its regions set its user's limits, so
 * it must be one that only that user (or root) controls, and later opens by
 * name must reach what was checked: another user who owns, may write, or may
 * swap a directory on the way (a /tmp/gpuslice-<uid> made first, a symbolic
 * link, a trailing '/' that made the kernel follow one) would control them. */
#include "cli.h"
#include "statedir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* path made absolute, without empty or '.' parts: out, or -1 after a
 * message (a '..' part, or too long). */
static int tidy(const char *cmd, const char *path, char *out, size_t len)
{
    char whole[PATH_MAX * 2];
    char cwd[PATH_MAX];
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd)) {
        fprintf(stderr, "gpuslice %s: state directory '%s': cannot read the current directory: %s\n", cmd, path,
                strerror(errno));
        return -1;
    }
    if ((size_t)snprintf(whole, sizeof whole, "%s/%s", path[0] == '/' ? "" : cwd, path) >= sizeof whole) {
        fprintf(stderr, "gpuslice %s: state directory '%s': path too long\n", cmd, path);
        return -1;
    }
    size_t n = 0;
    out[0] = '\0';
    for (char *save = NULL, *part = strtok_r(whole, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
        if (!strcmp(part, "."))
            continue;
        if (!strcmp(part, "..")) {
            fprintf(stderr, "gpuslice %s: state directory '%s': name it without '..'\n", cmd, path);
            return -1;
        }
        int w = snprintf(out + n, len - n, "/%s", part);
        if (w < 0 || (size_t)w >= len - n) {
            fprintf(stderr, "gpuslice %s: state directory '%s': path too long\n", cmd, path);
            return -1;
        }
        n += (size_t)w;
    }
    if (n == 0) {
        fprintf(stderr, "gpuslice %s: state directory '%s': not '/' itself\n", cmd, path);
        return -1;
    }
    return 0;
}

/* Whether st, a directory on the way to the state directory, is one only
 * root or we can change: owned by either, and writable by nobody else
 * unless sticky (as /tmp is: others there cannot rename what is ours). */
static int safe_ancestor(const char *cmd, const char *dir, const struct stat *st)
{
    if (st->st_uid != 0 && st->st_uid != geteuid()) {
        fprintf(stderr,
                "gpuslice %s: %s, on the way to the state directory, is owned by uid %u, not by you (uid %u) or "
                "root: that user could put another directory in its place; use a state directory elsewhere "
                "(--state-dir or GPUSLICE_STATE_DIR)\n",
                cmd, dir, (unsigned)st->st_uid, (unsigned)geteuid());
        return -1;
    }
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX)) {
        fprintf(stderr,
                "gpuslice %s: %s, on the way to the state directory, has mode %04o: other users could put another "
                "directory in its place; chmod go-w it or use a state directory elsewhere\n",
                cmd, dir, (unsigned)(st->st_mode & 07777));
        return -1;
    }
    return 0;
}

/* The parent of the tidy path, its symbolic links resolved: into parent
 * (PATH_MAX bytes), once every directory from '/' down to it passed
 * safe_ancestor. */
static int safe_parent(const char *cmd, const char *path, char *parent)
{
    char given[PATH_MAX], at[PATH_MAX];
    if (gs_statedir_parent(given, sizeof given, path) != 0 || !realpath(given, parent)) {
        fprintf(stderr, "gpuslice %s: state directory %s: cannot resolve the directory above it: %s\n", cmd, path,
                strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat("/", &st) != 0 || safe_ancestor(cmd, "/", &st) != 0)
        return -1;
    size_t n = strlen(parent);
    for (size_t i = 1; i <= n && n > 1; i++) {
        if (parent[i] != '/' && parent[i] != '\0')
            continue;
        memcpy(at, parent, i);
        at[i] = '\0';
        if (stat(at, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "gpuslice %s: %s, on the way to the state directory: not a directory\n", cmd, at);
            return -1;
        }
        if (safe_ancestor(cmd, at, &st) != 0)
            return -1;
    }
    return 0;
}

/* The directory itself: not a symbolic link, ours or root's, and writable by
 * nobody else. */
static int safe_leaf(const char *cmd, const char *dir)
{
    struct stat st;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        fprintf(stderr, "gpuslice %s: state directory %s: %s\n", cmd, dir,
                e == ELOOP || e == ENOTDIR ? "not a directory (a symbolic link or a file); remove it" : strerror(e));
        return -1;
    }
    int rc = fstat(fd, &st);
    int e = errno;
    close(fd);
    if (rc != 0) {
        fprintf(stderr, "gpuslice %s: state directory %s: %s\n", cmd, dir, strerror(e));
        return -1;
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        fprintf(stderr,
                "gpuslice %s: state directory %s is owned by uid %u, mode %04o, not by you (uid %u) "
                "or root; another user may have made it to control your limits: remove it or set "
                "GPUSLICE_STATE_DIR\n",
                cmd, dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        fprintf(stderr,
                "gpuslice %s: state directory %s (owner uid %u) has mode %04o, which lets other users "
                "write to it: chmod go-w it or set GPUSLICE_STATE_DIR\n",
                cmd, dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        return -1;
    }
    return 0;
}

int gs_cli_state_dir(const char *cmd, const char *given, int create, char *out, size_t len)
{
    char asked[PATH_MAX], path[PATH_MAX], parent[PATH_MAX];
    if (given)
        snprintf(asked, sizeof asked, "%s", given);
    else
        gs_statedir_default(asked, sizeof asked);
    if (tidy(cmd, asked, path, sizeof path) != 0 || safe_parent(cmd, path, parent) != 0)
        return -1;
    const char *leaf = strrchr(path, '/') + 1;
    int n = snprintf(out, len, "%s/%s", strcmp(parent, "/") ? parent : "", leaf);
    if (n < 0 || (size_t)n >= len) {
        fprintf(stderr, "gpuslice %s: state directory %s: path too long\n", cmd, path);
        return -1;
    }
    if (create && mkdir(out, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "gpuslice %s: cannot create state directory %s: %s\n", cmd, out, strerror(errno));
        return -1;
    }
    struct stat st;
    if (!create && lstat(out, &st) != 0 && errno == ENOENT)
        return 1;
    return safe_leaf(cmd, out);
}
