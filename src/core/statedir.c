#include "statedir.h"
#include "roster.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REGION_SUFFIX ".region"
#define AGENT_REGION "region"

static int fmt(char *buf, size_t len, const char *a, const char *b, const char *c)
{
    int n = snprintf(buf, len, "%s%s%s", a, b, c);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

void gs_statedir_default(char *buf, size_t len)
{
    const char *env = getenv("GPUSLICE_STATE_DIR");
    if (env && *env)
        snprintf(buf, len, "%s", env);
    else if (access("/run/gpuslice", W_OK) == 0 || (geteuid() == 0 && access("/run", W_OK) == 0))
        snprintf(buf, len, "/run/gpuslice");
    else
        snprintf(buf, len, "/tmp/gpuslice-%u", (unsigned)getuid());
}

void gs_statedir_fallback_region(char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/gpuslice-%u" REGION_SUFFIX, (unsigned)getuid());
}

int gs_statedir_region_path(char *buf, size_t len, const char *dir, const char *name)
{
    char file[NAME_MAX + 1];
    if (fmt(file, sizeof file, name, REGION_SUFFIX, "") != 0)
        return -1;
    return fmt(buf, len, dir, "/", file);
}

int gs_statedir_ledger_path(char *buf, size_t len, const char *ledger_dir, const char *uuid)
{
    char file[NAME_MAX + 1];
    if (fmt(file, sizeof file, uuid, ".ledger", "") != 0)
        return -1;
    return fmt(buf, len, ledger_dir, "/", file);
}

int gs_statedir_roster_path(char *buf, size_t len, const char *roster_dir, const char *uuid)
{
    char file[NAME_MAX + 1];
    if (fmt(file, sizeof file, uuid, "/", GS_ROSTER_FILE) != 0)
        return -1;
    return fmt(buf, len, roster_dir, "/", file);
}

int gs_statedir_parent(char *buf, size_t len, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return fmt(buf, len, ".", "", "");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= len)
        return -1;
    memcpy(buf, path, n);
    buf[n] = '\0';
    return 0;
}

int gs_statedir_agent_region_dir(char *buf, size_t len, const char *root, const char *key)
{
    return fmt(buf, len, root, "/", key);
}

int gs_statedir_agent_limits_dir(char *buf, size_t len, const char *root, const char *key)
{
    return fmt(buf, len, root, "/.limits/", key);
}

int gs_statedir_agent_ledger_dir(char *buf, size_t len, const char *root)
{
    return fmt(buf, len, root, "/.ledger", "");
}

int gs_statedir_agent_roster_dir(char *buf, size_t len, const char *root)
{
    return fmt(buf, len, root, "/.roster", "");
}

/* A regular file at dirfd/name, not following a symbolic link. */
static int is_regular_at(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

static int is_dir_at(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

int gs_statedir_each_region(const char *dir, gs_statedir_region_fn fn, void *arg)
{
    DIR *dh = opendir(dir);
    if (!dh)
        return -1;
    int fd = dirfd(dh);
    const struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(dh)) != NULL) {
        const char *name = e->d_name;
        if (name[0] == '.')
            continue;
        size_t len = strlen(name), sl = sizeof REGION_SUFFIX - 1;
        char path[PATH_MAX], key[NAME_MAX + 1];
        if (len > sl && strcmp(name + len - sl, REGION_SUFFIX) == 0) {
            if (!is_regular_at(fd, name) || fmt(path, sizeof path, dir, "/", name) != 0)
                continue;
            snprintf(key, sizeof key, "%.*s", (int)(len - sl), name);
            rc = fn(path, key, arg);
        } else if (is_dir_at(fd, name)) {
            char file[NAME_MAX + 1 + sizeof AGENT_REGION];
            snprintf(file, sizeof file, "%s/" AGENT_REGION, name);
            if (!is_regular_at(fd, file) || fmt(path, sizeof path, dir, "/", file) != 0)
                continue;
            rc = fn(path, name, arg);
        }
    }
    closedir(dh);
    return rc;
}
