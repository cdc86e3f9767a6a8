/*
 * The simulated libnvidia-ml.so.1: reads the same state as the simulated
 * libcuda.so.1. Used memory is the sum of the live processes' usage (context
 * overhead included) and the process list names every live process with a
 * context or memory on the device, each with its own usage.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sim_nvml_api.h"
#include "sim_state.h"
#include "sim_timeline.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_init_count; /* nvmlInit/nvmlShutdown nest, as in NVML */
static struct sim_state *g_st;

/* A handle is the address of its device's entry. */
struct sim_nvml_device {
    char unused;
};
static struct sim_nvml_device g_devices[SIM_MAX_DEVICES];

/* This process's nvmlInit calls left to fail (GPUSLICE_SIM_NVML_INIT_FAILS,
 * read at the first; -1 before): a driver whose NVML did not start yet. */
static long g_init_fails = -1;

static long init_fails_from_env(void)
{
    uint64_t n;
    if (sim_env_uint("GPUSLICE_SIM_NVML_INIT_FAILS", 0, 0, 1000, "a count", &n) != 0)
        return LONG_MAX; /* every init fails: the test sees why */
    return (long)n;
}

static nvmlReturn_t init(void)
{
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&g_lock);
    if (g_init_fails < 0)
        g_init_fails = init_fails_from_env();
    if (g_init_fails > 0) {
        if (g_init_fails != LONG_MAX)
            g_init_fails--;
        pthread_mutex_unlock(&g_lock);
        return NVML_ERROR_UNKNOWN;
    }
    if (!g_st)
        g_st = sim_state_attach();
    if (g_st)
        g_init_count++;
    else
        rc = NVML_ERROR_UNKNOWN;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

SIM_NVML nvmlInit(void)
{
    return init();
}

SIM_NVML nvmlInit_v2(void)
{
    return init();
}

SIM_NVML nvmlInitWithFlags(unsigned int flags)
{
    return init();
}

SIM_NVML nvmlShutdown(void)
{
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&g_lock);
    if (g_init_count == 0)
        rc = NVML_ERROR_UNINITIALIZED;
    else
        g_init_count--;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

SIM_EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

/* The state once nvmlInit succeeded, else NULL. */
static struct sim_state *state(void)
{
    pthread_mutex_lock(&g_lock);
    struct sim_state *st = g_init_count > 0 ? g_st : NULL;
    pthread_mutex_unlock(&g_lock);
    return st;
}

static nvmlReturn_t copy_string(char *dst, unsigned int length, const char *src)
{
    if (!dst)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

SIM_NVML nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!state())
        return NVML_ERROR_UNINITIALIZED;
    return copy_string(version, length, SIM_DRIVER_VERSION_STRING);
}

/* The MPS server of GPUSLICE_SIM_MPS by its name; any other pid by its
 * /proc comm, as the real library names host processes. */
SIM_NVML nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
    struct sim_state *st = state();
    if (!st)
        return NVML_ERROR_UNINITIALIZED;
    if (!name || length == 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (st->mps && pid == SIM_MPS_SERVER_PID)
        return copy_string(name, length, "nvidia-cuda-mps-server");
    char path[64], comm[64] = "";
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return NVML_ERROR_NOT_FOUND;
    int ok = fgets(comm, sizeof comm, f) != NULL;
    fclose(f);
    if (!ok)
        return NVML_ERROR_NOT_FOUND;
    comm[strcspn(comm, "\n")] = '\0';
    return copy_string(name, length, comm);
}

static nvmlReturn_t get_count(unsigned int *count)
{
    struct sim_state *st = state();
    if (!st)
        return NVML_ERROR_UNINITIALIZED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = st->ndevices;
    return NVML_SUCCESS;
}

SIM_NVML nvmlDeviceGetCount(unsigned int *deviceCount)
{
    return get_count(deviceCount);
}

SIM_NVML nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    return get_count(deviceCount);
}

static nvmlReturn_t by_index(unsigned int index, nvmlDevice_t *device)
{
    struct sim_state *st = state();
    if (!st)
        return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= st->ndevices)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = (nvmlDevice_t)(void *)&g_devices[index];
    return NVML_SUCCESS;
}

SIM_NVML nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return by_index(index, device);
}

SIM_NVML nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    return by_index(index, device);
}

SIM_NVML nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    struct sim_state *st = state();
    if (!st)
        return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < st->ndevices; i++) {
        char s[NVML_DEVICE_UUID_BUFFER_SIZE];
        sim_device_uuid_string((int)i, s, sizeof(s));
        if (strcmp(s, uuid) == 0) {
            *device = (nvmlDevice_t)(void *)&g_devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

/* Checks init and the handle; gives the device index. */
static nvmlReturn_t device_index(nvmlDevice_t device, struct sim_state **st_out, int *idx)
{
    struct sim_state *st = state();
    if (!st)
        return NVML_ERROR_UNINITIALIZED;
    const struct sim_nvml_device *d = (const struct sim_nvml_device *)(void *)device;
    if (d < g_devices || d >= g_devices + SIM_MAX_DEVICES || (uint32_t)(d - g_devices) >= st->ndevices)
        return NVML_ERROR_INVALID_ARGUMENT;
    *st_out = st;
    *idx = (int)(d - g_devices);
    return NVML_SUCCESS;
}

SIM_NVML nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    struct sim_state *st;
    int i;
    nvmlReturn_t rc = device_index(device, &st, &i);
    if (rc != NVML_SUCCESS)
        return rc;
    char s[NVML_DEVICE_UUID_BUFFER_SIZE];
    sim_device_uuid_string(i, s, sizeof(s));
    return copy_string(uuid, length, s);
}

SIM_NVML nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    struct sim_state *st;
    int i;
    nvmlReturn_t rc = device_index(device, &st, &i);
    return rc != NVML_SUCCESS ? rc : copy_string(name, length, SIM_DEVICE_NAME);
}

SIM_NVML nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    struct sim_state *st;
    int i;
    nvmlReturn_t rc = device_index(device, &st, &i);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned int)i;
    return NVML_SUCCESS;
}

/* total and used of one device, after dropping dead processes. */
static nvmlReturn_t memory(nvmlDevice_t device, unsigned long long *total, unsigned long long *used)
{
    struct sim_state *st;
    int i;
    nvmlReturn_t rc = device_index(device, &st, &i);
    if (rc != NVML_SUCCESS)
        return rc;
    if (sim_state_lock(st) != 0)
        return NVML_ERROR_UNKNOWN;
    *total = st->dev[i].total;
    *used = sim_device_used(st, i);
    sim_state_unlock(st);
    return NVML_SUCCESS;
}

SIM_NVML nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *mem)
{
    unsigned long long total = 0, used = 0;
    if (!mem)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = memory(device, &total, &used);
    if (rc == NVML_SUCCESS) {
        mem->total = total;
        mem->used = used;
        mem->free = used >= total ? 0 : total - used;
    }
    return rc;
}

SIM_NVML nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *mem)
{
    unsigned long long total = 0, used = 0;
    if (!mem)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mem->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlReturn_t rc = memory(device, &total, &used);
    if (rc == NVML_SUCCESS) {
        mem->total = total;
        mem->reserved = 0; /* the sim reserves nothing for the driver */
        mem->used = used;
        mem->free = used >= total ? 0 : total - used;
    }
    return rc;
}

/*
 * Fills pids/usage of the processes on a device. NVML's contract: *count in
 * is the capacity; out, the number of processes, with
 * NVML_ERROR_INSUFFICIENT_SIZE when they do not fit.
 */
static nvmlReturn_t processes(nvmlDevice_t device, unsigned int *count, unsigned int *pids, unsigned long long *usage)
{
    struct sim_state *st;
    int d;
    nvmlReturn_t rc = device_index(device, &st, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (sim_state_lock(st) != 0)
        return NVML_ERROR_UNKNOWN;
    unsigned int n = 0;
    for (int p = 0; p < SIM_MAX_PROCS; p++) {
        const struct sim_proc *pr = &st->procs[p];
        if (!pr->pid || (!pr->contexts[d] && !pr->used[d]))
            continue;
        if (n < *count && pids) {
            pids[n] = (unsigned int)sim_proc_pid_seen(st, pr->pid);
            usage[n] = pr->used[d];
        }
        n++;
    }
    sim_state_unlock(st);
    if (n > *count)
        rc = NVML_ERROR_INSUFFICIENT_SIZE;
    else if (n > 0 && !pids)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    *count = n;
    return rc;
}

SIM_NVML nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v1_t *infos)
{
    unsigned int pids[SIM_MAX_PROCS];
    unsigned long long usage[SIM_MAX_PROCS];
    unsigned int cap = infoCount ? *infoCount : 0, n = cap > SIM_MAX_PROCS ? SIM_MAX_PROCS : cap;
    nvmlReturn_t rc = processes(device, infoCount ? &n : NULL, infos ? pids : NULL, usage);
    if (infoCount)
        *infoCount = n;
    if (rc == NVML_SUCCESS)
        for (unsigned int i = 0; i < n; i++)
            infos[i] = (nvmlProcessInfo_v1_t){ .pid = pids[i], .usedGpuMemory = usage[i] };
    return rc;
}

static nvmlReturn_t processes_v2(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos)
{
    unsigned int pids[SIM_MAX_PROCS];
    unsigned long long usage[SIM_MAX_PROCS];
    unsigned int cap = infoCount ? *infoCount : 0, n = cap > SIM_MAX_PROCS ? SIM_MAX_PROCS : cap;
    nvmlReturn_t rc = processes(device, infoCount ? &n : NULL, infos ? pids : NULL, usage);
    if (infoCount)
        *infoCount = n;
    if (rc == NVML_SUCCESS)
        for (unsigned int i = 0; i < n; i++) /* not a MIG device: instance ids are "none" */
            infos[i] = (nvmlProcessInfo_t){ .pid = pids[i],
                                            .usedGpuMemory = usage[i],
                                            .gpuInstanceId = 0xFFFFFFFFU,
                                            .computeInstanceId = 0xFFFFFFFFU };
    return rc;
}

SIM_NVML nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos)
{
    return processes_v2(device, infoCount, infos);
}

#ifdef SIM_NVML_R535
/* The library of a 535-branch driver (simdriver-r535/): its _v3 entries
 * carry a fifth field, and it has nvmlDeviceGetConfComputeMemSizeInfo but
 * not nvmlDeviceGetRunningProcessDetailList. */
struct proc_info_r535 {
    nvmlProcessInfo_t info;
    unsigned long long usedGpuCcProtectedMemory;
};

SIM_NVML nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos)
{
    nvmlProcessInfo_t got[SIM_MAX_PROCS];
    unsigned int cap = infoCount ? *infoCount : 0, n = cap > SIM_MAX_PROCS ? SIM_MAX_PROCS : cap;
    nvmlReturn_t rc = processes_v2(device, infoCount ? &n : NULL, infos ? got : NULL);
    if (infoCount)
        *infoCount = n;
    if (rc == NVML_SUCCESS)
        for (unsigned int i = 0; i < n; i++)
            ((struct proc_info_r535 *)(void *)infos)[i] = (struct proc_info_r535){ .info = got[i] };
    return rc;
}

SIM_NVML nvmlDeviceGetConfComputeMemSizeInfo(nvmlDevice_t device, void *memInfo)
{
    (void)device;
    (void)memInfo;
    return NVML_ERROR_NOT_SUPPORTED;
}
#else
SIM_NVML nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos)
{
    return processes_v2(device, infoCount, infos);
}
#endif

/* What the last full sample period says into *out: the device's utilisation
 * (percent), or with want_power the power the model draws, a mean over the
 * last second (sim_power_over_span; mW). */
static nvmlReturn_t last_period(nvmlDevice_t device, int want_power, unsigned int *out)
{
    struct sim_state *st;
    int i;
    nvmlReturn_t rc = device_index(device, &st, &i);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (sim_state_lock(st) != 0)
        return NVML_ERROR_UNKNOWN;
    sim_tl_advance(st, i, sim_now_ns());
    *out = want_power ? sim_power_over_span(st, i) : st->dev[i].tl_last_util;
    sim_state_unlock(st);
    return NVML_SUCCESS;
}

SIM_NVML nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    nvmlReturn_t rc = last_period(device, 0, utilization ? &utilization->gpu : NULL);
    if (rc == NVML_SUCCESS)
        utilization->memory = 0;
    return rc;
}

SIM_NVML nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    return last_period(device, 1, power);
}

/* The power fields only: the one-second mean (185) and the instantaneous
 * draw (186, unless GPUSLICE_SIM_POWER_INSTANT is 0); any other field is
 * NVML_ERROR_NOT_SUPPORTED in its own nvmlReturn, as NVML answers for a
 * field the device lacks. */
SIM_NVML nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values)
{
    struct sim_state *st;
    int i;
    nvmlReturn_t rc = device_index(device, &st, &i);
    if (rc != NVML_SUCCESS)
        return rc;
    if (valuesCount < 0 || (valuesCount > 0 && !values))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (sim_state_lock(st) != 0)
        return NVML_ERROR_UNKNOWN;
    sim_tl_advance(st, i, sim_now_ns());
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall); /* NVML stamps a field in us since 1970 */
    for (int k = 0; k < valuesCount; k++) {
        nvmlFieldValue_t *v = &values[k];
        v->timestamp = (long long)wall.tv_sec * 1000000 + wall.tv_nsec / 1000;
        v->latencyUsec = 0;
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        v->nvmlReturn = NVML_SUCCESS;
        if (v->fieldId == NVML_FI_DEV_POWER_INSTANT && st->power_instant)
            v->value.uiVal = sim_power_now(st, i);
        else if (v->fieldId == NVML_FI_DEV_POWER_AVERAGE)
            v->value.uiVal = sim_power_over_span(st, i);
        else
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
    sim_state_unlock(st);
    return NVML_SUCCESS;
}

SIM_NVML nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    struct sim_state *st;
    int i;
    nvmlReturn_t rc = device_index(device, &st, &i);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!limit)
        return NVML_ERROR_INVALID_ARGUMENT;
    *limit = (unsigned int)SIM_POWER_LIMIT_MW;
    return NVML_SUCCESS;
}

/* How long a read of GPUSLICE_SIM_NVML_READ_MEET's meeting waits at most for
 * the others, and how often it looks (the simulated clock's ns). */
#define SIM_MEET_WAIT_NS 5000000000ULL
#define SIM_MEET_POLL_NS 1000000L

/* The first nvml_read_meet reads of the per-process samples meet: each waits
 * until all of them are inside at once, so that their callers' runs overlap
 * however the host schedules them (0.3 s stalls left two processes' runs
 * apart on a loaded machine). A read that waited SIM_MEET_WAIT_NS in vain
 * ends the meeting, saying so: no read waits after it. Processes share it
 * through the state, polled under its lock. */
static int meet_other_reads(struct sim_state *st)
{
    if (sim_state_lock(st) != 0)
        return -1;
    int waits = st->nvml_read_meet > 1 && !st->meet_over;
    if (waits && ++st->meet_in >= st->nvml_read_meet)
        st->meet_over = 1; /* the last to come: the others go on too */
    uint64_t give_up = sim_now_ns() + SIM_MEET_WAIT_NS;
    while (waits && !st->meet_over) {
        if (sim_now_ns() >= give_up) {
            st->meet_over = 1;
            fprintf(stderr,
                    "gpuslice-sim: a read of the per-process samples met %u of %u (GPUSLICE_SIM_NVML_READ_MEET) "
                    "in %llu s; none waits now\n",
                    st->meet_in, st->nvml_read_meet, SIM_MEET_WAIT_NS / 1000000000ULL);
            break;
        }
        sim_state_unlock(st);
        struct timespec poll = { 0, SIM_MEET_POLL_NS };
        nanosleep(&poll, NULL);
        if (sim_state_lock(st) != 0)
            return -1;
    }
    sim_state_unlock(st);
    return 0;
}

/* A read takes read_us, as an H200's took 1.7 ms: its caller's clock
 * reading before it grows old while the caller's other threads run. */
static void take_read_time(uint32_t read_us)
{
    struct timespec ts = { (time_t)(read_us / 1000000U), (long)(read_us % 1000000U) * 1000L };
    while (read_us && nanosleep(&ts, &ts) != 0) {
    }
}

SIM_NVML nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
                                         unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp)
{
    struct sim_state *st;
    int i;
    nvmlReturn_t rc = device_index(device, &st, &i);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!processSamplesCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* the samples are taken once the meeting (if any) is over: a read
     * that waited sees those that came meanwhile */
    if (meet_other_reads(st) != 0)
        return NVML_ERROR_UNKNOWN;
    /* Every sample newer than lastSeenTimeStamp still in the ring, oldest
     * first: one per process per period in which its kernels ran. */
    if (sim_state_lock(st) != 0)
        return NVML_ERROR_UNKNOWN;
    sim_tl_advance(st, i, sim_now_ns());
    const struct sim_device *d = &st->dev[i];
    uint32_t n = d->tl_sample_head < SIM_UTIL_SAMPLES ? d->tl_sample_head : SIM_UTIL_SAMPLES;
    unsigned int want = 0, cap = *processSamplesCount;
    for (uint32_t j = d->tl_sample_head - n; j != d->tl_sample_head; j++) {
        const struct sim_util_sample *s = &d->samples[j % SIM_UTIL_SAMPLES];
        if (s->ts_us <= lastSeenTimeStamp)
            continue;
        if (utilization && want < cap)
            utilization[want] = (nvmlProcessUtilizationSample_t){
                .pid = (unsigned int)sim_proc_pid_seen(st, (int32_t)s->pid), .timeStamp = s->ts_us, .smUtil = s->sm_util
            };
        want++;
    }
    uint32_t read_us = st->nvml_read_us;
    int short_count = st->nvml_short_count != 0;
    sim_state_unlock(st);
    take_read_time(read_us);
    /* NVML documents the count only for a call without a buffer (the
     * size to allocate); GPUSLICE_SIM_NVML_SHORT_COUNT models a driver
     * that leaves a short buffer's count as it was given */
    if (short_count && utilization && want > cap)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    *processSamplesCount = want;
    if (want == 0)
        return NVML_ERROR_NOT_FOUND;
    if (!utilization || want > cap)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    return NVML_SUCCESS;
}
