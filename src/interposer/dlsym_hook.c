/* dlsym on a real handle: look the name up in glibc, then hand back our
 * wrapper if the answer is a driver entry point we wrap. RTLD_NEXT never
 * reaches here (see dlsym_trampoline.S). */
#define _GNU_SOURCE
#include "host_wait_hooks.h"
#include "libc_dlsym.h"
#include "real_driver.h"

#include <stddef.h>

void *gs_dlsym_handle(void *handle, const char *name);

static int is_driver_name(const char *name)
{
    return name && ((name[0] == 'c' && name[1] == 'u' && name[2] != 'd') || /* not cuda* (runtime) */
                    (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l'));
}

void *gs_dlsym_handle(void *handle, const char *name)
{
    void *p = gs_libc_dlsym(handle, name);
    return p && is_driver_name(name) ? gs_lookup_wrapped(name, p) : p;
}

__attribute__((constructor)) static void resolve_early(void)
{
    (void)gs_resolve_libc_dlsym();
}
