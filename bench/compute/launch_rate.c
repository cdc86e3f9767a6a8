/*
 * Launch rate through the driver API: an empty kernel launched in a loop on
 * the null stream, a context synchronise every --sync-every launches, for
 * --secs seconds after --warm seconds. Prints one JSON line. With no Python
 * between launches it resolves what the interposer adds per launch (docs/
 * compute.md: with no limit, the launch path must stay within 2 % of native).
 *
 * The driver's symbols are looked up in the global scope, so that an
 * interposer in LD_PRELOAD is the one called, as it is for any program.
 * On a GPU host without the build tree: cc -O2 -Isrc bench/compute/launch_rate.c -ldl
 *   launch_rate [--secs 5] [--warm 1] [--sync-every 1000]
 */
#define _GNU_SOURCE
#include "abi/cuda_abi.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* An empty kernel; the driver compiles the PTX for the device it runs on. */
static const char noop_ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n.visible .entry noop()\n{\n ret;\n}\n";

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*device_get_fn)(CUdevice *, int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*set_current_fn)(CUcontext);
typedef CUresult (*load_fn)(CUmodule *, const void *);
typedef CUresult (*get_function_fn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
typedef CUresult (*sync_fn)(void);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p)
        fprintf(stderr, "launch_rate: %s not found in libcuda.so.1\n", name);
    return p;
}

static int parse(int argc, char **argv, double *secs, double *warm, long *every)
{
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (i + 1 >= argc) {
            fprintf(stderr, "launch_rate: %s needs a value\n", argv[i]);
            return -1;
        }
        const char *flag = argv[i], *v = argv[++i];
        if (!strcmp(flag, "--secs"))
            *secs = strtod(v, &end);
        else if (!strcmp(flag, "--warm"))
            *warm = strtod(v, &end);
        else if (!strcmp(flag, "--sync-every"))
            *every = strtol(v, &end, 10);
        else {
            fprintf(stderr, "launch_rate: unknown flag %s (--secs, --warm, --sync-every)\n", flag);
            return -1;
        }
        if (!end || *end || end == v) {
            fprintf(stderr, "launch_rate: %s %s: not a number\n", flag, v);
            return -1;
        }
    }
    if (*secs <= 0 || *warm < 0 || *every < 1) {
        fprintf(stderr, "launch_rate: --secs must be > 0, --warm >= 0, --sync-every >= 1\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    double secs = 5, warm = 1;
    long every = 1000;
    if (parse(argc, argv, &secs, &warm, &every) != 0)
        return 2;
    if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "launch_rate: %s\n", dlerror());
        return 1;
    }
    init_fn init = (init_fn)sym("cuInit");
    device_get_fn device_get = (device_get_fn)sym("cuDeviceGet");
    retain_fn retain = (retain_fn)sym("cuDevicePrimaryCtxRetain");
    set_current_fn set_current = (set_current_fn)sym("cuCtxSetCurrent");
    load_fn load = (load_fn)sym("cuModuleLoadData");
    get_function_fn get_function = (get_function_fn)sym("cuModuleGetFunction");
    launch_fn launch = (launch_fn)sym("cuLaunchKernel");
    sync_fn sync = (sync_fn)sym("cuCtxSynchronize");
    if (!init || !device_get || !retain || !set_current || !load || !get_function || !launch || !sync)
        return 1;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction f;
    CUresult rc = init(0);
    if (!rc)
        rc = device_get(&dev, 0);
    if (!rc)
        rc = retain(&ctx, dev);
    if (!rc)
        rc = set_current(ctx);
    if (!rc)
        rc = load(&mod, noop_ptx);
    if (!rc)
        rc = get_function(&f, mod, "noop");
    if (rc) {
        fprintf(stderr, "launch_rate: setting up the kernel failed: CUresult %d\n", rc);
        return 1;
    }
    double t0 = now_s(), start = t0 + warm, end = start + secs, tm = 0;
    unsigned long long counted = 0;
    for (int measuring = 0;;) {
        for (long i = 0; i < every && !rc; i++)
            rc = launch(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
        if (!rc)
            rc = sync();
        if (rc) {
            fprintf(stderr, "launch_rate: a launch failed: CUresult %d\n", rc);
            return 1;
        }
        double t = now_s();
        if (measuring)
            counted += (unsigned long long)every;
        else if (t >= start) {
            measuring = 1;
            tm = t;
        }
        if (measuring && t >= end)
            break;
    }
    double el = now_s() - tm;
    printf("{\"launches\": %llu, \"secs\": %.3f, \"launches_per_s\": %.1f}\n", counted, el, (double)counted / el);
    return 0;
}
