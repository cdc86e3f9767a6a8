/* Helpers shared by the sim's own tests (header-only: each test is one file). */
#ifndef GPUSLICE_SIMTEST_H
#define GPUSLICE_SIMTEST_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Device-wide bytes in use, as cuMemGetInfo reports them (needs a context). */
static inline uint64_t simtest_used(void)
{
    size_t free_b = 0, total = 0;
    assert_int_equal(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    return total - free_b;
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
