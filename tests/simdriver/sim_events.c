/*
 * Simulated NVML events: XID errors injected through a text file.
 *
 * SIM_NVML_EVENTS names a file that tests append lines to:
 *     <device index> <xid>
 * An event set reads the lines appended after it was created (like NVML,
 * which reports only events that happen after registration) and returns
 * each as nvmlEventTypeXidCriticalError with eventData = xid, for the
 * devices registered on that set. Without the variable, waits just time out.
 * (These two names do not start with GPUSLICE_ on purpose: the interposer
 * refuses unknown GPUSLICE_* variables, and tenants share the test env.)
 *
 * SIM_NVML_NUMA="n0,n1,..." gives nvmlDeviceGetNumaNodeId per device
 * index; unset, every device reports NVML_ERROR_NOT_SUPPORTED.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "sim_events.h"
#include "sim_nvml_api.h"

#define SIM_EV_MAX_DEV 8

struct nvmlEventSet_st {
    long offset; /* bytes of the events file already read */
    int registered[SIM_EV_MAX_DEV];
    nvmlDevice_t handle[SIM_EV_MAX_DEV];
};

static const char *events_path(void)
{
    const char *p = getenv("SIM_NVML_EVENTS");
    return p && *p ? p : NULL;
}

SIM_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    unsigned int n;
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (nvmlDeviceGetCount_v2(&n) != NVML_SUCCESS)
        return NVML_ERROR_UNINITIALIZED;
    struct nvmlEventSet_st *s = calloc(1, sizeof *s);
    if (!s)
        return NVML_ERROR_UNKNOWN;
    struct stat sb;
    const char *p = events_path();
    if (p && stat(p, &sb) == 0)
        s->offset = (long)sb.st_size;
    *set = s;
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes)
{
    unsigned int idx;
    if (!eventTypes)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = nvmlDeviceGetIndex(device, &idx);
    if (rc != NVML_SUCCESS)
        return rc;
    *eventTypes = nvmlEventTypeXidCriticalError;
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set)
{
    unsigned int idx;
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = nvmlDeviceGetIndex(device, &idx);
    if (rc != NVML_SUCCESS)
        return rc;
    if (idx >= SIM_EV_MAX_DEV)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!(eventTypes & nvmlEventTypeXidCriticalError))
        return NVML_ERROR_NOT_SUPPORTED;
    set->registered[idx] = 1;
    set->handle[idx] = device;
    return NVML_SUCCESS;
}

/* Reads one complete new line, if any. Returns 1 and fills dev/xid for an
 * event on a registered device, 0 when nothing new, -1 for a line to skip. */
static int next_event(struct nvmlEventSet_st *s, unsigned *dev, unsigned long long *xid)
{
    const char *p = events_path();
    if (!p)
        return 0;
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    int rc = 0;
    char line[256];
    if (fseek(f, s->offset, SEEK_SET) == 0 && fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (n > 0 && line[n - 1] == '\n') { /* only whole lines */
            s->offset += (long)n;
            rc = -1;
            if (sscanf(line, "%u %llu", dev, xid) == 2 && *dev < SIM_EV_MAX_DEV && s->registered[*dev])
                rc = 1;
        }
    }
    fclose(f);
    return rc;
}

SIM_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    if (!set || !data)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        unsigned dev;
        unsigned long long xid;
        int rc;
        while ((rc = next_event(set, &dev, &xid)) != 0) {
            if (rc == 1) {
                memset(data, 0, sizeof *data);
                data->device = set->handle[dev];
                data->eventType = nvmlEventTypeXidCriticalError;
                data->eventData = xid;
                data->gpuInstanceId = 0xFFFFFFFFu;
                data->computeInstanceId = 0xFFFFFFFFu;
                return NVML_SUCCESS;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ms = (now.tv_sec - start.tv_sec) * 1000L + (now.tv_nsec - start.tv_nsec) / 1000000L;
        if (ms >= (long)timeoutms)
            return NVML_ERROR_TIMEOUT;
        struct timespec ts = { 0, 10 * 1000000L };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
}

SIM_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    return nvmlEventSetWait_v2(set, data, timeoutms);
}

SIM_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    free(set);
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
    unsigned int idx;
    if (!node)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = nvmlDeviceGetIndex(device, &idx);
    if (rc != NVML_SUCCESS)
        return rc;
    const char *s = getenv("SIM_NVML_NUMA");
    if (!s || !*s)
        return NVML_ERROR_NOT_SUPPORTED;
    for (unsigned int i = 0; *s; i++) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s)
            return NVML_ERROR_UNKNOWN;
        if (i == idx) {
            *node = (unsigned int)v;
            return NVML_SUCCESS;
        }
        s = *end == ',' ? end + 1 : end;
        if (!*end)
            break;
    }
    return NVML_ERROR_NOT_SUPPORTED;
}
