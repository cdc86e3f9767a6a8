/*
 * glibc's own dlsym, for the driver-API benchmarks' "driver alone" paths.
 * With libgpuslice.so preloaded, dlsym on libcuda.so.1's handle hands back
 * the interposer's wrapper (as it must for programs that look the driver up
 * themselves), so a benchmark that wants the bare driver looks the name up
 * through libc's dlsym, found by version in libc's own scope: the
 * interposer does not wrap dlvsym.
 */
#ifndef GS_BENCH_REAL_DLSYM_H
#define GS_BENCH_REAL_DLSYM_H

#include <dlfcn.h>
#include <stddef.h>

typedef void *(*bench_dlsym_fn)(void *, const char *);

static inline bench_dlsym_fn bench_real_dlsym(void)
{
    static const char *const versions[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17" };
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *f = NULL;
    for (size_t i = 0; libc && !f && i < sizeof versions / sizeof versions[0]; i++)
        f = dlvsym(libc, "dlsym", versions[i]);
    return (bench_dlsym_fn)f;
}

#endif
