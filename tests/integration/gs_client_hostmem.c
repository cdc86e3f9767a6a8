/*
 * gs_client's tenant of host memory the device reaches (see gs_client.c for
 * the protocol):
 *   hostmem KIND         takes 4 KiB of it, kept for the process's life: KIND
 *                        alloc (cuMemAllocHost), hostalloc (cuMemHostAlloc,
 *                        mapped), register (cuMemHostRegister of its own
 *                        memory), managed (cuMemAllocManaged), plain (its own
 *                        memory, unregistered: reached only where the device
 *                        has pageable access)
 *   spinflag KIND SECS   a kernel spinning on a flag in such memory (the
 *                        simulated driver's "spin_flag"), then the current
 *                        function launched for SECS, and only then the flag
 *                        set and the stream synchronised: as a persistent kernel
 *                        that the host releases after its next steps
 */
#define _GNU_SOURCE
#include "gs_client_hostmem.h"
#include "gs_client_cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOSTMEM_BYTES 4096

static _Alignas(4096) uint32_t own_memory[HOSTMEM_BYTES / sizeof(uint32_t)];

/* HOSTMEM_BYTES of host memory of the kind named, or NULL with *rc set. */
static volatile uint32_t *host_memory(gs_entry_fn entry, const char *kind, CUresult *rc)
{
    void *p = NULL;
    *rc = CUDA_ERROR_NOT_FOUND;
    if (!strcmp(kind, "alloc")) {
        CUresult (*alloc)(void **, size_t) =
            (CUresult(*)(void **, size_t))entry("cuMemAllocHost", "cuMemAllocHost_v2", 0);
        if (alloc)
            *rc = alloc(&p, HOSTMEM_BYTES);
    } else if (!strcmp(kind, "hostalloc")) {
        CUresult (*alloc)(void **, size_t, unsigned) =
            (CUresult(*)(void **, size_t, unsigned))entry("cuMemHostAlloc", "cuMemHostAlloc", 0);
        if (alloc)
            *rc = alloc(&p, HOSTMEM_BYTES, 0x2); /* CU_MEMHOSTALLOC_DEVICEMAP */
    } else if (!strcmp(kind, "register")) {
        CUresult (*reg)(void *, size_t, unsigned) =
            (CUresult(*)(void *, size_t, unsigned))entry("cuMemHostRegister", "cuMemHostRegister_v2", 0);
        if (reg && (*rc = reg(own_memory, sizeof own_memory, 0x2)) == CUDA_SUCCESS) /* _DEVICEMAP */
            p = own_memory;
    } else if (!strcmp(kind, "managed")) {
        CUresult (*alloc)(CUdeviceptr *, size_t, unsigned) =
            (CUresult(*)(CUdeviceptr *, size_t, unsigned))entry("cuMemAllocManaged", "cuMemAllocManaged", 0);
        CUdeviceptr d = 0;
        if (alloc)
            *rc = alloc(&d, HOSTMEM_BYTES, 0x1); /* CU_MEM_ATTACH_GLOBAL: the sim's address is no host one */
        return NULL;
    } else if (!strcmp(kind, "plain")) {
        *rc = CUDA_SUCCESS;
        p = own_memory;
    } else {
        *rc = CUDA_ERROR_INVALID_VALUE;
    }
    return *rc == CUDA_SUCCESS ? (volatile uint32_t *)p : NULL;
}

static CUresult spin_on_flag(gs_entry_fn entry, const char *kind, double secs)
{
    struct gs_module_api api;
    CUfunction work = gs_client_func();
    if (gs_module_api_of(entry, &api) != 0 || !work)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc;
    volatile uint32_t *flag = host_memory(entry, kind, &rc);
    if (!flag)
        return rc == CUDA_SUCCESS ? CUDA_ERROR_INVALID_VALUE : rc;
    *flag = 0;
    CUmodule module;
    CUfunction spin;
    rc = api.load(&module, "image");
    if (!rc)
        rc = api.get(&spin, module, "spin_flag");
    CUdeviceptr arg = (CUdeviceptr)(uintptr_t)flag;
    void *params[] = { &arg };
    if (!rc)
        rc = api.launch(spin, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
    double t0 = gs_now_s();
    unsigned long long n = 0;
    while (!rc && gs_now_s() - t0 < secs) {
        rc = api.launch(work, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        n++;
    }
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    if (!rc)
        rc = api.sync(NULL);
    printf("launches=%llu elapsed_us=%llu ", n, (unsigned long long)((gs_now_s() - t0) * 1e6));
    return rc;
}

int gs_client_hostmem(int argc, char **argv, CUresult *rc, gs_entry_fn entry)
{
    if (!strcmp(argv[0], "hostmem") && argc > 1) {
        (void)host_memory(entry, argv[1], rc);
        return 1;
    }
    if (!strcmp(argv[0], "spinflag") && argc > 2) {
        *rc = spin_on_flag(entry, argv[1], atof(argv[2]));
        return 1;
    }
    return 0;
}
