/* Preloaded before the interposer: a dlopen of libcuda.so.1 from any thread
 * but the main one sets gs_slow_dlopen_inside and takes 300 ms, so that
 * the main thread can fork while the interposer resolves the driver. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((visibility("default"))) int gs_slow_dlopen_inside;

__attribute__((visibility("default"))) void *dlopen(const char *file, int flags)
{
    static void *(*real)(const char *, int);
    if (!real)
        real = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
    if (file && strstr(file, "libcuda.so") && syscall(SYS_gettid) != getpid()) {
        __atomic_store_n(&gs_slow_dlopen_inside, 1, __ATOMIC_RELEASE);
        usleep(300 * 1000);
    }
    return real ? real(file, flags) : NULL;
}
