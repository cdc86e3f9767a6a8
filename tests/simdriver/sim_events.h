/*
 * NVML event and topology entry points added to the simulated
 * libnvidia-ml.so.1 for the node agent's health and inventory code.
 * Types and values re-typed from NVIDIA's NVML API reference.
 */
#ifndef GPUSLICE_SIM_EVENTS_H
#define GPUSLICE_SIM_EVENTS_H

#include "../../src/abi/nvml_abi.h"
#include "sim_export.h"

enum { NVML_ERROR_TIMEOUT = 10, NVML_ERROR_GPU_IS_LOST = 15 };
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL

typedef struct nvmlEventSet_st *nvmlEventSet_t;
typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

SIM_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set);
SIM_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                                 nvmlEventSet_t set);
SIM_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes);
SIM_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms);
SIM_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms);
SIM_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);
SIM_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node);

#endif
