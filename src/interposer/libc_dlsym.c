/* glibc's own dlsym, found once (see libc_dlsym.h). */
#define _GNU_SOURCE
#include "libc_dlsym.h"

#include <dlfcn.h>
#include <stddef.h>

dlsym_fn gs_real_dlsym;

dlsym_fn gs_resolve_libc_dlsym(void)
{
    dlsym_fn f = __atomic_load_n(&gs_real_dlsym, __ATOMIC_ACQUIRE);
    if (f)
        return f;
    /* dlsym moved from libdl to libc in glibc 2.34 and got a new version. */
    f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!f)
        f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (!f)
        f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17"); /* aarch64 */
    __atomic_store_n(&gs_real_dlsym, f, __ATOMIC_RELEASE);
    return f;
}

void *gs_libc_dlsym(void *handle, const char *name)
{
    return gs_resolve_libc_dlsym()(handle, name);
}
