/*
 * An unloaded module or library frees its functions' handles, and the
 * driver may hand the same values out again for other kernels: what the
 * interposer learnt of a handle (whether its kernel is a collective,
 * compute_collective.c) is forgotten once the unload succeeded. A context's
 * destroy unloads its modules too (context_hooks.c).
 */
#include "compute_collective.h"
#include "real_driver.h"

/* rc: the real unload's result; a success freed the handles. */
static CUresult unloaded(CUresult rc)
{
    if (rc == CUDA_SUCCESS)
        gs_compute_collective_unloaded();
    return rc;
}

CUresult cuModuleUnload(CUmodule hmod)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuModuleUnload);
    return unloaded(real(hmod));
}

CUresult cuLibraryUnload(CUlibrary library)
{
    GS_REAL_CU_OR_NOT_FOUND(real, cuLibraryUnload);
    return unloaded(real(library));
}
