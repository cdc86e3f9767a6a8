/*
 * GPU time that event records add between a step's kernels, on the driver
 * alone (looked up by glibc's own dlsym, driver_bench.h, so not the
 * interposer's even where it is preloaded). The compute limiter records an
 * event where a busy interval starts and a progress marker after the first
 * launches of each (docs/compute.md, "Busy intervals and CPU gaps"): a
 * host-bound CUDA-graph inference step under a cap got two to four such
 * records and did 0.87-0.94 of its work alone per busy second
 * (bench/results/compute-2026-12-03d.md). This measures what a record
 * costs the GPU, with no limiter in the way.
 *
 * Each step, on a stream of its own, records a start event, launches
 * --kernels kernels that each spin --spin-cycles SM clocks, with R event
 * records after each, records an end event and waits for it (as a step
 * that reads its result back does): the GPU idles between steps. The
 * values of R in --records take turns step by step, so that the host's and
 * the clock's drift fall on all of them alike. Prints one JSON line: per R,
 * the median and mean GPU span of a step (start to end event) and the host
 * time of a step, in microseconds, and the GPU cost of one record: the
 * median span's growth from the first R to the last, over the records added.
 * On a GPU host without the build tree: cc -O2 -Isrc bench/compute/event_cost.c -ldl
 *   event_cost [--steps 3000] [--warm 300] [--kernels 3] [--spin-cycles 20000] [--records 0,1,2,4]
 */
#define _GNU_SOURCE
#include "driver_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*event_sync_fn)(CUevent);

#define MAX_R 8         /* values of --records */
#define MAX_RECORDS 64  /* records after one kernel */
#define MAX_KERNELS 256 /* kernels a step */

/* A kernel that spins until its SM's clock has moved on by `cycles`. */
static const char spin_ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n"
                               ".visible .entry spin(.param .u64 cycles)\n{\n"
                               " .reg .u64 %rd<5>;\n .reg .pred %p;\n"
                               " ld.param.u64 %rd1, [cycles];\n mov.u64 %rd2, %clock64;\n"
                               "LOOP:\n mov.u64 %rd3, %clock64;\n sub.u64 %rd4, %rd3, %rd2;\n"
                               " setp.lt.u64 %p, %rd4, %rd1;\n @%p bra LOOP;\n ret;\n}\n";

struct options {
    long steps, warm, kernels;
    unsigned long long cycles;
    long records[MAX_R];
    int nrec;
};

/* "0,1,2,4" into o->records; -1 with the reason on stderr. */
static int parse_records(const char *v, struct options *o)
{
    const char *p = v;
    o->nrec = 0;
    for (;;) {
        char *end = NULL;
        long r = strtol(p, &end, 10);
        if (end == p || r < 0 || r > MAX_RECORDS || o->nrec == MAX_R) {
            fprintf(stderr, "event_cost: --records %s: up to %d numbers 0..%d, comma-separated\n", v, MAX_R,
                    MAX_RECORDS);
            return -1;
        }
        o->records[o->nrec++] = r;
        if (*end == '\0')
            return 0;
        if (*end != ',') {
            fprintf(stderr, "event_cost: --records %s: up to %d numbers 0..%d, comma-separated\n", v, MAX_R,
                    MAX_RECORDS);
            return -1;
        }
        p = end + 1;
    }
}

static int parse(int argc, char **argv, struct options *o)
{
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) {
            fprintf(stderr, "event_cost: %s needs a value\n", argv[i]);
            return -1;
        }
        const char *flag = argv[i], *v = argv[++i];
        char *end = NULL;
        if (!strcmp(flag, "--records")) {
            if (parse_records(v, o) != 0)
                return -1;
            continue;
        }
        if (!strcmp(flag, "--steps"))
            o->steps = strtol(v, &end, 10);
        else if (!strcmp(flag, "--warm"))
            o->warm = strtol(v, &end, 10);
        else if (!strcmp(flag, "--kernels"))
            o->kernels = strtol(v, &end, 10);
        else if (!strcmp(flag, "--spin-cycles"))
            o->cycles = strtoull(v, &end, 10);
        else {
            fprintf(stderr, "event_cost: unknown flag %s (--steps, --warm, --kernels, --spin-cycles, --records)\n",
                    flag);
            return -1;
        }
        if (!end || *end || end == v) {
            fprintf(stderr, "event_cost: %s %s: not a number\n", flag, v);
            return -1;
        }
        if (*v == '-') { /* strtoull takes "-1" as a huge count */
            fprintf(stderr, "event_cost: %s %s: must not be negative\n", flag, v);
            return -1;
        }
    }
    if (o->steps < 1 || o->warm < 0 || o->kernels < 1 || o->kernels > MAX_KERNELS) {
        fprintf(stderr, "event_cost: --steps must be >= 1, --warm >= 0, --kernels 1..%d\n", MAX_KERNELS);
        return -1;
    }
    return 0;
}

static double median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    struct options o = {
        .steps = 3000, .warm = 300, .kernels = 3, .cycles = 20000, .records = { 0, 1, 2, 4 }, .nrec = 4
    };
    if (parse(argc, argv, &o) != 0)
        return 2;
    if (bench_bare_open("event_cost") != 0)
        return 1;
    bench_launch_fn launch = (bench_launch_fn)bench_bare_sym("cuLaunchKernel");
    bench_stream_create_fn stream_create = (bench_stream_create_fn)bench_bare_sym("cuStreamCreate");
    bench_event_create_fn event_create = (bench_event_create_fn)bench_bare_sym("cuEventCreate");
    bench_event_record_fn record = (bench_event_record_fn)bench_bare_sym("cuEventRecord");
    event_sync_fn event_sync = (event_sync_fn)bench_bare_sym("cuEventSynchronize");
    bench_elapsed_fn elapsed = bench_bare_elapsed();
    CUfunction f;
    if (!launch || !stream_create || !event_create || !record || !event_sync || !elapsed ||
        bench_kernel("event_cost", bench_bare_sym, spin_ptx, "spin", &f) != 0)
        return 1;
    CUstream s;
    CUevent start, end, marks[MAX_RECORDS];
    CUresult rc = stream_create(&s, 1); /* CU_STREAM_NON_BLOCKING, as PyTorch's streams */
    if (!rc)
        rc = event_create(&start, 0);
    if (!rc)
        rc = event_create(&end, 0);
    for (int i = 0; i < MAX_RECORDS && !rc; i++)
        rc = event_create(&marks[i], 0); /* timed, as the limiter's markers */
    if (rc) {
        fprintf(stderr, "event_cost: setting up failed: CUresult %d\n", rc);
        return 1;
    }
    double *gpu = calloc((size_t)o.steps * (size_t)o.nrec, sizeof *gpu);
    double *host = calloc((size_t)o.steps * (size_t)o.nrec, sizeof *host);
    if (!gpu || !host)
        return 1;
    void *params[] = { &o.cycles };
    for (long i = -o.warm; i < o.steps; i++) {
        for (int k = 0; k < o.nrec; k++) {
            long r = o.records[k];
            double t0 = bench_now_us();
            rc = record(start, s);
            for (long j = 0; j < o.kernels && !rc; j++) {
                rc = launch(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
                for (long m = 0; m < r && !rc; m++)
                    rc = record(marks[m], s);
            }
            if (!rc)
                rc = record(end, s);
            if (!rc)
                rc = event_sync(end);
            float ms = 0;
            if (!rc)
                rc = elapsed(&ms, start, end);
            if (rc) {
                fprintf(stderr, "event_cost: step %ld, %ld records: CUresult %d\n", i, r, rc);
                return 1;
            }
            if (i >= 0) {
                gpu[(size_t)k * (size_t)o.steps + (size_t)i] = (double)ms * 1e3;
                host[(size_t)k * (size_t)o.steps + (size_t)i] = bench_now_us() - t0;
            }
        }
    }
    printf("{\"steps\": %ld, \"kernels\": %ld, \"spin_cycles\": %llu, \"rows\": [", o.steps, o.kernels, o.cycles);
    double first = 0, last = 0;
    for (int k = 0; k < o.nrec; k++) {
        double *g = gpu + (size_t)k * (size_t)o.steps, *h = host + (size_t)k * (size_t)o.steps, gs = 0, hs = 0;
        for (long i = 0; i < o.steps; i++) {
            gs += g[i];
            hs += h[i];
        }
        double p50 = median(g, o.steps);
        if (k == 0)
            first = p50;
        last = p50;
        printf("%s{\"records\": %ld, \"gpu_us_p50\": %.3f, \"gpu_us_mean\": %.3f, \"host_us_mean\": %.3f}",
               k ? ", " : "", o.records[k], p50, gs / (double)o.steps, hs / (double)o.steps);
    }
    long added = (o.records[o.nrec - 1] - o.records[0]) * o.kernels;
    printf("], \"gpu_us_per_record\": ");
    if (added > 0)
        printf("%.4f}\n", (last - first) / (double)added);
    else
        printf("null}\n");
    free(gpu);
    free(host);
    return 0;
}
