/*
 * gs_client's commands for the rarer memory paths (docs/memory.md): the
 * pre-3.2 32-bit allocation ABI, graph allocation nodes and VMM imports.
 * Each keeps its own objects, so that gs_client's "freeall" stays as it is.
 */
#include "gs_client_paths.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static CUdeviceptr_v1 legacy_ptrs[4096];
static int nlegacy;

static CUgraph graph;
static CUgraphExec exec;
static CUdeviceptr graph_ptr;

static CUmemGenericAllocationHandle vmm_handle;
static CUdeviceptr vmm_va;
static size_t vmm_size;

/* References cuMemRetainAllocationHandle added (vmmretain, vmmretainmapped). */
static CUmemGenericAllocationHandle retained[64];
static int nretained;

/* Reservations whose mappings outlive their handles (vmmleak, vmmspan). */
static struct {
    CUdeviceptr va;
    size_t size;
} spans[256];
static int nspans;

/* The legacy entry point: what cuGetProcAddress answers for CUDA 2.0
 * ("getproc"), or the old exported name through dlsym ("sym"). */
static void *legacy(const char *base, const char *how, gs_entry_fn entry)
{
    if (!strcmp(how, "sym"))
        return entry(NULL, base, 0);
    gpa_fn gpa = (gpa_fn)entry("cuGetProcAddress", "cuGetProcAddress_v2", 0);
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    return gpa && gpa(base, &p, 2000, 0, &st) == CUDA_SUCCESS ? p : NULL;
}

static CUresult legacy_alloc(unsigned int n, const char *how, gs_entry_fn entry)
{
    CUresult (*alloc)(CUdeviceptr_v1 *, unsigned int) =
        (CUresult(*)(CUdeviceptr_v1 *, unsigned int))legacy("cuMemAlloc", how, entry);
    if (!alloc)
        return CUDA_ERROR_NOT_FOUND;
    CUdeviceptr_v1 p = 0;
    CUresult rc = alloc(&p, n);
    if (rc == CUDA_SUCCESS && nlegacy < (int)(sizeof legacy_ptrs / sizeof legacy_ptrs[0]))
        legacy_ptrs[nlegacy++] = p;
    return rc;
}

/* An allocation node (and its free node) in a graph of their own, which
 * (how "child") is moved into the parent graph as a child graph node. */
static CUresult graph_make(size_t bytes, int free_in_graph, const char *how, gs_entry_fn entry)
{
    CUresult rc = ((CUresult(*)(CUgraph *, unsigned))entry("cuGraphCreate", "cuGraphCreate", 0))(&graph, 0);
    CUgraph parent = NULL;
    if (!rc && !strcmp(how, "child"))
        rc = ((CUresult(*)(CUgraph *, unsigned))entry("cuGraphCreate", "cuGraphCreate", 0))(&parent, 0);
    CUDA_MEM_ALLOC_NODE_PARAMS p = { .poolProps = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                    .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } },
                                     .bytesize = bytes };
    CUgraphNode alloc_node, free_node;
    if (!rc)
        rc = ((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUDA_MEM_ALLOC_NODE_PARAMS *))entry(
            "cuGraphAddMemAllocNode", "cuGraphAddMemAllocNode", 0))(&alloc_node, graph, NULL, 0, &p);
    graph_ptr = p.dptr;
    if (!rc && free_in_graph)
        rc = ((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUdeviceptr))entry(
            "cuGraphAddMemFreeNode", "cuGraphAddMemFreeNode", 0))(&free_node, graph, &alloc_node, 1, p.dptr);
    if (!rc && parent) {
        CUgraphNodeParams p_child = { .type = CU_GRAPH_NODE_TYPE_GRAPH,
                                      .graph = { .graph = graph, .ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE } };
        CUgraphNode child_node;
        rc = ((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraphNodeParams *))entry(
            NULL, "cuGraphAddNode", 0))(&child_node, parent, NULL, 0, &p_child);
        graph = parent; /* the graph the commands below act on */
    }
    if (!rc && !strcmp(how, "v2")) /* the 5-argument ABI "cuGraphInstantiate" names on the driver */
        rc = ((CUresult(*)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t))entry(
            "cuGraphInstantiate", "cuGraphInstantiate_v2", 0))(&exec, graph, NULL, NULL, 0);
    else if (!rc)
        rc = ((CUresult(*)(CUgraphExec *, CUgraph, unsigned long long))entry(
            "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags", 0))(&exec, graph, 0);
    return rc;
}

static CUresult vmm_map(size_t n, gs_entry_fn entry)
{
    vmm_size = n;
    CUresult rc = ((CUresult(*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))entry(
        "cuMemAddressReserve", "cuMemAddressReserve", 0))(&vmm_va, n, 0, 0, 0);
    if (!rc)
        rc = ((CUresult(*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long))entry(
            "cuMemMap", "cuMemMap", 0))(vmm_va, n, 0, vmm_handle, 0);
    return rc;
}

static CUresult vmm_unmap(gs_entry_fn entry)
{
    CUresult rc = ((CUresult(*)(CUdeviceptr, size_t))entry("cuMemUnmap", "cuMemUnmap", 0))(vmm_va, vmm_size);
    if (!rc)
        rc = ((CUresult(*)(CUdeviceptr, size_t))entry("cuMemAddressFree", "cuMemAddressFree", 0))(vmm_va, vmm_size);
    return rc;
}

static CUresult vmm_create(size_t n, CUmemGenericAllocationHandle *h, gs_entry_fn entry)
{
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    return ((CUresult(*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long))entry(
        "cuMemCreate", "cuMemCreate", 0))(h, n, &prop, 0);
}

/* Maps [va, va + piece): a new handle released right after its mapping, as
 * NCCL does, or (imported) the last imported handle. */
static CUresult vmm_piece(CUdeviceptr va, size_t piece, int imported, gs_entry_fn entry)
{
    CUmemGenericAllocationHandle h = vmm_handle;
    CUresult rc = imported ? CUDA_SUCCESS : vmm_create(piece, &h, entry);
    if (rc)
        return rc;
    rc = ((CUresult(*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long))entry(
        "cuMemMap", "cuMemMap", 0))(va, piece, 0, h, 0);
    if (!imported) /* gone from the program, kept by its mapping */
        ((CUresult(*)(CUmemGenericAllocationHandle))entry("cuMemRelease", "cuMemRelease", 0))(h);
    return rc;
}

/* Maps n pieces side by side in one reservation (vmm_piece), stopping at
 * the first failure; *count of them mapped. The reservation is kept in
 * spans[] for vmm_span_unmap. */
static CUresult vmm_span(int n, size_t piece, int imported, gs_entry_fn entry, int *count)
{
    CUdeviceptr va = 0;
    *count = 0;
    if (nspans >= (int)(sizeof spans / sizeof spans[0]))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = ((CUresult(*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))entry(
        "cuMemAddressReserve", "cuMemAddressReserve", 0))(&va, n * piece, 0, 0, 0);
    if (rc)
        return rc;
    spans[nspans].va = va;
    spans[nspans++].size = n * piece;
    while (*count < n && rc == CUDA_SUCCESS) {
        rc = vmm_piece(va + *count * piece, piece, imported, entry);
        *count += rc == CUDA_SUCCESS;
    }
    return rc;
}

/* Retains the handle that maps va; 1 in *same if it is vmm_handle. */
static CUresult vmm_retain(CUdeviceptr va, gs_entry_fn entry, int *same)
{
    if (nretained >= (int)(sizeof retained / sizeof retained[0]))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUmemGenericAllocationHandle h = 0;
    CUresult rc = ((CUresult(*)(CUmemGenericAllocationHandle *, void *))entry(
        "cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle", 0))(&h, (void *)(uintptr_t)va);
    if (rc == CUDA_SUCCESS)
        retained[nretained++] = h;
    *same = rc == CUDA_SUCCESS && h == vmm_handle;
    return rc;
}

/* n x {cuMemCreate, map, retain through the mapping, unmap, release}: each
 * handle lives on through its retained reference, mapped nowhere. */
static CUresult vmm_retain_loop(int n, size_t piece, gs_entry_fn entry, int *count)
{
    CUresult rc = CUDA_SUCCESS;
    int same = 0;
    for (*count = 0; *count < n && rc == CUDA_SUCCESS; *count += rc == CUDA_SUCCESS) {
        rc = vmm_create(piece, &vmm_handle, entry);
        if (rc)
            break;
        rc = vmm_map(piece, entry);
        if (!rc)
            rc = vmm_retain(vmm_va, entry, &same);
        if (!rc)
            rc = vmm_unmap(entry);
        ((CUresult(*)(CUmemGenericAllocationHandle))entry("cuMemRelease", "cuMemRelease", 0))(vmm_handle);
    }
    return rc;
}

/* Unmaps every span with one cuMemUnmap each (covering all its mappings)
 * and frees the reservations. */
static CUresult vmm_span_unmap(gs_entry_fn entry)
{
    CUresult rc = CUDA_SUCCESS;
    while (nspans && rc == CUDA_SUCCESS) {
        nspans--;
        rc = ((CUresult(*)(CUdeviceptr, size_t))entry("cuMemUnmap", "cuMemUnmap", 0))(spans[nspans].va,
                                                                                      spans[nspans].size);
        if (rc == CUDA_ERROR_INVALID_VALUE)
            rc = CUDA_SUCCESS; /* nothing was mapped there */
        if (!rc)
            rc = ((CUresult(*)(CUdeviceptr, size_t))entry("cuMemAddressFree", "cuMemAddressFree", 0))(
                spans[nspans].va, spans[nspans].size);
    }
    return rc;
}

/* Exports vmm_handle as a POSIX fd and prints where another process opens it. */
static CUresult vmm_export(gs_entry_fn entry)
{
    int fd = -1;
    CUresult rc =
        ((CUresult(*)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long))entry(
            "cuMemExportToShareableHandle", "cuMemExportToShareableHandle", 0))(
            &fd, vmm_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    printf("path=/proc/%d/fd/%d ", (int)getpid(), fd);
    return rc;
}

int gs_client_paths(int argc, char **argv, CUresult *rc, gs_entry_fn entry)
{
    const char *c = argv[0];
    unsigned long long n = argc > 1 ? strtoull(argv[1], NULL, 0) : 0;
    if (!strcmp(c, "legacy")) { /* legacy <bytes> [getproc|sym] */
        *rc = legacy_alloc((unsigned int)n, argc > 2 ? argv[2] : "getproc", entry);
    } else if (!strcmp(c, "legacyfill")) { /* legacy allocations of <bytes> until one fails */
        int count = 0;
        while ((*rc = legacy_alloc((unsigned int)n, argc > 2 ? argv[2] : "getproc", entry)) == CUDA_SUCCESS)
            count++;
        printf("count=%d failed_rc=%d ", count, (int)*rc);
        *rc = CUDA_SUCCESS;
    } else if (!strcmp(c, "legacyfree")) {
        CUresult (*f)(CUdeviceptr_v1) = (CUresult(*)(CUdeviceptr_v1))legacy("cuMemFree", "getproc", entry);
        *rc = f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
        while (f && nlegacy && *rc == CUDA_SUCCESS)
            *rc = f(legacy_ptrs[--nlegacy]);
    } else if (!strcmp(c, "legacyarray")) { /* legacyarray <width> <height>: float32, 1 channel */
        CUDA_ARRAY_DESCRIPTOR_v1 d = { .Width = (unsigned)n,
                                       .Height = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 0,
                                       .Format = CU_AD_FORMAT_FLOAT,
                                       .NumChannels = 1 };
        CUresult (*f)(CUarray *, const CUDA_ARRAY_DESCRIPTOR_v1 *) =
            (CUresult(*)(CUarray *, const CUDA_ARRAY_DESCRIPTOR_v1 *))legacy("cuArrayCreate", "getproc", entry);
        CUarray a;
        *rc = f ? f(&a, &d) : CUDA_ERROR_NOT_FOUND;
        if (!*rc)
            *rc = ((CUresult(*)(CUarray))entry("cuArrayDestroy", "cuArrayDestroy", 0))(a);
    } else if (!strcmp(c, "galloc")) { /* galloc <bytes> [free|keep] [flags|v2|child]: one allocation node,
                                       * instantiated (child: in a child graph moved into the one instantiated) */
        *rc = graph_make((size_t)n, argc > 2 && !strcmp(argv[2], "free"), argc > 3 ? argv[3] : "flags", entry);
        printf("dptr=%llu ", (unsigned long long)graph_ptr);
    } else if (!strcmp(c, "glaunch")) {
        *rc = ((CUresult(*)(CUgraphExec, CUstream))entry("cuGraphLaunch", "cuGraphLaunch", 0))(exec, NULL);
    } else if (!strcmp(c, "gfree")) { /* the graph's allocation, freed outside the graph */
        *rc = ((CUresult(*)(CUdeviceptr))entry("cuMemFree", "cuMemFree_v2", 0))(graph_ptr);
    } else if (!strcmp(c, "gexecdestroy")) {
        *rc = ((CUresult(*)(CUgraphExec))entry("cuGraphExecDestroy", "cuGraphExecDestroy", 0))(exec);
    } else if (!strcmp(c, "gdestroy")) {
        *rc = ((CUresult(*)(CUgraph))entry("cuGraphDestroy", "cuGraphDestroy", 0))(graph);
    } else if (!strcmp(c, "vmmexport")) { /* vmmexport <bytes> [ordinal]: prints the exported fd's path */
        CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE,
                                                   .id = argc > 2 ? atoi(argv[2]) : 0 } };
        *rc =
            ((CUresult(*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                          unsigned long long))entry("cuMemCreate", "cuMemCreate", 0))(&vmm_handle, (size_t)n, &prop, 0);
        if (!*rc)
            *rc = vmm_export(entry);
    } else if (!strcmp(c, "vmmreexport")) { /* the last handle once more: a new fd */
        *rc = vmm_export(entry);
    } else if (!strcmp(c, "vmmfabric")) { /* the last handle as a fabric handle: prints its hex */
        CUmemFabricHandle fh;
        *rc = ((CUresult(*)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long))entry(
            "cuMemExportToShareableHandle", "cuMemExportToShareableHandle", 0))(&fh, vmm_handle,
                                                                                CU_MEM_HANDLE_TYPE_FABRIC, 0);
        printf("fabric=x"); /* never all digits: the harness would read a number */
        for (size_t i = 0; i < sizeof fh.data; i++)
            printf("%02x", fh.data[i]);
        printf(" ");
    } else if (!strcmp(c, "vmmimportfabric")) { /* vmmimportfabric <x + hex, from vmmfabric> */
        CUmemFabricHandle fh = { { 0 } };
        const char *hex = argc > 1 && argv[1][0] == 'x' ? argv[1] + 1 : "";
        for (size_t i = 0; i < sizeof fh.data && hex[2 * i] && hex[2 * i + 1]; i++) {
            char byte[3] = { hex[2 * i], hex[2 * i + 1], 0 };
            fh.data[i] = (unsigned char)strtoul(byte, NULL, 16);
        }
        *rc = ((CUresult(*)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType))entry(
            "cuMemImportFromShareableHandle", "cuMemImportFromShareableHandle", 0))(&vmm_handle, &fh,
                                                                                    CU_MEM_HANDLE_TYPE_FABRIC);
    } else if (!strcmp(c, "vmmimport")) { /* vmmimport <path of an exported fd> */
        int fd = argc > 1 ? open(argv[1], O_RDONLY | O_CLOEXEC) : -1;
        *rc = ((CUresult(*)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType))entry(
            "cuMemImportFromShareableHandle", "cuMemImportFromShareableHandle", 0))(
            &vmm_handle, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        if (fd >= 0)
            close(fd);
    } else if (!strcmp(c, "vmmmap")) { /* vmmmap <bytes>: the last exported or imported handle */
        *rc = vmm_map((size_t)n, entry);
    } else if (!strcmp(c, "vmmunmap")) {
        *rc = vmm_unmap(entry);
    } else if (!strcmp(c, "vmmleak")) { /* vmmleak <n> <bytes>: n x {reserve, create, map, release} */
        int count = 0, one = 0;
        size_t piece = argc > 2 ? (size_t)strtoull(argv[2], NULL, 0) : 0;
        *rc = CUDA_SUCCESS;
        while (count < (int)n && *rc == CUDA_SUCCESS) {
            *rc = vmm_span(1, piece, 0, entry, &one);
            count += one;
        }
        printf("count=%d failed_rc=%d ", count, (int)*rc);
        *rc = CUDA_SUCCESS;
    } else if (!strcmp(c, "vmmspan")) { /* vmmspan <n> <bytes> [import]: n mappings side by side */
        int count = 0;
        *rc = vmm_span((int)n, argc > 2 ? (size_t)strtoull(argv[2], NULL, 0) : 0,
                       argc > 3 && !strcmp(argv[3], "import"), entry, &count);
        printf("count=%d ", count);
    } else if (!strcmp(c, "vmmspanunmap")) {
        *rc = vmm_span_unmap(entry);
    } else if (!strcmp(c, "vmmretain")) { /* vmmretain <n> <bytes>: vmm_retain_loop */
        int count = 0;
        *rc = vmm_retain_loop((int)n, argc > 2 ? (size_t)strtoull(argv[2], NULL, 0) : 0, entry, &count);
        printf("count=%d failed_rc=%d ", count, (int)*rc);
        *rc = CUDA_SUCCESS;
    } else if (!strcmp(c, "vmmretainmapped")) { /* the handle of the vmmmap mapping, once more */
        int same = 0;
        *rc = vmm_retain(vmm_va, entry, &same);
        printf("same=%d ", same);
    } else if (!strcmp(c, "vmmretainrelease")) { /* releases every retained reference */
        *rc = CUDA_SUCCESS;
        while (nretained && *rc == CUDA_SUCCESS)
            *rc = ((CUresult(*)(CUmemGenericAllocationHandle))entry("cuMemRelease", "cuMemRelease", 0))(
                retained[--nretained]);
    } else if (!strcmp(c, "vmmrelease")) {
        *rc = ((CUresult(*)(CUmemGenericAllocationHandle))entry("cuMemRelease", "cuMemRelease", 0))(vmm_handle);
    } else {
        return 0;
    }
    return 1;
}
