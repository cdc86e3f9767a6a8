/* dlsym on a real handle: look the name up in glibc, then hand back our
 * wrapper if the answer is a driver entry point we wrap. RTLD_NEXT never
 * reaches here (see dlsym_trampoline.S). */
#define _GNU_SOURCE
#include "real_driver.h"

#include <dlfcn.h>
#include <stddef.h>

typedef void *(*dlsym_fn)(void *, const char *);

/* Read by the trampoline; written once. */
dlsym_fn gs_real_dlsym;
dlsym_fn gs_resolve_libc_dlsym(void);
void *gs_dlsym_handle(void *handle, const char *name);

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

static int is_driver_name(const char *name)
{
    return name && ((name[0] == 'c' && name[1] == 'u' && name[2] != 'd') || /* not cuda* (runtime) */
                    (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l'));
}

void *gs_dlsym_handle(void *handle, const char *name)
{
    void *p = gs_libc_dlsym(handle, name);
    if (p && is_driver_name(name))
        p = gs_wrapper_for(p);
    return p;
}

__attribute__((constructor)) static void resolve_early(void)
{
    (void)gs_resolve_libc_dlsym();
}
