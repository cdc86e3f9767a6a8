/* Helpers shared by the sim's own tests (header-only: each test is one file). */
#ifndef GPUSLICE_SIMTEST_H
#define GPUSLICE_SIMTEST_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sim_cuda_api.h"
#include "sim_nvml_api.h"

#define MIB (1024ULL * 1024ULL)
#define GIB (1024ULL * MIB)

/* Points GPUSLICE_SIM_STATE at a new, empty file private to this test run. */
static inline void simtest_fresh_state(const char *tag, char *path, size_t len)
{
    snprintf(path, len, "/tmp/gpuslice-simtest-%s-%d", tag, (int)getpid());
    unlink(path);
    setenv("GPUSLICE_SIM_STATE", path, 1);
}

/* CLOCK_MONOTONIC in nanoseconds (the simulated driver's own clock). */
static inline uint64_t simtest_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Device-wide bytes in use, as cuMemGetInfo reports them (needs a context). */
static inline uint64_t simtest_used(void)
{
    size_t free_b = 0, total = 0;
    assert_int_equal(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    return total - free_b;
}

/* Closes a forked child's two pipe ends and asserts it exited with 0 (a
 * CHILD_CHECK that failed exits with its line number). */
static inline void simtest_reap(pid_t pid, int to_child, int from_child)
{
    int status = 0;
    close(to_child);
    close(from_child);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* For forked children, where cmocka's runner must not be re-entered:
 * a failed check exits with the failing line's number. */
#define CHILD_CHECK(cond)                                                                                              \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: child check failed: %s\n", __FILE__, __LINE__, #cond);                             \
            _exit(1);                                                                                                  \
        }                                                                                                              \
    } while (0)

#endif
