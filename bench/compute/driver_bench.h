/*
 * What the driver-API benchmarks (launch_rate.c, probe_cost.c, event_cost.c)
 * share: the kernel they launch, its set-up on device 0's primary context,
 * glibc's own dlsym for their "driver alone" paths and the driver alone
 * itself (bench_bare_open). With libgpuslice.so
 * preloaded, dlsym on libcuda.so.1's handle hands back the interposer's
 * wrapper (as it must for programs that look the driver up themselves), so
 * a benchmark that wants the bare driver looks the name up through libc's
 * dlsym, found by version in libc's own scope: the interposer does not
 * wrap dlvsym.
 */
#ifndef GS_BENCH_DRIVER_BENCH_H
#define GS_BENCH_DRIVER_BENCH_H

#include "abi/cuda_abi.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

typedef CUresult (*bench_launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream, void **, void **);
typedef void *(*bench_dlsym_fn)(void *, const char *);
typedef CUresult (*bench_stream_create_fn)(CUstream *, unsigned);
typedef CUresult (*bench_event_create_fn)(CUevent *, unsigned);
typedef CUresult (*bench_event_record_fn)(CUevent, CUstream);
typedef CUresult (*bench_elapsed_fn)(float *, CUevent, CUevent);
/* How a benchmark looks a driver entry point up (naming the misses). */
typedef void *(*bench_lookup_fn)(const char *name);

static inline bench_dlsym_fn bench_real_dlsym(void)
{
    static const char *const versions[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17" };
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *f = NULL;
    for (size_t i = 0; libc && !f && i < sizeof versions / sizeof versions[0]; i++)
        f = dlvsym(libc, "dlsym", versions[i]);
    return (bench_dlsym_fn)f;
}

/* The driver alone, for a benchmark that times the driver's own calls:
 * libcuda.so.1 opened locally, its entry points looked up through glibc's
 * own dlsym, so never the interposer's even where it is preloaded. One a
 * process (each benchmark is one file). */
struct bench_bare {
    const char *prog; /* names the failures on stderr */
    void *driver;
    bench_dlsym_fn dlsym;
};

static inline struct bench_bare *bench_bare(void)
{
    static struct bench_bare b;
    return &b;
}

/* Opens the driver alone for prog: 0, or -1 with the failure on stderr. */
static inline int bench_bare_open(const char *prog)
{
    struct bench_bare *b = bench_bare();
    b->prog = prog;
    b->driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!b->driver) {
        fprintf(stderr, "%s: %s\n", prog, dlerror());
        return -1;
    }
    if (!(b->dlsym = bench_real_dlsym())) {
        fprintf(stderr, "%s: glibc's dlsym not found by version\n", prog);
        return -1;
    }
    return 0;
}

/* An entry point of the driver alone (a bench_lookup_fn); NULL, named on
 * stderr, where it has none. */
static inline void *bench_bare_sym(const char *name)
{
    struct bench_bare *b = bench_bare();
    void *p = b->dlsym(b->driver, name);
    if (!p)
        fprintf(stderr, "%s: %s not found in libcuda.so.1\n", b->prog, name);
    return p;
}

/* The driver alone's cuEventElapsedTime_v2 (CUDA 12.8+), else its first. */
static inline bench_elapsed_fn bench_bare_elapsed(void)
{
    struct bench_bare *b = bench_bare();
    bench_elapsed_fn f = (bench_elapsed_fn)b->dlsym(b->driver, "cuEventElapsedTime_v2");
    return f ? f : (bench_elapsed_fn)bench_bare_sym("cuEventElapsedTime");
}

static inline double bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* qsort's order of doubles. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Initialises the driver, makes device 0's primary context current and
 * loads the kernel name from ptx (the driver compiles it for the device),
 * each entry point looked up through lookup. 0, or -1 with the failure on
 * stderr under prog's name. */
static inline int bench_kernel(const char *prog, bench_lookup_fn lookup, const char *ptx, const char *name,
                               CUfunction *f)
{
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))lookup("cuInit");
    CUresult (*device_get)(CUdevice *, int) = (CUresult(*)(CUdevice *, int))lookup("cuDeviceGet");
    CUresult (*retain)(CUcontext *, CUdevice) = (CUresult(*)(CUcontext *, CUdevice))lookup("cuDevicePrimaryCtxRetain");
    CUresult (*set_current)(CUcontext) = (CUresult(*)(CUcontext))lookup("cuCtxSetCurrent");
    CUresult (*load)(CUmodule *, const void *) = (CUresult(*)(CUmodule *, const void *))lookup("cuModuleLoadData");
    CUresult (*get_function)(CUfunction *, CUmodule, const char *) =
        (CUresult(*)(CUfunction *, CUmodule, const char *))lookup("cuModuleGetFunction");
    if (!init || !device_get || !retain || !set_current || !load || !get_function)
        return -1;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUresult rc = init(0);
    if (!rc)
        rc = device_get(&dev, 0);
    if (!rc)
        rc = retain(&ctx, dev);
    if (!rc)
        rc = set_current(ctx);
    if (!rc)
        rc = load(&mod, ptx);
    if (!rc)
        rc = get_function(f, mod, name);
    if (rc)
        fprintf(stderr, "%s: setting up the kernel failed: CUresult %d\n", prog, rc);
    return rc ? -1 : 0;
}

/* bench_kernel of an empty kernel. */
static inline int bench_noop_kernel(const char *prog, bench_lookup_fn lookup, CUfunction *f)
{
    static const char ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n.visible .entry noop()\n{\n ret;\n}\n";
    return bench_kernel(prog, lookup, ptx, "noop", f);
}

#endif
