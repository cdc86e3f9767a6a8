#define _GNU_SOURCE
#include "ofdlock.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static struct flock byte_at(short type, off_t off)
{
    struct flock fl = { 0 };
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = off;
    fl.l_len = 1;
    fl.l_pid = 0; /* required by F_OFD_* */
    return fl;
}

int gs_ofd_lock_byte(int fd, off_t off)
{
    struct flock fl = byte_at(F_WRLCK, off);
    return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -1;
}

void gs_ofd_unlock_byte(int fd, off_t off)
{
    struct flock fl = byte_at(F_UNLCK, off);
    (void)fcntl(fd, F_OFD_SETLK, &fl);
}

int gs_ofd_hold(const char *path, off_t off)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    if (gs_ofd_lock_byte(fd, off) != 0) {
        int e = errno;
        close(fd);
        errno = e == EACCES ? EAGAIN : e;
        return -1;
    }
    return fd;
}

void gs_ofd_release(int fd)
{
    if (fd >= 0)
        close(fd);
}

int gs_ofd_held(int fd, off_t off)
{
    struct flock fl = byte_at(F_WRLCK, off);
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0)
        return -1;
    return fl.l_type != F_UNLCK;
}

int gs_ofd_any_held(int fd)
{
    struct flock fl = byte_at(F_WRLCK, 0);
    fl.l_len = 0; /* to the end of the file, however long */
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0)
        return -1;
    return fl.l_type != F_UNLCK;
}
