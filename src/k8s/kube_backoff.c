/* See kube_client.h (struct kube_backoff). */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "kube_client.h"

void kube_backoff_init(struct kube_backoff *b, long base_ms, long max_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    b->base_ms = base_ms;
    b->max_ms = max_ms;
    b->cur_ms = base_ms;
    /* Differs per process and per backoff, so replicas restarted together
     * do not retry in step. */
    b->seed = (unsigned)ts.tv_nsec ^ ((unsigned)getpid() << 16) ^ (unsigned)(uintptr_t)b;
}

void kube_backoff_reset(struct kube_backoff *b)
{
    b->cur_ms = b->base_ms;
}

long kube_backoff_next(struct kube_backoff *b)
{
    long d = b->cur_ms;
    long wait = d / 2 + (long)(rand_r(&b->seed) % (unsigned)(d / 2 + 1));
    b->cur_ms = d > b->max_ms / 2 ? b->max_ms : d * 2;
    return wait;
}

void kube_backoff_wait(struct kube_backoff *b, volatile int *stop)
{
    long wait = kube_backoff_next(b);
    for (long t = 0; t < wait && !(stop && *stop); t += 50) {
        long step = wait - t < 50 ? wait - t : 50;
        struct timespec ts = { 0, step * 1000000L };
        nanosleep(&ts, NULL);
    }
}

long kube_monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
