/* CPU-bound mixes (see cpu_mix.h). */
#include "cpu_mix.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* The mix is one fixed list, the same for every seed of a run. */
#define MIX_SEED 0x637075ull

int sim_cpu_mix_spec(const char *spec, char *name, size_t cap, double *factor)
{
    *factor = 0.0;
    const char *plus = strstr(spec, "+cpu");
    size_t len = plus ? (size_t)(plus - spec) : strlen(spec);
    if (len == 0 || len >= cap)
        return -1;
    memcpy(name, spec, len);
    name[len] = '\0';
    if (!plus)
        return 0;
    const char *num = plus + 4;
    char *end;
    errno = 0;
    double x = strtod(num, &end);
    if (errno || end == num || *end || !(x > 1.0) || x > 100.0)
        return -1;
    *factor = x;
    return 0;
}

int sim_cpu_mix(trace_pods *pods, double factor, char *err, size_t errlen)
{
    size_t num_cpu = 0;
    double have = 0.0;
    for (size_t i = 0; i < pods->count; i++) {
        if (pods->pods[i].num_gpus == 0) {
            num_cpu++;
            have += (double)pods->pods[i].cpu_milli;
        }
    }
    if (num_cpu == 0 || have <= 0.0) {
        snprintf(err, errlen, "+cpu%g: the list has no CPU-only pod to sample", factor);
        return -1;
    }
    size_t *cpu_idx = malloc(num_cpu * sizeof(*cpu_idx));
    if (!cpu_idx) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0, k = 0; i < pods->count; i++)
        if (pods->pods[i].num_gpus == 0)
            cpu_idx[k++] = i;
    sim_rng rng;
    sim_rng_seed(&rng, MIX_SEED);
    double want = factor * have;
    size_t cap = pods->count;
    int rc = 0;
    while (have < want) {
        if (pods->count == cap) {
            cap *= 2;
            gs_request *grown = realloc(pods->pods, cap * sizeof(*grown));
            if (!grown) {
                snprintf(err, errlen, "out of memory");
                rc = -1;
                break;
            }
            pods->pods = grown;
        }
        gs_request pick = pods->pods[cpu_idx[sim_rng_below(&rng, num_cpu)]];
        pods->pods[pods->count++] = pick;
        have += (double)pick.cpu_milli;
    }
    free(cpu_idx);
    return rc;
}
