#include "procinfo.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gs_proc_start_time(pid_t pid, uint64_t *start_time)
{
    char path[64];
    char buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* comm (field 2) may hold spaces and ')', so parse after the last ')'. */
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return -1;
    p += 2;
    if (*p == 'Z' || *p == 'X')
        return -1;
    /* p is at field 3 (state); start time is field 22. */
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
    }
    unsigned long long st = 0;
    if (sscanf(p, "%llu", &st) != 1)
        return -1;
    *start_time = st;
    return 0;
}

uint64_t gs_proc_pidns(void)
{
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) != 0)
        return 0;
    return (uint64_t)st.st_ino;
}

int gs_proc_alive(pid_t pid, uint64_t start_time, uint64_t pidns, uint64_t my_pidns)
{
    if (pidns != my_pidns || my_pidns == 0)
        return 1;
    uint64_t now = 0;
    if (gs_proc_start_time(pid, &now) != 0)
        return 0;
    return now == start_time;
}
