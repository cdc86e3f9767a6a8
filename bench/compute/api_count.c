/*
 * Which CUDA driver and runtime entry points a workload calls, and how
 * often: loaded by the driver as an injection library
 * (CUDA_INJECTION64_PATH), it subscribes to CUPTI's driver and runtime API
 * callbacks and, when the process exits, appends one line per entry point
 * called ("driver cuStreamSynchronize 4120") to $API_COUNT_OUT.PID. It
 * tells which of a framework's waits (a stream's, a context's, an event's,
 * a synchronous copy) the compute limiter's wait hooks see
 * (docs/compute.md, "Busy intervals"): JAX and CuPy reach the driver
 * through their own paths, not PyTorch's.
 *
 * CUPTI is opened at run time ($API_COUNT_CUPTI, the libcupti.so a CUDA
 * toolkit or the nvidia-cuda-cupti wheel ships), so that the build needs no
 * CUPTI headers; the few declarations used are re-typed from CUPTI's
 * callback API reference. Run the workload without the interposer: it
 * would be counted too.
 *   cc -O2 -shared -fPIC bench/compute/api_count.c -ldl -o api_count.so
 *   CUDA_INJECTION64_PATH=$PWD/api_count.so API_COUNT_CUPTI=.../libcupti.so.13 API_COUNT_OUT=/tmp/calls python3 ...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { CB_DOMAIN_DRIVER = 1, CB_DOMAIN_RUNTIME = 2, CB_SITE_ENTER = 0 };
/* Callback ids of either domain stay well under this (CUPTI 13: ~800). */
#define MAX_CBID 4096

/* The head of CUPTI's CUpti_CallbackData, as far as it is read here. */
struct cb_data {
    int site;
    const char *function_name;
};

typedef void (*cb_fn)(void *userdata, int domain, uint32_t cbid, const void *data);
typedef int (*subscribe_fn)(void **subscriber, cb_fn callback, void *userdata);
typedef int (*enable_domain_fn)(uint32_t enable, void *subscriber, int domain);

/* One row per domain: its name in the output and its counters. */
static struct domain {
    const char *name;
    uint64_t calls[MAX_CBID];
    const char *names[MAX_CBID];
} domains[] = { { .name = "driver" }, { .name = "runtime" } };

static struct domain *domain_of(int d)
{
    return d == CB_DOMAIN_DRIVER ? &domains[0] : d == CB_DOMAIN_RUNTIME ? &domains[1] : NULL;
}

static void on_call(void *userdata, int domain, uint32_t cbid, const void *data)
{
    (void)userdata;
    const struct cb_data *cb = data;
    struct domain *dm = domain_of(domain);
    if (!dm || cbid >= MAX_CBID || cb->site != CB_SITE_ENTER)
        return;
    if (__atomic_fetch_add(&dm->calls[cbid], 1, __ATOMIC_RELAXED) == 0)
        __atomic_store_n(&dm->names[cbid], cb->function_name, __ATOMIC_RELEASE);
}

static void write_counts(void)
{
    const char *base = getenv("API_COUNT_OUT");
    char path[4096];
    if (!base || snprintf(path, sizeof path, "%s.%d", base, (int)getpid()) >= (int)sizeof path)
        return;
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    for (size_t d = 0; d < sizeof domains / sizeof domains[0]; d++)
        for (uint32_t i = 0; i < MAX_CBID; i++) {
            uint64_t n = __atomic_load_n(&domains[d].calls[i], __ATOMIC_RELAXED);
            const char *name = __atomic_load_n(&domains[d].names[i], __ATOMIC_ACQUIRE);
            if (n)
                fprintf(f, "%s %s %llu\n", domains[d].name, name ? name : "?", (unsigned long long)n);
        }
    fclose(f);
}

/* The driver calls this once, at cuInit, in every process it is injected
 * into; 1 says the injection succeeded. */
int InitializeInjection(void);
__attribute__((visibility("default"))) int InitializeInjection(void)
{
    const char *lib = getenv("API_COUNT_CUPTI");
    void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_GLOBAL) : NULL;
    subscribe_fn subscribe = h ? (subscribe_fn)dlsym(h, "cuptiSubscribe") : NULL;
    enable_domain_fn enable = h ? (enable_domain_fn)dlsym(h, "cuptiEnableDomain") : NULL;
    void *sub = NULL;
    if (!subscribe || !enable || subscribe(&sub, on_call, NULL) != 0) {
        fprintf(stderr, "api_count: no CUPTI from API_COUNT_CUPTI=%s: %s\n", lib ? lib : "(unset)",
                h ? "cuptiSubscribe failed" : dlerror());
        return 0;
    }
    if (enable(1, sub, CB_DOMAIN_DRIVER) != 0 || enable(1, sub, CB_DOMAIN_RUNTIME) != 0) {
        fprintf(stderr, "api_count: cuptiEnableDomain failed\n");
        return 0;
    }
    atexit(write_counts);
    return 1;
}
