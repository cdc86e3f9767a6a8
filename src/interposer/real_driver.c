#define _GNU_SOURCE
#include "real_driver.h"
#include "fork_hooks.h"
#include "libc_dlsym.h"
#include "log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

void *gs_real_ptr[GS_E_COUNT];
int gs_lib_ready[2];

static const char *const entry_name[GS_E_COUNT] = {
#define CU_ENTRY(name, params) #name,
#define NVML_ENTRY(name, params) #name,
#include "entry_points.def"
};

static const unsigned char entry_lib[GS_E_COUNT] = {
#define CU_ENTRY(name, params) GS_LIB_CUDA,
#define NVML_ENTRY(name, params) GS_LIB_NVML,
#include "entry_points.def"
};

static void *const entry_wrapper[GS_E_COUNT] = {
#define CU_ENTRY(name, params) (void *)name,
#define NVML_ENTRY(name, params) (void *)name,
#define CU_CALL(name, params) NULL,
#define NVML_CALL(name, params) NULL,
#include "entry_points.def"
};

static const char *const lib_soname[2] = { "libcuda.so.1", "libnvidia-ml.so.1" };
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;

int gs_real_resolve(enum gs_lib lib, int load)
{
    if (__atomic_load_n(&gs_lib_ready[lib], __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&resolve_lock);
    int rc = 0;
    if (!gs_lib_ready[lib]) {
        void *h = dlopen(lib_soname[lib], RTLD_LAZY | RTLD_NOLOAD);
        if (!h && load)
            h = dlopen(lib_soname[lib], RTLD_LAZY);
        if (!h) {
            rc = -1;
            /* A program that never loads the driver still runs; a wrapper
             * called anyway finds NULL and reports "not found". */
            if (load)
                __atomic_store_n(&gs_lib_ready[lib], 1, __ATOMIC_RELEASE);
        } else {
            for (int i = 0; i < GS_E_COUNT; i++)
                if (entry_lib[i] == lib)
                    gs_real_ptr[i] = gs_libc_dlsym(h, entry_name[i]);
            __atomic_store_n(&gs_lib_ready[lib], 1, __ATOMIC_RELEASE);
            gs_log(GS_LOG_DEBUG, "resolved %s", lib_soname[lib]);
        }
    }
    pthread_mutex_unlock(&resolve_lock);
    return rc;
}

void gs_real_fork_prepare(void)
{
    pthread_mutex_lock(&resolve_lock); /* a dlopen under way finishes first */
}

void gs_real_fork_parent(void)
{
    pthread_mutex_unlock(&resolve_lock);
}

void gs_real_fork_child(void)
{
    pthread_mutex_unlock(&resolve_lock);
}

int gs_is_wrapper(const void *p)
{
    for (int i = 0; i < GS_E_COUNT; i++)
        if (entry_wrapper[i] == p)
            return 1;
    return 0;
}

void *gs_wrapper_for(void *p)
{
    if (!p)
        return p;
    for (int lib = 0; lib < 2; lib++)
        if (!__atomic_load_n(&gs_lib_ready[lib], __ATOMIC_ACQUIRE))
            gs_real_resolve((enum gs_lib)lib, 0);
    for (int i = 0; i < GS_E_COUNT; i++)
        if (gs_real_ptr[i] == p && entry_wrapper[i])
            return entry_wrapper[i];
    return p;
}
