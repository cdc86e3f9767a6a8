/* The host function host_wait_check.py queues: it waits for the gate the
 * program opens after its launches. In C, so that it holds no Python lock:
 * a Python callback needs the GIL, which the program's own launches and
 * synchronisation may hold, and hung natively on an H100. */
#include <time.h>

volatile int gs_host_gate;

void gs_wait_for_gate(void *arg)
{
    (void)arg;
    struct timespec ts = { 0, 500000 };
    while (!__atomic_load_n(&gs_host_gate, __ATOMIC_ACQUIRE))
        nanosleep(&ts, NULL);
}
