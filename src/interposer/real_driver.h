/*
 * The real driver behind the interposer: where its entry points live, and
 * the map from each real entry point to the wrapper that stands in for it.
 */
#ifndef GPUSLICE_REAL_DRIVER_H
#define GPUSLICE_REAL_DRIVER_H

#include "../abi/cuda_abi.h"
#include "../abi/nvml_abi.h"

#define GS_EXPORT __attribute__((visibility("default")))
#define GS_LIKELY(x) __builtin_expect(!!(x), 1)
#define GS_UNLIKELY(x) __builtin_expect(!!(x), 0)

enum gs_entry_id {
#define CU_ENTRY(name, params) GS_E_##name,
#define NVML_ENTRY(name, params) GS_E_##name,
#include "entry_points.def"
    GS_E_COUNT
};

#define CU_ENTRY(name, params) typedef CUresult(*gs_pfn_##name) params;
#define NVML_ENTRY(name, params) typedef nvmlReturn_t(*gs_pfn_##name) params;
#include "entry_points.def"

/* Our wrappers carry the real names and are exported, so that programs
 * linked directly against libcuda/libnvidia-ml reach them too. */
#define CU_ENTRY(name, params) GS_EXPORT CUresult name params;
#define NVML_ENTRY(name, params) GS_EXPORT nvmlReturn_t name params;
#define CU_CALL(name, params)
#define NVML_CALL(name, params)
#include "entry_points.def"

enum gs_lib { GS_LIB_CUDA = 0, GS_LIB_NVML = 1 };

extern void *gs_real_ptr[GS_E_COUNT];
extern int gs_lib_ready[2];

/* Resolves the real entry points of lib. With load == 0 it only looks at a
 * library that is already loaded (the dlsym path must not load libcuda as a
 * side effect); with load != 0 it dlopens it. Returns 0 once resolved. */
int gs_real_resolve(enum gs_lib lib, int load);

/* The real entry point id, resolving on first use (one load on the hot
 * path). NULL if the installed driver does not have it. */
static inline void *gs_real_fn(enum gs_lib lib, int id)
{
    if (GS_UNLIKELY(!__atomic_load_n(&gs_lib_ready[lib], __ATOMIC_ACQUIRE)))
        gs_real_resolve(lib, 1);
    return gs_real_ptr[id];
}
#define GS_REAL_CU(name) ((gs_pfn_##name)gs_real_fn(GS_LIB_CUDA, GS_E_##name))
/* Real entry point by name, typed. */
#define GS_REAL_NVML(name) ((gs_pfn_##name)gs_real_fn(GS_LIB_NVML, GS_E_##name))

/* Declares `var`, the real entry point `name`; a wrapper whose real entry
 * point the driver does not have answers "not found", never a crash. */
#define GS_REAL_CU_OR_NOT_FOUND(var, name)                                                                             \
    gs_pfn_##name var = GS_REAL_CU(name);                                                                              \
    if (GS_UNLIKELY(!var))                                                                                             \
    return CUDA_ERROR_NOT_FOUND
#define GS_REAL_NVML_OR_NOT_FOUND(var, name)                                                                           \
    gs_pfn_##name var = GS_REAL_NVML(name);                                                                            \
    if (GS_UNLIKELY(!var))                                                                                             \
    return NVML_ERROR_FUNCTION_NOT_FOUND

/* If p is a real entry point we wrap, our wrapper; otherwise p itself. */
void *gs_wrapper_for(void *p);
/* Whether p is one of our wrappers (an export of the interposer). */
int gs_is_wrapper(const void *p);

#endif
