#define _GNU_SOURCE
#include "map_guard.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define GUARDS 64

struct guard {
    uintptr_t base; /* 0 = free */
    size_t len;
    int tripped;
};

static struct guard guards[GUARDS];
static struct sigaction previous;
static pthread_once_t installed = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *info, void *uctx)
{
    uintptr_t a = (uintptr_t)info->si_addr;
    for (int i = 0; i < GUARDS; i++) {
        uintptr_t base = __atomic_load_n(&guards[i].base, __ATOMIC_ACQUIRE);
        size_t len = __atomic_load_n(&guards[i].len, __ATOMIC_RELAXED);
        if (base && a >= base && a - base < len) {
            /* mmap is a plain system call here: safe in a handler in practice. */
            if (mmap((void *)base, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
                MAP_FAILED) {
                __atomic_store_n(&guards[i].tripped, 1, __ATOMIC_RELEASE);
                return; /* the faulting access runs again, on the zeroed pages */
            }
            break;
        }
    }
    /* Not ours: whatever handled SIGBUS before us, or the default action. */
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, info, uctx);
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
    } else {
        signal(SIGBUS, SIG_DFL); /* the access faults again and the default action applies */
    }
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &previous);
}

int gs_map_guard_add(void *base, size_t len)
{
    pthread_once(&installed, install);
    for (int i = 0; i < GUARDS; i++) {
        uintptr_t expect = 0;
        if (__atomic_load_n(&guards[i].base, __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&guards[i].base, &expect, (uintptr_t)base, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            /* A fault between the claim and this store is not absorbed; none
             * can come before the caller has used the fresh mapping. */
            __atomic_store_n(&guards[i].tripped, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&guards[i].len, len, __ATOMIC_RELEASE);
            return 0;
        }
    }
    return -1;
}

static struct guard *find(const void *base)
{
    for (int i = 0; i < GUARDS; i++)
        if (__atomic_load_n(&guards[i].base, __ATOMIC_ACQUIRE) == (uintptr_t)base)
            return &guards[i];
    return NULL;
}

void gs_map_guard_remove(const void *base)
{
    struct guard *g = find(base);
    if (g)
        __atomic_store_n(&g->base, 0, __ATOMIC_RELEASE);
}

static void set_tripped(const void *base, int tripped)
{
    struct guard *g = find(base);
    if (g)
        __atomic_store_n(&g->tripped, tripped, __ATOMIC_RELEASE);
}

void gs_map_guard_rearm(const void *base)
{
    set_tripped(base, 0);
}

void gs_map_guard_trip(const void *base)
{
    set_tripped(base, 1);
}

int gs_map_guard_tripped(const void *base)
{
    const struct guard *g = find(base);
    return g && __atomic_load_n(&g->tripped, __ATOMIC_ACQUIRE);
}
