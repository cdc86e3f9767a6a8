/*
 * Launch rate through the driver API: an empty kernel launched in a loop on
 * the null stream, a context synchronise every --sync-every launches, for
 * --secs seconds after --warm seconds. Prints one JSON line. With no Python
 * between launches it resolves what the interposer adds per launch (docs/
 * compute.md: with no limit, the launch path must stay within 2 % of native).
 *
 * The driver's symbols are looked up in the global scope, so that an
 * interposer in LD_PRELOAD is the one called, as it is for any program.
 * With --paired 1 the same process alternates blocks of launches through
 * that cuLaunchKernel and through libcuda.so.1's own (looked up by glibc's
 * own dlsym, driver_bench.h: the interposer's dlsym would hand back its
 * wrapper) and reports both rates and their ratio:
 * each pair of blocks runs under the same host conditions, which drift by
 * 10 % between processes on the GPU hosts measured (a ratio of two separate
 * runs cannot resolve 2 %).
 * On a GPU host without the build tree: cc -O2 -Isrc bench/compute/launch_rate.c -ldl
 *   launch_rate [--secs 5] [--warm 1] [--sync-every 1000] [--paired 0|1]
 */
#define _GNU_SOURCE
#include "driver_bench.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static int parse(int argc, char **argv, double *secs, double *warm, long *every, long *paired)
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
        else if (!strcmp(flag, "--paired"))
            *paired = strtol(v, &end, 10);
        else {
            fprintf(stderr, "launch_rate: unknown flag %s (--secs, --warm, --sync-every, --paired)\n", flag);
            return -1;
        }
        if (!end || *end || end == v) {
            fprintf(stderr, "launch_rate: %s %s: not a number\n", flag, v);
            return -1;
        }
    }
    if (*secs <= 0 || *warm < 0 || *every < 1 || (*paired != 0 && *paired != 1)) {
        fprintf(stderr, "launch_rate: --secs must be > 0, --warm >= 0, --sync-every >= 1, --paired 0 or 1\n");
        return -1;
    }
    return 0;
}

/* One block: `every` launches through fn and a synchronise; its seconds, or
 * -1 when a launch failed. */
static double block(bench_launch_fn fn, sync_fn sync, CUfunction f, long every)
{
    double t = now_s();
    CUresult rc = CUDA_SUCCESS;
    for (long i = 0; i < every && !rc; i++)
        rc = fn(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    if (!rc)
        rc = sync();
    if (rc) {
        fprintf(stderr, "launch_rate: a launch failed: CUresult %d\n", rc);
        return -1;
    }
    return now_s() - t;
}

int main(int argc, char **argv)
{
    double secs = 5, warm = 1;
    long every = 1000, paired = 0;
    if (parse(argc, argv, &secs, &warm, &every, &paired) != 0)
        return 2;
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!driver) {
        fprintf(stderr, "launch_rate: %s\n", dlerror());
        return 1;
    }
    bench_launch_fn launch = (bench_launch_fn)sym("cuLaunchKernel");
    bench_dlsym_fn real_dlsym = bench_real_dlsym();
    bench_launch_fn direct = real_dlsym ? (bench_launch_fn)real_dlsym(driver, "cuLaunchKernel") : NULL;
    if (!direct)
        fprintf(stderr, "launch_rate: libcuda.so.1's own cuLaunchKernel not found through glibc's dlsym\n");
    sync_fn sync = (sync_fn)sym("cuCtxSynchronize");
    CUfunction f;
    if (!launch || !direct || !sync || bench_noop_kernel("launch_rate", sym, &f) != 0)
        return 1;
    double t0 = now_s(), start = t0 + warm, end = start + secs, spent[2] = { 0, 0 };
    unsigned long long counted[2] = { 0, 0 };
    /* pairs alternate which path goes first, so neither always follows a sync */
    for (unsigned long long n = 0;; n++) {
        for (int k = 0; k < 1 + (int)paired; k++) {
            int path = paired ? (int)((n + (unsigned long long)k) & 1) : 0;
            double el = block(path ? direct : launch, sync, f, every);
            if (el < 0)
                return 1;
            if (now_s() >= start) {
                spent[path] += el;
                counted[path] += (unsigned long long)every;
            }
        }
        if (now_s() >= end)
            break;
    }
    double rate = (double)counted[0] / spent[0];
    if (!paired) {
        printf("{\"launches\": %llu, \"secs\": %.3f, \"launches_per_s\": %.1f}\n", counted[0], spent[0], rate);
        return 0;
    }
    double native = (double)counted[1] / spent[1];
    printf("{\"launches\": %llu, \"secs\": %.3f, \"launches_per_s\": %.1f, \"direct_launches_per_s\": %.1f, "
           "\"vs_direct\": %.4f}\n",
           counted[0], spent[0], rate, native, rate / native);
    return 0;
}
