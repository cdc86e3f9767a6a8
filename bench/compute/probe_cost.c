/*
 * Host time of the driver calls the compute limiter makes around a launch,
 * on the driver alone (looked up by glibc's own dlsym, driver_bench.h, so
 * not the interposer's even where it is preloaded): what a gap probe and a progress
 * marker cost a host-bound load (docs/compute.md, "Host cost"). Each step
 * launches an empty kernel on a stream of its own (as PyTorch does), records
 * a marker event after it, spins on the CPU for --gap-us, then makes the
 * probe's calls in its order: a stream query (the work has drained), the
 * elapsed time from the interval's start event to the marker, and the start
 * event recorded again. Prints one JSON line: per call, the mean and median
 * microseconds over --steps steps after --warm steps.
 * On a GPU host without the build tree: cc -O2 -Isrc bench/compute/probe_cost.c -ldl
 *   probe_cost [--steps 20000] [--warm 2000] [--gap-us 150]
 */
#define _GNU_SOURCE
#include "driver_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*stream_query_fn)(CUstream);
typedef CUresult (*event_query_fn)(CUevent);

/* The calls timed, one row each: the table the report is printed from. */
enum { OP_LAUNCH, OP_MARK, OP_QUERY, OP_ELAPSED, OP_RECORD, OP_EVENT_QUERY, OP_CLOCK, OP_COUNT };
static const char *const op_name[OP_COUNT] = {
    [OP_LAUNCH] = "launch",       [OP_MARK] = "marker_record",  [OP_QUERY] = "stream_query",
    [OP_ELAPSED] = "elapsed",     [OP_RECORD] = "start_record", [OP_EVENT_QUERY] = "event_query",
    [OP_CLOCK] = "clock_gettime",
};

static int parse(int argc, char **argv, long *steps, long *warm, double *gap_us)
{
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) {
            fprintf(stderr, "probe_cost: %s needs a value\n", argv[i]);
            return -1;
        }
        const char *flag = argv[i], *v = argv[++i];
        char *end = NULL;
        if (!strcmp(flag, "--steps"))
            *steps = strtol(v, &end, 10);
        else if (!strcmp(flag, "--warm"))
            *warm = strtol(v, &end, 10);
        else if (!strcmp(flag, "--gap-us"))
            *gap_us = strtod(v, &end);
        else {
            fprintf(stderr, "probe_cost: unknown flag %s (--steps, --warm, --gap-us)\n", flag);
            return -1;
        }
        if (!end || *end || end == v) {
            fprintf(stderr, "probe_cost: %s %s: not a number\n", flag, v);
            return -1;
        }
    }
    if (*steps < 1 || *warm < 0 || *gap_us < 0) {
        fprintf(stderr, "probe_cost: --steps must be >= 1, --warm >= 0, --gap-us >= 0\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    long steps = 20000, warm = 2000;
    double gap_us = 150;
    if (parse(argc, argv, &steps, &warm, &gap_us) != 0)
        return 2;
    if (bench_bare_open("probe_cost") != 0)
        return 1;
    bench_launch_fn launch = (bench_launch_fn)bench_bare_sym("cuLaunchKernel");
    bench_stream_create_fn stream_create = (bench_stream_create_fn)bench_bare_sym("cuStreamCreate");
    stream_query_fn stream_query = (stream_query_fn)bench_bare_sym("cuStreamQuery");
    bench_event_create_fn event_create = (bench_event_create_fn)bench_bare_sym("cuEventCreate");
    bench_event_record_fn record = (bench_event_record_fn)bench_bare_sym("cuEventRecord");
    event_query_fn event_query = (event_query_fn)bench_bare_sym("cuEventQuery");
    bench_elapsed_fn elapsed = bench_bare_elapsed();
    CUfunction f;
    CUstream s;
    CUevent start, mark;
    if (!launch || !stream_create || !stream_query || !event_create || !record || !event_query || !elapsed ||
        bench_noop_kernel("probe_cost", bench_bare_sym, &f) != 0)
        return 1;
    CUresult rc = stream_create(&s, 1); /* CU_STREAM_NON_BLOCKING */
    if (!rc)
        rc = event_create(&start, 0);
    if (!rc)
        rc = event_create(&mark, 0);
    if (!rc)
        rc = record(start, s);
    if (rc) {
        fprintf(stderr, "probe_cost: setting up failed: CUresult %d\n", rc);
        return 1;
    }
    double *us = calloc((size_t)steps * OP_COUNT, sizeof *us);
    if (!us)
        return 1;
    for (long i = -warm; i < steps; i++) {
        double t[OP_COUNT + 1];
        float ms = 0;
        t[0] = bench_now_us();
        rc |= launch(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
        t[1] = bench_now_us();
        rc |= record(mark, s);
        t[2] = bench_now_us();
        while (bench_now_us() < t[2] + gap_us) {
        }
        double q = bench_now_us();
        CUresult drained = stream_query(s);
        t[3] = bench_now_us();
        rc |= elapsed(&ms, start, mark);
        t[4] = bench_now_us();
        rc |= record(start, s);
        t[5] = bench_now_us();
        (void)event_query(mark);
        t[6] = bench_now_us();
        t[7] = bench_now_us();
        if (rc || drained != CUDA_SUCCESS) {
            fprintf(stderr,
                    "probe_cost: step %ld: CUresult %d, stream query %d (raise --gap-us if the work "
                    "had not drained)\n",
                    i, rc, drained);
            return 1;
        }
        if (i < 0)
            continue;
        double *row = us + (size_t)i * OP_COUNT;
        row[OP_LAUNCH] = t[1] - t[0];
        row[OP_MARK] = t[2] - t[1];
        row[OP_QUERY] = t[3] - q;
        row[OP_ELAPSED] = t[4] - t[3];
        row[OP_RECORD] = t[5] - t[4];
        row[OP_EVENT_QUERY] = t[6] - t[5];
        row[OP_CLOCK] = t[7] - t[6];
    }
    double *col = malloc((size_t)steps * sizeof *col);
    if (!col)
        return 1;
    printf("{\"steps\": %ld, \"gap_us\": %.1f", steps, gap_us);
    for (int op = 0; op < OP_COUNT; op++) {
        double sum = 0;
        for (long i = 0; i < steps; i++)
            sum += col[i] = us[(size_t)i * OP_COUNT + (size_t)op];
        qsort(col, (size_t)steps, sizeof *col, bench_cmp_double);
        printf(", \"%s\": {\"mean_us\": %.2f, \"p50_us\": %.2f, \"p99_us\": %.2f}", op_name[op], sum / (double)steps,
               col[steps / 2], col[(size_t)((double)steps * 0.99)]);
    }
    printf("}\n");
    free(col);
    free(us);
    return 0;
}
