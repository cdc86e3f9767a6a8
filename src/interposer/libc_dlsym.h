/* glibc's dlsym, never ours: the dlsym hook (dlsym_hook.c, reached through
 * dlsym_trampoline.S) answers with it before swapping in our wrappers, and
 * the real driver (real_driver.c) resolves the driver's entry points with
 * it. */
#ifndef GPUSLICE_LIBC_DLSYM_H
#define GPUSLICE_LIBC_DLSYM_H

typedef void *(*dlsym_fn)(void *, const char *);

/* Read by the trampoline; written once, by gs_resolve_libc_dlsym. */
extern dlsym_fn gs_real_dlsym;
/* Finds glibc's dlsym (once) and returns it. */
dlsym_fn gs_resolve_libc_dlsym(void);

void *gs_libc_dlsym(void *handle, const char *name);

#endif
