/* The check harness of the tests in tests/k8s that run as plain programs:
 * CHECK counts a failed condition and says where; check_result() reports
 * and gives the exit status. */
#ifndef GPUSLICE_TESTS_K8S_CHECK_H
#define GPUSLICE_TESTS_K8S_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                                   \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

static inline int check_result(const char *what)
{
    if (failures)
        fprintf(stderr, "%s: %d check(s) failed\n", what, failures);
    else
        printf("%s: all checks passed\n", what);
    return failures ? 1 : 0;
}

#endif
