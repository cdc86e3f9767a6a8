/*
 * gs_client's context commands: contexts made with cuCtxCreate through each
 * of its ABIs, and destroyed again, so that a test can see each one charged
 * and released (docs/memory.md, "Context overhead").
 */
#include "gs_client_contexts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*create_v2_fn)(CUcontext *, unsigned int, CUdevice);
typedef CUresult (*create_v3_fn)(CUcontext *, CUexecAffinityParam *, int, unsigned int, CUdevice);
typedef CUresult (*create_v4_fn)(CUcontext *, CUctxCreateParams *, unsigned int, CUdevice);
typedef CUresult (*destroy_fn)(CUcontext);

static CUcontext contexts[256];
static int ncontexts;

/* The ABI of name that CUDA version answers for ("getproc"), or its
 * exported versioned name through dlsym ("sym"). */
static void *versioned(const char *base, const char *vname, int version, const char *how, gs_entry_fn entry)
{
    if (!strcmp(how, "sym"))
        return entry(NULL, vname, 0);
    gpa_fn gpa = (gpa_fn)entry("cuGetProcAddress", "cuGetProcAddress_v2", 0);
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    return gpa && gpa(base, &p, version, 0, &st) == CUDA_SUCCESS ? p : NULL;
}

/* One context on ordinal dev through abi: v1 (pre-3.2 cuCtxCreate), v2, v3 or v4. */
static CUresult create_one(const char *abi, CUdevice dev, const char *how, gs_entry_fn entry, CUcontext *ctx)
{
    if (!strcmp(abi, "v1") || !strcmp(abi, "v2")) {
        int v1 = !strcmp(abi, "v1");
        create_v2_fn f =
            (create_v2_fn)versioned("cuCtxCreate", v1 ? "cuCtxCreate" : "cuCtxCreate_v2", v1 ? 2000 : 3020, how, entry);
        return f ? f(ctx, 0, dev) : CUDA_ERROR_NOT_FOUND;
    }
    if (!strcmp(abi, "v3")) {
        create_v3_fn f = (create_v3_fn)versioned("cuCtxCreate", "cuCtxCreate_v3", 12000, how, entry);
        return f ? f(ctx, NULL, 0, 0, dev) : CUDA_ERROR_NOT_FOUND;
    }
    create_v4_fn f = (create_v4_fn)versioned("cuCtxCreate", "cuCtxCreate_v4", 12050, how, entry);
    return f ? f(ctx, NULL, 0, dev) : CUDA_ERROR_NOT_FOUND;
}

/* ctxcreate <abi> <n> [getproc|sym] [ordinal]: cuInit, then up to n
 * contexts, stopping at the first refusal. */
static CUresult create_many(int argc, char **argv, gs_entry_fn entry)
{
    const char *abi = argc > 1 ? argv[1] : "v2";
    int n = argc > 2 ? atoi(argv[2]) : 1, count = 0;
    const char *how = argc > 3 ? argv[3] : "getproc";
    CUdevice dev = argc > 4 ? atoi(argv[4]) : 0;
    CUresult rc = ((CUresult(*)(unsigned))entry("cuInit", "cuInit", 0))(0);
    while (rc == CUDA_SUCCESS && count < n && ncontexts < (int)(sizeof contexts / sizeof contexts[0])) {
        rc = create_one(abi, dev, how, entry, &contexts[ncontexts]);
        if (rc == CUDA_SUCCESS) {
            ncontexts++;
            count++;
        }
    }
    printf("count=%d failed_rc=%d ", count, (int)rc);
    return rc;
}

/* ctxdestroy <v1|v2> [all]: the last context made (or every one) through
 * cuCtxDestroy (pre-4.0) or cuCtxDestroy_v2. */
static CUresult destroy(int argc, char **argv, gs_entry_fn entry)
{
    int v1 = argc > 1 && !strcmp(argv[1], "v1");
    int all = argc > 2 && !strcmp(argv[2], "all");
    destroy_fn f = (destroy_fn)versioned("cuCtxDestroy", v1 ? "cuCtxDestroy" : "cuCtxDestroy_v2", v1 ? 2000 : 4000,
                                         "getproc", entry);
    CUresult rc = f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
    if (f && !ncontexts)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    while (f && ncontexts && rc == CUDA_SUCCESS) {
        rc = f(contexts[--ncontexts]);
        if (rc == CUDA_SUCCESS)
            gs_client_compute_ctx_gone(); /* a module `kernel` loaded may have been in it */
        if (!all)
            break;
    }
    return rc;
}

int gs_client_contexts(int argc, char **argv, CUresult *rc, gs_entry_fn entry)
{
    if (!strcmp(argv[0], "ctxcreate"))
        *rc = create_many(argc, argv, entry);
    else if (!strcmp(argv[0], "ctxdestroy"))
        *rc = destroy(argc, argv, entry);
    else
        return 0;
    return 1;
}
