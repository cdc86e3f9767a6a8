/* The libFuzzer entry point, declared once for the targets and the replay main. */
#ifndef GPUSLICE_FUZZ_TARGET_H
#define GPUSLICE_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Invariant check that survives NDEBUG: a failed invariant is a crash for the fuzzer. */
#define FUZZ_CHECK(cond)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);                               \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

/* A refusal's reason: present, inside its buffer, one line. */
static inline void fuzz_check_refusal(const char *err, size_t errlen)
{
    size_t n = strlen(err);
    FUZZ_CHECK(n > 0 && n < errlen);
    FUZZ_CHECK(strchr(err, '\n') == NULL);
}

#endif
