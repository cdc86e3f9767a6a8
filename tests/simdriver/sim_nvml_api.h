/* Every entry point the simulated libnvidia-ml.so.1 exports. */
#ifndef GPUSLICE_SIM_NVML_API_H
#define GPUSLICE_SIM_NVML_API_H

#include "../../src/abi/nvml_abi.h"
#include "sim_export.h"

#define SIM_NVML SIM_EXPORT nvmlReturn_t

SIM_NVML nvmlInit(void);
SIM_NVML nvmlInit_v2(void);
SIM_NVML nvmlInitWithFlags(unsigned int flags);
SIM_NVML nvmlShutdown(void);
SIM_EXPORT const char *nvmlErrorString(nvmlReturn_t result);
SIM_NVML nvmlSystemGetDriverVersion(char *version, unsigned int length);
SIM_NVML nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length);
SIM_NVML nvmlDeviceGetCount(unsigned int *deviceCount);
SIM_NVML nvmlDeviceGetCount_v2(unsigned int *deviceCount);
SIM_NVML nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device);
SIM_NVML nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
SIM_NVML nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
SIM_NVML nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
SIM_NVML nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
SIM_NVML nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
SIM_NVML nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
SIM_NVML nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
SIM_NVML nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                              nvmlProcessInfo_v1_t *infos);
SIM_NVML nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                 nvmlProcessInfo_t *infos);
SIM_NVML nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                 nvmlProcessInfo_t *infos);
#ifdef SIM_NVML_R535
SIM_NVML nvmlDeviceGetConfComputeMemSizeInfo(nvmlDevice_t device, void *memInfo);
#endif
SIM_NVML nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
SIM_NVML nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power);
SIM_NVML nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit);
SIM_NVML nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values);
SIM_NVML nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
                                         unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp);

#endif
