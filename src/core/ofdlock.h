/*
 * Liveness through open-file-description locks. A process holds a write
 * lock on one byte of a shared file (its slot) through a descriptor of its
 * own; the kernel drops the lock when the process dies, in whatever pid
 * namespace it ran, so any other process can tell a live slot from a dead
 * one without trusting a pid.
 *
 * A forked child shares its parent's descriptions: it must close the
 * inherited descriptor (gs_ofd_release) and take its own.
 */
#ifndef GPUSLICE_OFDLOCK_H
#define GPUSLICE_OFDLOCK_H

#include <sys/types.h>

/* Opens path anew (read-write, close-on-exec, no symlink) and write-locks
 * the byte at off without waiting. Returns the descriptor, or -1 (errno:
 * EAGAIN when another process holds that byte). */
int gs_ofd_hold(const char *path, off_t off);

/* The same on an already open descriptor of the file (one that this
 * process opened itself, so its description is its own). 0 or -1. */
int gs_ofd_lock_byte(int fd, off_t off);

/* Drops the lock at off (the descriptor stays open). */
void gs_ofd_unlock_byte(int fd, off_t off);

/* Closes a descriptor from gs_ofd_hold, dropping its locks. */
void gs_ofd_release(int fd);

/* 1 when some other open file description holds a lock on the byte at off
 * of the file open as fd, 0 when none does, -1 when the kernel cannot say. */
int gs_ofd_held(int fd, off_t off);

/* The same for any byte of the file: whether some process of any build
 * holds a lock on it (a region's slot, its run byte, its lock). */
int gs_ofd_any_held(int fd);

#endif
