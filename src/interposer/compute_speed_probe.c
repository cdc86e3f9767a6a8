/*
 * The speed probe's per-process state (limiter.h, GS_LIM_PROBE_NS): the
 * outer loop decides a probe, one launching thread claims it and runs the
 * probe window, and what it measured sets the power correction's exponent.
 * Process-local: each process of a container measures for itself.
 */
#include "compute_speed_probe.h"
#include "../core/limiter.h"
#include "../core/region.h"
#include "log.h"
#include "runtime.h"

struct probe_state {
    uint32_t due_over; /* a decided probe's power reading; 0: none due */
    uint32_t exp_milli;
    uint8_t learnt;
    uint64_t last_ns;
};
static struct probe_state probes[GS_REGION_MAX_DEVICES];

static struct probe_state *of(int dev)
{
    return dev >= 0 && dev < GS_REGION_MAX_DEVICES ? &probes[dev] : NULL;
}

unsigned gs_compute_power_exp(int dev)
{
    struct probe_state *p = of(dev);
    unsigned configured = gs_rt.cfg.power_exp_milli;
    if (!p || configured == 0 || !__atomic_load_n(&p->learnt, __ATOMIC_ACQUIRE))
        return configured;
    return __atomic_load_n(&p->exp_milli, __ATOMIC_RELAXED);
}

uint64_t gs_compute_probe_last(int dev)
{
    struct probe_state *p = of(dev);
    return p ? __atomic_load_n(&p->last_ns, __ATOMIC_RELAXED) : 0;
}

void gs_compute_probe_decided(int dev, uint32_t over, uint64_t now)
{
    struct probe_state *p = of(dev);
    if (!p || over == 0)
        return;
    __atomic_store_n(&p->last_ns, now, __ATOMIC_RELAXED);
    __atomic_store_n(&p->due_over, over, __ATOMIC_RELEASE);
}

uint32_t gs_compute_probe_claim(int dev)
{
    struct probe_state *p = of(dev);
    if (!p || __atomic_load_n(&p->due_over, __ATOMIC_RELAXED) == 0)
        return 0; /* the launch path's usual answer: one load */
    return __atomic_exchange_n(&p->due_over, 0, __ATOMIC_ACQ_REL);
}

void gs_compute_probe_measured(int dev, uint32_t over, uint64_t full_ns, uint64_t duty_ns)
{
    struct probe_state *p = of(dev);
    if (!p || full_ns == 0 || duty_ns == 0 || over < GS_LIM_PROBE_MIN_OVER)
        return;
    int learnt = __atomic_load_n(&p->learnt, __ATOMIC_ACQUIRE);
    unsigned old = learnt ? __atomic_load_n(&p->exp_milli, __ATOMIC_RELAXED) : gs_rt.cfg.power_exp_milli;
    unsigned x = gs_lim_exponent_measured(old, learnt, full_ns, duty_ns, over);
    __atomic_store_n(&p->exp_milli, x, __ATOMIC_RELAXED);
    __atomic_store_n(&p->learnt, 1, __ATOMIC_RELEASE);
    gs_log(GS_LOG_DEBUG,
           "speed probe on device %d: %llu ns a launch fully busy, %llu duty-cycled, power reading %u ppm of the "
           "headroom -> power exponent %u/1000 (was %u)",
           dev, (unsigned long long)full_ns, (unsigned long long)duty_ns, over, x, old);
}
