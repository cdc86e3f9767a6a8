/*
 * Tries the rarer memory paths of docs/memory.md on a real driver, past a
 * limit: the legacy cuMemAlloc that cuGetProcAddress returns for CUDA 2.0,
 * graph allocation nodes, and mappings of an imported VMM allocation. Run by
 * paths_check.py, which measures the GPU with nvidia-smi whenever this
 * program prints "measure <label>" and answers with a line on stdin.
 *
 *   paths_check run               the paths, in this process
 *   paths_check export <bytes>    cuMemCreate + export as a POSIX fd; prints
 *                                 "export pid=<pid> fd=<fd>", releases its
 *                                 handle on the next stdin line, exits on EOF
 *   paths_check run <pid> <fd>    also imports that fd (pidfd_getfd)
 *
 * Needs no toolkit: the driver is dlopen'ed, the ABI is src/abi/cuda_abi.h.
 */
#define _GNU_SOURCE
#include "../../src/abi/cuda_abi.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MiB (1024ULL * 1024ULL)

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
static gpa_fn gpa;

static void *fn(const char *name, int version)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    if (gpa(name, &p, version, 0, &st) != CUDA_SUCCESS)
        return NULL;
    return p;
}
/* An entry point the run needs, as CUDA `version` declared it; a driver
 * without it ends the run saying so rather than calling NULL. */
static void *need(const char *name, int version)
{
    void *p = fn(name, version);
    if (!p) {
        printf("result %s@%d not found: paths_check stops here\n", name, version);
        exit(3);
    }
    return p;
}
#define F_AT(type, name, version) ((type)need(name, version))
#define F(type, name) F_AT(type, name, 12000)

static void measure(const char *label)
{
    printf("measure %s\n", label);
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin))
        exit(1);
}

static CUresult (*sync_ctx)(void);

/* Which function each lookup lands on (the driver's choice of ABI, or our
 * wrapper of it under the interposer). */
static void probe(const char *name, int version)
{
    Dl_info di = { 0 };
    void *p = fn(name, version);
    const char *lib = p && dladdr(p, &di) && di.dli_fname ? strrchr(di.dli_fname, '/') : NULL;
    printf("result lookup %s@%d -> %s %s\n", name, version, lib ? lib + 1 : "-",
           p && di.dli_sname ? di.dli_sname : "-");
}

static void legacy(void)
{
    CUresult (*alloc)(CUdeviceptr_v1 *, unsigned int) =
        (CUresult(*)(CUdeviceptr_v1 *, unsigned int))fn("cuMemAlloc", 2000);
    CUresult (*freef)(CUdeviceptr_v1) = (CUresult(*)(CUdeviceptr_v1))fn("cuMemFree", 2000);
    if (!alloc || !freef) {
        printf("result legacy lookup failed\n");
        return;
    }
    static CUdeviceptr_v1 p[64];
    int n = 0;
    CUresult rc = CUDA_SUCCESS;
    while (n < 64 && (rc = alloc(&p[n], (unsigned int)(64 * MiB))) == CUDA_SUCCESS)
        n++;
    printf("result legacy_cuMemAlloc_64MiB count=%d MiB=%d stop_rc=%d\n", n, n * 64, (int)rc);
    measure("legacy_held");
    while (n)
        freef(p[--n]);
}

/* A graph with one allocation node (and its free node), instantiated; with
 * in_child, first moved into a parent graph as a child graph node, so that
 * the allocation is read from the parent's child (*g is the parent then). */
static CUresult graph_with_alloc(size_t bytes, int free_in_graph, int in_child, CUgraph *g, CUgraphExec *e,
                                 CUdeviceptr *dptr)
{
    CUresult (*create)(CUgraph *, unsigned) = F(CUresult(*)(CUgraph *, unsigned), "cuGraphCreate");
    CUresult rc = create(g, 0);
    CUDA_MEM_ALLOC_NODE_PARAMS prm = { .poolProps = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                      .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } },
                                       .bytesize = bytes };
    CUgraphNode a, f;
    if (!rc)
        rc = F(CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUDA_MEM_ALLOC_NODE_PARAMS *),
               "cuGraphAddMemAllocNode")(&a, *g, NULL, 0, &prm);
    *dptr = prm.dptr;
    if (!rc && free_in_graph)
        rc = F(CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUdeviceptr),
               "cuGraphAddMemFreeNode")(&f, *g, &a, 1, prm.dptr);
    CUgraph parent;
    if (!rc && in_child && !(rc = create(&parent, 0))) {
        CUgraphNodeParams child = { .type = CU_GRAPH_NODE_TYPE_GRAPH,
                                    .graph = { .graph = *g, .ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE } };
        CUgraphNode c;
        /* cuGraphAddNode came with CUDA 12.2: a 12.0 lookup finds nothing. */
        rc = F_AT(CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraphNodeParams *),
                  "cuGraphAddNode", 12020)(&c, parent, NULL, 0, &child);
        if (!rc)
            *g = parent; /* the moved child is the parent's now */
        else
            F(CUresult(*)(CUgraph), "cuGraphDestroy")(parent);
    }
    if (!rc)
        rc = F(CUresult(*)(CUgraphExec *, CUgraph, unsigned long long), "cuGraphInstantiateWithFlags")(e, *g, 0);
    return rc;
}

/* graph_with_alloc, then one launch of it, waited for; prints "result
 * LABEL" with both results. Returns the instantiation's. */
static CUresult launched_graph(const char *label, size_t bytes, int free_in_graph, int in_child, CUgraph *g,
                               CUgraphExec *e, CUdeviceptr *d)
{
    CUresult rc = graph_with_alloc(bytes, free_in_graph, in_child, g, e, d);
    CUresult lrc = rc ? rc : F(CUresult(*)(CUgraphExec, CUstream), "cuGraphLaunch")(*e, NULL);
    if (!lrc)
        lrc = sync_ctx();
    printf("result %s instantiate_rc=%d launch_rc=%d\n", label, (int)rc, (int)lrc);
    return rc;
}

static void graphs(void)
{
    CUresult (*exec_destroy)(CUgraphExec) = F(CUresult(*)(CUgraphExec), "cuGraphExecDestroy");
    CUresult (*destroy)(CUgraph) = F(CUresult(*)(CUgraph), "cuGraphDestroy");
    CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr) =
        F(CUresult(*)(CUdeviceptr *, size_t *, CUdeviceptr), "cuMemGetAddressRange");
    CUresult (*mfree)(CUdeviceptr) = F(CUresult(*)(CUdeviceptr), "cuMemFree");
    CUgraph g;
    CUgraphExec e;
    CUdeviceptr d, base;
    size_t size;

    /* 2 GiB, freed inside the graph. */
    CUresult rc = launched_graph("graph_2GiB_freed_in_graph", 2048 * MiB, 1, 0, &g, &e, &d);
    measure("graph_2GiB_after_launch");
    if (!rc)
        exec_destroy(e);
    destroy(g);
    measure("graph_2GiB_after_exec_destroy");

    /* The same 2 GiB in a child graph moved into its parent. */
    rc = launched_graph("graph_2GiB_in_child_graph", 2048 * MiB, 1, 1, &g, &e, &d);
    measure("graph_2GiB_in_child_after_launch");
    if (!rc)
        exec_destroy(e);
    destroy(g);

    /* 256 MiB left live by the graph, freed by the program after the graph goes. */
    rc = launched_graph("graph_256MiB_unfreed", 256 * MiB, 0, 0, &g, &e, &d);
    if (!rc)
        exec_destroy(e);
    destroy(g);
    printf("result graph_unfreed_range_after_exec_destroy rc=%d\n", (int)range(&base, &size, d));
    measure("graph_256MiB_live_after_exec_destroy");
    CUresult frc = mfree(d);
    sync_ctx();
    printf("result graph_unfreed_cuMemFree rc=%d range_after_free_rc=%d\n", (int)frc, (int)range(&base, &size, d));
    measure("graph_256MiB_after_free");
}

static void vmm_import(int pid, int remote_fd, size_t bytes)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int fd = pidfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pidfd, remote_fd, 0);
    CUmemGenericAllocationHandle h;
    CUresult rc =
        F(CUresult(*)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType),
          "cuMemImportFromShareableHandle")(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    printf("result vmm_import fd=%d rc=%d\n", fd, (int)rc);
    if (rc)
        return;
    printf("release\n"); /* paths_check.py lets the exporter release its handle now */
    measure("vmm_imported_exporter_released");
    CUdeviceptr va = 0;
    CUresult mrc = F(CUresult(*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long),
                     "cuMemAddressReserve")(&va, bytes, 0, 0, 0);
    if (!mrc)
        mrc = F(CUresult(*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long),
                "cuMemMap")(va, bytes, 0, h, 0);
    printf("result vmm_import_map_%lluMiB rc=%d\n", (unsigned long long)(bytes / MiB), (int)mrc);
    measure("vmm_import_mapped");
    if (!mrc)
        F(CUresult(*)(CUdeviceptr, size_t), "cuMemUnmap")(va, bytes);
    F(CUresult(*)(CUmemGenericAllocationHandle), "cuMemRelease")(h);
}

static void export_handle(size_t bytes)
{
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    CUmemGenericAllocationHandle h;
    int fd = -1;
    CUresult rc =
        F(CUresult(*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long),
          "cuMemCreate")(&h, bytes, &prop, 0);
    if (!rc)
        rc = F(CUresult(*)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long),
               "cuMemExportToShareableHandle")(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    printf("export pid=%d fd=%d rc=%d\n", (int)getpid(), fd, (int)rc);
    fflush(stdout);
    char line[64];
    if (fgets(line, sizeof line, stdin) && !rc)
        F(CUresult(*)(CUmemGenericAllocationHandle), "cuMemRelease")(h);
    printf("released\n");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin))
        ;
}

int main(int argc, char **argv)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (!cuda || argc < 2) {
        fprintf(stderr, "usage: paths_check run [<pid> <fd>] | export <bytes> (%s)\n", dlerror());
        return 2;
    }
    gpa = (gpa_fn)dlsym(cuda, "cuGetProcAddress_v2");
    CUdevice dev;
    CUcontext ctx;
    if (!gpa || F(CUresult(*)(unsigned), "cuInit")(0) || F(CUresult(*)(CUdevice *, int), "cuDeviceGet")(&dev, 0) ||
        F(CUresult(*)(CUcontext *, CUdevice), "cuDevicePrimaryCtxRetain")(&ctx, dev) ||
        F(CUresult(*)(CUcontext), "cuCtxSetCurrent")(ctx)) {
        fprintf(stderr, "paths_check: no CUDA context\n");
        return 1;
    }
    sync_ctx = F(CUresult(*)(void), "cuCtxSynchronize");
    if (!strcmp(argv[1], "export")) {
        export_handle((size_t)strtoull(argv[2], NULL, 0));
        return 0;
    }
    measure("context");
    static const struct {
        const char *name;
        int version;
    } probes[] = { { "cuMemAlloc", 2000 },
                   { "cuMemFree", 2000 },
                   { "cuGraphInstantiate", 10000 },
                   { "cuGraphInstantiate", 11000 },
                   { "cuGraphInstantiate", 12000 },
                   { "cuGraphInstantiate", 13000 },
                   { "cuGraphInstantiateWithFlags", 12000 },
                   { "cuMemImportFromShareableHandle", 12000 },
                   { "cuMemMap", 12000 } };
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
        probe(probes[i].name, probes[i].version);
    legacy();
    graphs();
    if (argc > 3)
        vmm_import(atoi(argv[2]), atoi(argv[3]), 2048 * MiB);
    printf("done\n");
    return 0;
}
