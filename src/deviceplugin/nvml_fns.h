/* NVML entry points the agent uses, resolved with dlsym (types re-typed from
 * NVIDIA's NVML API reference). */
#ifndef GPUSLICE_DP_NVML_FNS_H
#define GPUSLICE_DP_NVML_FNS_H

struct gs_nvml_memory {
    unsigned long long total, free, used;
};
struct gs_nvml_util {
    unsigned gpu, memory;
};
struct gs_nvml_event {
    void *device;
    unsigned long long type;
    unsigned long long data;
    unsigned gpu_instance, compute_instance;
};
#define GS_NVML_EVENT_XID 0x8ULL
#define GS_NVML_ERROR_TIMEOUT 10

struct gs_nvml {
    void *lib;
    int (*nvmlInit_v2)(void);
    int (*nvmlDeviceGetCount_v2)(unsigned *);
    int (*nvmlDeviceGetHandleByIndex_v2)(unsigned, void **);
    int (*nvmlDeviceGetUUID)(void *, char *, unsigned);
    int (*nvmlDeviceGetName)(void *, char *, unsigned);
    int (*nvmlDeviceGetMemoryInfo)(void *, struct gs_nvml_memory *);
    int (*nvmlDeviceGetUtilizationRates)(void *, struct gs_nvml_util *);
    int (*nvmlSystemGetDriverVersion)(char *, unsigned);
    int (*nvmlDeviceGetNumaNodeId)(void *, unsigned *);
    int (*nvmlEventSetCreate)(void **);
    int (*nvmlDeviceRegisterEvents)(void *, unsigned long long, void *);
    int (*nvmlEventSetWait_v2)(void *, struct gs_nvml_event *, unsigned);
    int (*nvmlEventSetFree)(void *);
    const char *(*nvmlErrorString)(int);
};
extern struct gs_nvml g_nvml;

#endif
