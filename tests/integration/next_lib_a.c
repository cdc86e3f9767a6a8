/* First of two libraries defining gs_next_probe: it looks up "the next
 * definition after me" with dlsym(RTLD_NEXT), as interposing libraries do. */
#define _GNU_SOURCE
#include <dlfcn.h>

__attribute__((visibility("default"))) int gs_next_probe(void);
__attribute__((visibility("default"))) int gs_next_probe_after_a(void);

int gs_next_probe(void)
{
    return 1;
}

int gs_next_probe_after_a(void)
{
    int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "gs_next_probe");
    return next ? next() : -1;
}
