/*
 * A CUDA "tenant" for integration tests. It reads one command per line on
 * stdin, runs it against libcuda.so.1 (the simulated driver in CI, the real
 * one on a GPU) and answers one line per command on stdout, so a test can
 * hold allocations open while it inspects the shared state.
 *
 * Entry points are looked up the way real programs do (argv[1]):
 *   getproc  cuGetProcAddress_v2, as every CUDA >= 12 runtime does
 *   dlsym    dlsym() on the dlopen'ed driver handle, versioned names
 *   default  dlsym(RTLD_DEFAULT), i.e. what direct linking binds to
 */
#define _GNU_SOURCE
#include "../../src/abi/cuda_abi.h"
#include "../../src/abi/nvml_abi.h"
#include "../../src/core/region.h"
#include "gs_client_compute.h"
#include "gs_client_contexts.h"
#include "gs_client_graphs.h"
#include "gs_client_hostmem.h"
#include "gs_client_paths.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static void *cuda, *nvml;
static const char *mode = "getproc";
static int cuda_version = 13000; /* what getproc lookups ask for ("cudaversion N") */

/* name = base name for cuGetProcAddress; vname = exported versioned name. */
static void *entry(const char *base, const char *vname, int per_thread)
{
    void *p = NULL;
    if (!strcmp(mode, "getproc")) {
        gpa_t gpa = (gpa_t)dlsym(cuda, "cuGetProcAddress_v2");
        CUdriverProcAddressQueryResult st;
        if (!gpa || gpa(base, &p, cuda_version, per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, &st))
            return NULL;
        return p;
    }
    return dlsym(!strcmp(mode, "dlsym") ? cuda : RTLD_DEFAULT, vname);
}
#define CU(base, vname, pt, type) ((type)entry(base, vname, pt))

/* entry(), and plain dlsym on the driver for sim-only helpers (base NULL). */
static void *entry_any(const char *base, const char *vname, int per_thread)
{
    return base ? entry(base, vname, per_thread) : dlsym(cuda, vname);
}

/* Closes every descriptor above 2 but keep. */
static void close_fds_but(int keep)
{
    for (int fd = 3; fd < 1024; fd++)
        if (fd != keep)
            close(fd);
}

/* Closes every descriptor above 2 of a file whose name ends in suffix. */
static void close_fds_named(const char *suffix)
{
    for (int fd = 3; fd < 1024; fd++) {
        char link[64], name[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, name, sizeof name - 1);
        if (n <= 0)
            continue;
        name[n] = '\0';
        size_t len = strlen(suffix);
        if ((size_t)n >= len && !strcmp(name + n - len, suffix))
            close(fd);
    }
}

enum kind { K_PTR, K_VMM, K_ARRAY, K_MIPMAP, K_IPC, K_ASYNC };
struct held {
    enum kind kind;
    uint64_t handle;
};
static struct held held[65536];
static int nheld;

static void keep(enum kind k, uint64_t h)
{
    if (nheld < (int)(sizeof held / sizeof held[0]))
        held[nheld++] = (struct held){ k, h };
}

static CUresult free_one(struct held *h)
{
    switch (h->kind) {
    case K_PTR: return CU("cuMemFree", "cuMemFree_v2", 0, CUresult(*)(CUdeviceptr))(h->handle);
    case K_ASYNC: return CU("cuMemFreeAsync", "cuMemFreeAsync", 0, CUresult(*)(CUdeviceptr, CUstream))(h->handle, NULL);
    case K_VMM: return CU("cuMemRelease", "cuMemRelease", 0, CUresult(*)(CUmemGenericAllocationHandle))(h->handle);
    case K_ARRAY: return CU("cuArrayDestroy", "cuArrayDestroy", 0, CUresult(*)(CUarray))((CUarray)(uintptr_t)h->handle);
    case K_MIPMAP:
        return CU("cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy", 0,
                  CUresult(*)(CUmipmappedArray))((CUmipmappedArray)(uintptr_t)h->handle);
    case K_IPC: return CU("cuIpcCloseMemHandle", "cuIpcCloseMemHandle", 0, CUresult(*)(CUdeviceptr))(h->handle);
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static unsigned long long num(const char *s)
{
    return strtoull(s, NULL, 0);
}

static CUresult run(char *line)
{
    char *argv[8] = { 0 };
    int argc = 0;
    for (char *t = strtok(line, ": \n"); t && argc < 8; t = strtok(NULL, ": \n"))
        argv[argc++] = t;
    if (!argc)
        return CUDA_SUCCESS;
    const char *c = argv[0];
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (!strcmp(c, "init")) {
        CUdevice d;
        CUcontext ctx;
        int ord = argc > 1 ? (int)num(argv[1]) : 0;
        rc = CU("cuInit", "cuInit", 0, CUresult(*)(unsigned))(0);
        if (!rc)
            rc = CU("cuDeviceGet", "cuDeviceGet", 0, CUresult(*)(CUdevice *, int))(&d, ord);
        if (!rc)
            rc = CU("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 0, CUresult(*)(CUcontext *, CUdevice))(&ctx,
                                                                                                                   d);
        if (!rc)
            rc = CU("cuCtxSetCurrent", "cuCtxSetCurrent", 0, CUresult(*)(CUcontext))(ctx);
    } else if (!strcmp(c, "alloc") || !strcmp(c, "managed") || !strcmp(c, "async") || !strcmp(c, "asyncptsz") ||
               !strcmp(c, "pool")) {
        CUdeviceptr p = 0;
        size_t n = (size_t)num(argv[1]);
        enum kind k = K_PTR;
        if (!strcmp(c, "alloc"))
            rc = CU("cuMemAlloc", "cuMemAlloc_v2", 0, CUresult(*)(CUdeviceptr *, size_t))(&p, n);
        else if (!strcmp(c, "managed"))
            rc = CU("cuMemAllocManaged", "cuMemAllocManaged", 0,
                    CUresult(*)(CUdeviceptr *, size_t, unsigned))(&p, n, CU_MEM_ATTACH_GLOBAL);
        else if (!strcmp(c, "pool")) { /* pool <bytes> [ordinal]: from that device's default pool */
            CUmemoryPool pool;
            rc = CU("cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool", 0,
                    CUresult(*)(CUmemoryPool *, CUdevice))(&pool, argc > 2 ? (CUdevice)num(argv[2]) : 0);
            if (!rc)
                rc = CU("cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 0,
                        CUresult(*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream))(&p, n, pool, NULL);
            k = K_ASYNC;
        } else {
            int pt = !strcmp(c, "asyncptsz");
            rc = CU("cuMemAllocAsync", pt ? "cuMemAllocAsync_ptsz" : "cuMemAllocAsync", pt,
                    CUresult(*)(CUdeviceptr *, size_t, CUstream))(&p, n, NULL);
            k = K_ASYNC;
        }
        if (!rc)
            keep(k, p);
    } else if (!strcmp(c, "pitch")) {
        CUdeviceptr p = 0;
        size_t pitch = 0;
        rc = CU("cuMemAllocPitch", "cuMemAllocPitch_v2", 0,
                CUresult(*)(CUdeviceptr *, size_t *, size_t, size_t, unsigned))(&p, &pitch, (size_t)num(argv[1]),
                                                                                (size_t)num(argv[2]), 4);
        if (!rc)
            keep(K_PTR, p);
    } else if (!strcmp(c, "array") || !strcmp(c, "array3d") || !strcmp(c, "mipmap")) {
        CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = num(argv[1]),
                                       .Height = argc > 2 ? num(argv[2]) : 0,
                                       .Depth = !strcmp(c, "array3d") && argc > 3 ? num(argv[3]) : 0,
                                       .Format = CU_AD_FORMAT_FLOAT,
                                       .NumChannels = 1 };
        if (!strcmp(c, "array")) {
            CUDA_ARRAY_DESCRIPTOR d = {
                .Width = d3.Width, .Height = d3.Height, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1
            };
            CUarray a;
            rc = CU("cuArrayCreate", "cuArrayCreate_v2", 0, CUresult(*)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *))(&a,
                                                                                                                   &d);
            if (!rc)
                keep(K_ARRAY, (uintptr_t)a);
        } else if (!strcmp(c, "array3d")) {
            CUarray a;
            rc = CU("cuArray3DCreate", "cuArray3DCreate_v2", 0,
                    CUresult(*)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *))(&a, &d3);
            if (!rc)
                keep(K_ARRAY, (uintptr_t)a);
        } else {
            CUmipmappedArray m;
            rc = CU("cuMipmappedArrayCreate", "cuMipmappedArrayCreate", 0,
                    CUresult(*)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned))(
                &m, &d3, argc > 3 ? (unsigned)num(argv[3]) : 1);
            if (!rc)
                keep(K_MIPMAP, (uintptr_t)m);
        }
    } else if (!strcmp(c, "vmm")) { /* vmm <bytes> [ordinal]: on that device */
        CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE,
                                                   .id = argc > 2 ? (int)num(argv[2]) : 0 } };
        CUmemGenericAllocationHandle h;
        rc = CU("cuMemCreate", "cuMemCreate", 0,
                CUresult(*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long))(
            &h, (size_t)num(argv[1]), &prop, 0);
        if (!rc)
            keep(K_VMM, h);
    } else if (!strcmp(c, "ipcget")) {
        CUipcMemHandle h;
        rc = nheld ? CU("cuIpcGetMemHandle", "cuIpcGetMemHandle", 0,
                        CUresult(*)(CUipcMemHandle *, CUdeviceptr))(&h, held[nheld - 1].handle)
                   : CUDA_ERROR_INVALID_VALUE;
        if (!rc) {
            printf("ipc ");
            for (int i = 0; i < CU_IPC_HANDLE_SIZE; i++)
                printf("%02x", (unsigned char)h.reserved[i]);
            printf(" ");
        }
    } else if (!strcmp(c, "ipcopen")) {
        CUipcMemHandle h;
        for (int i = 0; i < CU_IPC_HANDLE_SIZE; i++) {
            unsigned v = 0;
            sscanf(argv[1] + 2 * i, "%2x", &v);
            h.reserved[i] = (char)v;
        }
        CUdeviceptr p;
        rc = CU("cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2", 0,
                CUresult(*)(CUdeviceptr *, CUipcMemHandle, unsigned))(&p, h, 1);
        if (!rc)
            keep(K_IPC, p);
    } else if (!strcmp(c, "fill")) {
        size_t n = (size_t)num(argv[1]);
        int count = 0;
        CUdeviceptr p;
        while ((rc = CU("cuMemAlloc", "cuMemAlloc_v2", 0, CUresult(*)(CUdeviceptr *, size_t))(&p, n)) == 0) {
            keep(K_PTR, p);
            count++;
        }
        printf("count=%d ", count);
    } else if (!strcmp(c, "race")) {
        /* Random allocations and frees: stress for concurrent reservation. */
        size_t n = (size_t)num(argv[1]);
        unsigned iters = (unsigned)num(argv[2]), seed = argc > 3 ? (unsigned)num(argv[3]) : 1;
        unsigned ok = 0, oom = 0;
        for (unsigned i = 0; i < iters; i++) {
            CUdeviceptr p;
            if (rand_r(&seed) % 3 != 0 || !nheld) {
                CUresult r = CU("cuMemAlloc", "cuMemAlloc_v2", 0, CUresult(*)(CUdeviceptr *, size_t))(&p, n);
                if (!r) {
                    keep(K_PTR, p);
                    ok++;
                } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
                    oom++;
                }
            } else {
                int j = (int)(rand_r(&seed) % (unsigned)nheld);
                free_one(&held[j]);
                held[j] = held[--nheld];
            }
        }
        printf("ok=%u oom=%u ", ok, oom);
        rc = CUDA_SUCCESS;
    } else if (!strcmp(c, "freeall")) {
        rc = CUDA_SUCCESS;
        while (nheld && rc == CUDA_SUCCESS)
            rc = free_one(&held[--nheld]);
    } else if (!strcmp(c, "freelast")) {
        rc = nheld ? free_one(&held[--nheld]) : CUDA_ERROR_INVALID_VALUE;
    } else if (!strcmp(c, "info")) {
        size_t f = 0, t = 0;
        rc = CU("cuMemGetInfo", "cuMemGetInfo_v2", 0, CUresult(*)(size_t *, size_t *))(&f, &t);
        printf("free=%zu total=%zu ", f, t);
    } else if (!strcmp(c, "total")) {
        size_t t = 0;
        rc = CU("cuDeviceTotalMem", "cuDeviceTotalMem_v2", 0, CUresult(*)(size_t *, CUdevice))(&t, 0);
        printf("total=%zu ", t);
    } else if (!nvml && (!strcmp(c, "nvml") || !strcmp(c, "procs"))) {
        rc = CUDA_ERROR_NOT_FOUND; /* a container given libcuda only */
    } else if (!strcmp(c, "nvml")) {
        nvmlReturn_t (*init)(void) = (nvmlReturn_t(*)(void))dlsym(nvml, "nvmlInit_v2");
        nvmlReturn_t (*get)(unsigned, nvmlDevice_t *) =
            (nvmlReturn_t(*)(unsigned, nvmlDevice_t *))dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2");
        nvmlReturn_t (*info1)(nvmlDevice_t, nvmlMemory_t *) =
            (nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_t *))dlsym(nvml, "nvmlDeviceGetMemoryInfo");
        nvmlReturn_t (*info2)(nvmlDevice_t, nvmlMemory_v2_t *) =
            (nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_v2_t *))dlsym(nvml, "nvmlDeviceGetMemoryInfo_v2");
        nvmlDevice_t d;
        nvmlMemory_t m1;
        nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
        int r = init() || get(argc > 1 ? (unsigned)num(argv[1]) : 0, &d) || info1(d, &m1) || info2(d, &m2);
        rc = r ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
        if (!r)
            printf("v1_total=%llu v1_used=%llu v1_free=%llu v2_total=%llu v2_used=%llu v2_free=%llu ", m1.total,
                   m1.used, m1.free, m2.total, m2.used, m2.free);
    } else if (!strcmp(c, "procs")) {
        /* NVML's process list through v1 and v3, and its sizing protocol. */
        nvmlReturn_t (*init)(void) = (nvmlReturn_t(*)(void))dlsym(nvml, "nvmlInit_v2");
        nvmlReturn_t (*get)(unsigned, nvmlDevice_t *) =
            (nvmlReturn_t(*)(unsigned, nvmlDevice_t *))dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2");
        nvmlReturn_t (*v1)(nvmlDevice_t, unsigned *, nvmlProcessInfo_v1_t *) = (nvmlReturn_t(*)(
            nvmlDevice_t, unsigned *, nvmlProcessInfo_v1_t *))dlsym(nvml, "nvmlDeviceGetComputeRunningProcesses");
        nvmlReturn_t (*v3)(nvmlDevice_t, unsigned *, void *) =
            (nvmlReturn_t(*)(nvmlDevice_t, unsigned *, void *))dlsym(nvml, "nvmlDeviceGetComputeRunningProcesses_v3");
        /* procs r535: read v3 as a program built for a 535-branch driver
         * does, 32-byte entries (their fifth field must be 0 here) */
        struct {
            nvmlProcessInfo_t info;
            unsigned long long cc_protected;
        } p3[64];
        size_t size = argc > 1 && !strcmp(argv[1], "r535") ? sizeof p3[0] : sizeof(nvmlProcessInfo_t);
        unsigned char *raw = (unsigned char *)p3;
        nvmlDevice_t d;
        nvmlProcessInfo_v1_t p1[64];
        unsigned n0 = 0, n1 = 64, n3 = 64;
        memset(p3, 0xab, sizeof p3);
        int r = init() || get(0, &d);
        nvmlReturn_t sz = r ? 0 : v3(d, &n0, NULL);
        r = r || v1(d, &n1, p1) || v3(d, &n3, p3);
        rc = r ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
        printf("sizing_rc=%d needed=%u n1=%u n3=%u ", (int)sz, n0, n1, n3);
        for (unsigned i = 0; !r && i < n3 && i < 64; i++) {
            nvmlProcessInfo_t e;
            unsigned long long extra = 0;
            memcpy(&e, raw + i * size, sizeof e);
            if (size > sizeof e)
                memcpy(&extra, raw + i * size + sizeof e, sizeof extra);
            printf("p%u=%u:%llu:%llu:%llu ", i, e.pid, e.usedGpuMemory, i < n1 ? p1[i].usedGpuMemory : 0ULL, extra);
        }
    } else if (!strcmp(c, "cudaversion") && argc > 1) {
        cuda_version = (int)num(argv[1]); /* as a runtime of that CUDA version asks */
        rc = CUDA_SUCCESS;
    } else if (!strcmp(c, "lookup") && argc > 1) {
        /* Looked up as this client's mode does, never called. */
        rc = entry(argv[1], argv[1], 0) ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
    } else if (!strcmp(c, "future")) {
        int out = 0;
        CUresult (*f)(int, int *) = CU("cuSimFutureFeature", "cuSimFutureFeature", 0, CUresult(*)(int, int *));
        rc = f ? f(21, &out) : CUDA_ERROR_NOT_FOUND;
        printf("out=%d ", out);
    } else if (!strcmp(c, "gpa") || !strcmp(c, "gpa1") || !strcmp(c, "sym")) {
        /* Where does a lookup lead? "lib=<file> sym=<symbol>" via dladdr. */
        void *p = NULL;
        CUdriverProcAddressQueryResult st = -1;
        if (!strcmp(c, "sym")) {
            p = dlsym(cuda, argv[1]);
            rc = p ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
        } else if (!strcmp(c, "gpa")) {
            gpa_t gpa = (gpa_t)dlsym(cuda, "cuGetProcAddress_v2");
            rc = gpa(argv[1], &p, (int)num(argv[2]), num(argv[3]), &st);
        } else {
            CUresult (*gpa1)(const char *, void **, int, cuuint64_t) =
                (CUresult(*)(const char *, void **, int, cuuint64_t))dlsym(cuda, "cuGetProcAddress");
            rc = gpa1(argv[1], &p, (int)num(argv[2]), num(argv[3]));
        }
        Dl_info di = { 0 };
        if (p && dladdr(p, &di) && di.dli_fname) {
            const char *base = strrchr(di.dli_fname, '/');
            printf("lib=%s sym=%s ", base ? base + 1 : di.dli_fname, di.dli_sname ? di.dli_sname : "?");
        }
        printf("status=%d ", (int)st);
    } else if (!strcmp(c, "lockdie")) {
        /* Die inside the region's critical section, leaving a half-made
         * update behind, as a SIGKILL at the worst moment would. */
        char err[256];
        struct gs_region *r = gs_region_open(getenv("GPUSLICE_REGION"), 1, NULL, err, sizeof err);
        if (r && gs_region_lock(r) == 0) {
            r->dev[0].mem_used += 123456789;
            raise(SIGKILL);
        }
        printf("lockdie failed: %s ", err);
    } else if (!strcmp(c, "closefds")) {
        /* As programs that close every descriptor above 2 as they start,
         * then open files of their own (taking the lowest numbers).
         * "closefds SUFFIX": only those of files whose names end so (a
         * tenant that keeps the driver's own). */
        if (argc > 1)
            close_fds_named(argv[1]);
        else
            close_fds_but(-1);
        rc = CUDA_SUCCESS;
        for (int i = 0; i < 8; i++)
            if (open("/dev/null", O_RDONLY) < 0)
                rc = CUDA_ERROR_UNKNOWN;
    } else if (!strcmp(c, "forkhold")) {
        /* A forked child runs "init" and "alloc N", reports its result
         * through a pipe and stays: its usage must sit in a slot of its own
         * (test_liveness.py). "forkhold N close": the child closes every
         * other descriptor above 2 before it reports; "forkhold 0 idle":
         * it touches no GPU (a data loader's worker). */
        char init[] = "init", alloc[64];
        snprintf(alloc, sizeof alloc, "alloc %s", argc > 1 ? argv[1] : "0");
        int pfd[2];
        pid_t pid = -1;
        if (pipe(pfd) == 0) {
            fflush(stdout);
            pid = fork();
            if (pid == 0) {
                close(pfd[0]);
                if (!freopen("/dev/null", "w", stdout))
                    _exit(1);
                int idle = argc > 2 && !strcmp(argv[2], "idle");
                CUresult crc = idle ? CUDA_SUCCESS : run(init);
                if (!crc && !idle)
                    crc = run(alloc);
                if (argc > 2 && !strcmp(argv[2], "close"))
                    close_fds_but(pfd[1]);
                int v = (int)crc;
                if (write(pfd[1], &v, sizeof v) != sizeof v)
                    _exit(1);
                for (;;)
                    pause();
            }
            close(pfd[1]);
            int v = CUDA_ERROR_UNKNOWN;
            if (pid > 0 && read(pfd[0], &v, sizeof v) == sizeof v)
                rc = (CUresult)v;
            close(pfd[0]);
        }
        printf("child=%d ", (int)pid);
    } else if (!strcmp(c, "hold")) {
        printf("holding\n");
        fflush(stdout);
        for (;;)
            pause();
    } else if (!strcmp(c, "latefree")) {
        /* hands every cuMemAlloc'd block to late_free.c's library, which
         * frees them after the interposer's destructor has run */
        void (*give)(CUdeviceptr) = (void (*)(CUdeviceptr))dlsym(RTLD_DEFAULT, "gs_late_free_keep");
        rc = give ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
        for (int i = 0; give && i < nheld; i++)
            if (held[i].kind == K_PTR) {
                give(held[i].handle);
                held[i--] = held[--nheld];
            }
    } else if (!strcmp(c, "exit")) {
        exit(0);
    } else if (gs_client_compute(argc, argv, &rc, entry_any)) {
        /* compute commands: gs_client_compute.c */
    } else if (gs_client_paths(argc, argv, &rc, entry_any)) {
        /* legacy, graph-memory and VMM-import commands: gs_client_paths.c */
    } else if (gs_client_contexts(argc, argv, &rc, entry_any)) {
        /* cuCtxCreate / cuCtxDestroy through each ABI: gs_client_contexts.c */
    } else if (gs_client_gone(argc, argv, &rc, entry_any)) {
        /* a stream or context destroyed under a thread's launches: gs_client_gone.c */
    } else if (gs_client_graphs(argc, argv, &rc, entry_any)) {
        /* a CUDA-graph tenant: gs_client_graphs.c */
    } else if (gs_client_hostmem(argc, argv, &rc, entry_any)) {
        /* host memory the device reaches: gs_client_hostmem.c */
    }
    printf("%s rc=%d\n", c, (int)rc);
    fflush(stdout);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        mode = argv[1];
    /* "default" stands for a program linked with -lcuda: the driver's
     * symbols are global, and the preloaded interposer comes first. */
    cuda = dlopen("libcuda.so.1", RTLD_NOW | (!strcmp(mode, "default") ? RTLD_GLOBAL : RTLD_LOCAL));
    nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW); /* NULL in a container given libcuda only */
    if (!cuda) {
        fprintf(stderr, "gs_client: cannot load the driver: %s\n", dlerror());
        return 1;
    }
    char line[512];
    while (fgets(line, sizeof line, stdin))
        run(line);
    return 0;
}
