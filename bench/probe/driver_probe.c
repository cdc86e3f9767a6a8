/* One-off probe of the real driver's behaviour that the interposer design
 * relies on: does cuGetProcAddress hand out the same pointers as dlsym, and
 * how does NVML's per-process usage grow with allocation size? */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../../src/abi/cuda_abi.h"
#include "../../src/abi/nvml_abi.h"

typedef CUresult (*gpa2_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa1_t)(const char *, void **, int, cuuint64_t);
static void *cu, *nv;
#define SYM(h, n) dlsym(h, n)

static unsigned long long proc_used(void)
{
    nvmlReturn_t (*get_handle)(unsigned, nvmlDevice_t *) = SYM(nv, "nvmlDeviceGetHandleByIndex_v2");
    nvmlReturn_t (*procs)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *) =
        SYM(nv, "nvmlDeviceGetComputeRunningProcesses_v3");
    nvmlDevice_t d;
    get_handle(0, &d);
    nvmlProcessInfo_t p[64];
    unsigned n = 64;
    if (procs(d, &n, p) != 0)
        return 0;
    for (unsigned i = 0; i < n; i++)
        if (p[i].pid == (unsigned)getpid())
            return p[i].usedGpuMemory;
    return 0;
}
static unsigned long long dev_used(void)
{
    nvmlReturn_t (*get_handle)(unsigned, nvmlDevice_t *) = SYM(nv, "nvmlDeviceGetHandleByIndex_v2");
    nvmlReturn_t (*mi)(nvmlDevice_t, nvmlMemory_t *) = SYM(nv, "nvmlDeviceGetMemoryInfo");
    nvmlDevice_t d;
    get_handle(0, &d);
    nvmlMemory_t m;
    mi(d, &m);
    return m.used;
}

int main(void)
{
    cu = dlopen("libcuda.so.1", RTLD_NOW);
    nv = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!cu || !nv) {
        printf("dlopen failed\n");
        return 1;
    }
    ((nvmlReturn_t(*)(void))SYM(nv, "nvmlInit_v2"))();
    gpa2_t gpa2 = (gpa2_t)SYM(cu, "cuGetProcAddress_v2");
    gpa1_t gpa1 = (gpa1_t)SYM(cu, "cuGetProcAddress");
    CUresult (*init)(unsigned) = SYM(cu, "cuInit");
    printf("cuInit=%d gpa1=%p gpa2=%p gpa2_ptsz=%p\n", init(0), (void *)gpa1, (void *)gpa2,
           SYM(cu, "cuGetProcAddress_v2_ptsz"));
    const char *names[][2] = { { "cuMemAlloc", "cuMemAlloc_v2" },
                               { "cuMemAlloc", "cuMemAlloc" },
                               { "cuMemFree", "cuMemFree_v2" },
                               { "cuLaunchKernel", "cuLaunchKernel" },
                               { "cuLaunchKernel", "cuLaunchKernel_ptsz" },
                               { "cuMemAllocAsync", "cuMemAllocAsync" },
                               { "cuMemAllocAsync", "cuMemAllocAsync_ptsz" },
                               { "cuGetProcAddress", "cuGetProcAddress" },
                               { "cuGetProcAddress", "cuGetProcAddress_v2" },
                               { "cuMemGetInfo", "cuMemGetInfo_v2" },
                               { "cuCtxCreate", "cuCtxCreate_v4" },
                               { "cuGraphLaunch", "cuGraphLaunch_ptsz" },
                               { "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain" } };
    int vers[] = { 2000, 3020, 11030, 12000, 13000 };
    int flags[] = { 0, 1, 2 };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *ds = SYM(cu, names[i][1]);
        printf("%-26s dlsym=%p", names[i][1], ds);
        for (size_t v = 0; v < 5; v++)
            for (size_t f = 0; f < 3; f++) {
                void *p = NULL;
                CUdriverProcAddressQueryResult st = -1;
                CUresult r = gpa2(names[i][0], &p, vers[v], (cuuint64_t)flags[f], &st);
                if (p == ds && r == 0)
                    printf(" [%d/%d=SAME]", vers[v], flags[f]);
                else if (r == 0 && p) {
                    Dl_info di;
                    dladdr(p, &di);
                    printf(" [%d/%d=%s]", vers[v], flags[f], di.dli_sname ? di.dli_sname : "?");
                }
            }
        printf("\n");
    }
    CUresult (*devget)(CUdevice *, int) = SYM(cu, "cuDeviceGet");
    CUresult (*retain)(CUcontext *, CUdevice) = SYM(cu, "cuDevicePrimaryCtxRetain");
    CUresult (*setcur)(CUcontext) = SYM(cu, "cuCtxSetCurrent");
    CUresult (*alloc)(CUdeviceptr *, size_t) = SYM(cu, "cuMemAlloc_v2");
    CUresult (*memfree)(CUdeviceptr) = SYM(cu, "cuMemFree_v2");
    CUresult (*meminfo)(size_t *, size_t *) = SYM(cu, "cuMemGetInfo_v2");
    CUdevice dev;
    devget(&dev, 0);
    CUcontext ctx;
    unsigned long long du0 = dev_used();
    retain(&ctx, dev);
    setcur(ctx);
    size_t fr, tot;
    meminfo(&fr, &tot);
    printf("context: proc_used=%llu MiB dev_used delta=%lld MiB total=%zu\n", proc_used() >> 20,
           (long long)(dev_used() - du0) / 1048576, tot);
    size_t sizes[] = { 1, 4096, 1 << 20, (1 << 20) + 1, 2 << 20, 3 << 20, 64 << 20, 256 << 20 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned long long before = proc_used();
        size_t fb;
        meminfo(&fb, &tot);
        CUdeviceptr p[16];
        for (int k = 0; k < 16; k++)
            alloc(&p[k], sizes[i]);
        size_t fa;
        meminfo(&fa, &tot);
        printf("16 x %zu B: nvml proc delta=%llu KiB, cuMemGetInfo free delta=%zu KiB\n", sizes[i],
               (proc_used() - before) >> 10, (fb - fa) >> 10);
        for (int k = 0; k < 16; k++)
            memfree(p[k]);
    }
    return 0;
}
