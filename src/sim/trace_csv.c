/* openb CSV parsing: strict integers, named columns, errors that say where. */
#define _GNU_SOURCE
#include "trace_csv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 32

typedef struct fields {
    const char *at[MAX_FIELDS];
    size_t len[MAX_FIELDS];
    int count;
} fields;

static void fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Splits on commas; the trace never quotes, so a quote is an error. */
static int split(const char *line, fields *f, char *err, size_t errlen)
{
    f->count = 0;
    const char *start = line;
    for (const char *p = line;; p++) {
        if (*p == '"') {
            fail(err, errlen, "quoted fields are not supported");
            return -1;
        }
        if (*p != ',' && *p != '\0')
            continue;
        if (f->count == MAX_FIELDS) {
            fail(err, errlen, "more than %d fields", MAX_FIELDS);
            return -1;
        }
        f->at[f->count] = start;
        f->len[f->count] = (size_t)(p - start);
        f->count++;
        if (*p == '\0')
            return 0;
        start = p + 1;
    }
}

static bool field_is(const fields *f, int i, const char *name)
{
    return f->len[i] == strlen(name) && memcmp(f->at[i], name, f->len[i]) == 0;
}

static int column(const fields *f, const char *name)
{
    for (int i = 0; i < f->count; i++)
        if (field_is(f, i, name))
            return i;
    return -1;
}

static int need(const fields *f, const char *name, int *pos, int *count, char *err, size_t errlen)
{
    *pos = column(f, name);
    if (*pos < 0) {
        fail(err, errlen, "header lacks column '%s'", name);
        return -1;
    }
    if (*pos + 1 > *count)
        *count = *pos + 1;
    return 0;
}

int trace_pod_header(const char *line, trace_pod_cols *cols, char *err, size_t errlen)
{
    fields f;
    if (split(line, &f, err, errlen) != 0)
        return -1;
    cols->count = 0;
    if (need(&f, "cpu_milli", &cols->cpu, &cols->count, err, errlen) ||
        need(&f, "memory_mib", &cols->mem, &cols->count, err, errlen) ||
        need(&f, "num_gpu", &cols->num_gpu, &cols->count, err, errlen) ||
        need(&f, "gpu_milli", &cols->gpu_milli, &cols->count, err, errlen))
        return -1;
    cols->gpu_spec = column(&f, "gpu_spec"); /* optional: absent means any model */
    if (cols->gpu_spec + 1 > cols->count)
        cols->count = cols->gpu_spec + 1;
    return 0;
}

int trace_node_header(const char *line, trace_node_cols *cols, char *err, size_t errlen)
{
    fields f;
    if (split(line, &f, err, errlen) != 0)
        return -1;
    cols->count = 0;
    if (need(&f, "sn", &cols->name, &cols->count, err, errlen) ||
        need(&f, "cpu_milli", &cols->cpu, &cols->count, err, errlen) ||
        need(&f, "memory_mib", &cols->mem, &cols->count, err, errlen) ||
        need(&f, "gpu", &cols->gpu, &cols->count, err, errlen) ||
        need(&f, "model", &cols->model, &cols->count, err, errlen))
        return -1;
    return 0;
}

/* Strict non-negative decimal integer in [0, max]. */
static int number(const fields *f, int i, const char *name, int64_t max, int64_t *out, char *err, size_t errlen)
{
    size_t len = f->len[i];
    if (len == 0) {
        fail(err, errlen, "field '%s' is empty", name);
        return -1;
    }
    int64_t v = 0;
    for (size_t k = 0; k < len; k++) {
        char ch = f->at[i][k];
        if (ch < '0' || ch > '9') {
            fail(err, errlen, "field '%s' is not a non-negative integer: '%.*s'", name, (int)(len < 40 ? len : 40),
                 f->at[i]);
            return -1;
        }
        if (v > (max - (ch - '0')) / 10) {
            fail(err, errlen, "field '%s' is out of range (max %lld)", name, (long long)max);
            return -1;
        }
        v = v * 10 + (ch - '0');
    }
    *out = v;
    return 0;
}

static int row_fields(const char *line, int want, fields *f, char *err, size_t errlen)
{
    if (split(line, f, err, errlen) != 0)
        return -1;
    if (f->count < want) {
        fail(err, errlen, "row has %d fields, header needs %d", f->count, want);
        return -1;
    }
    return 0;
}

/* "A|B|C" -> model mask; names no node has are ignored (the pod then only
 * fits the listed models that exist, possibly none). */
static int model_mask(const fields *f, int i, const gs_cluster *models, gs_request *out, char *err, size_t errlen)
{
    out->any_model = true;
    out->model_mask = 0;
    if (i < 0 || f->len[i] == 0)
        return 0;
    out->any_model = false;
    const char *p = f->at[i], *end = p + f->len[i];
    while (p <= end) {
        const char *bar = memchr(p, '|', (size_t)(end - p));
        const char *stop = bar ? bar : end;
        size_t n = (size_t)(stop - p);
        if (n == 0 || n >= GS_MODEL_NAME_MAX) {
            fail(err, errlen, "field 'gpu_spec' has an empty or too long model name");
            return -1;
        }
        char name[GS_MODEL_NAME_MAX];
        memcpy(name, p, n);
        name[n] = '\0';
        int m = gs_cluster_find_model(models, name);
        if (m >= 0)
            out->model_mask |= 1u << m;
        p = stop + 1;
    }
    return 0;
}

int trace_parse_pod_row(const char *line, const trace_pod_cols *cols, const gs_cluster *models, gs_request *out,
                        char *err, size_t errlen)
{
    fields f;
    if (row_fields(line, cols->count, &f, err, errlen) != 0)
        return -1;
    int64_t cpu, mem, num, milli;
    if (number(&f, cols->cpu, "cpu_milli", INT64_C(1) << 40, &cpu, err, errlen) ||
        number(&f, cols->mem, "memory_mib", INT64_C(1) << 40, &mem, err, errlen) ||
        number(&f, cols->num_gpu, "num_gpu", GS_MAX_GPUS_PER_NODE, &num, err, errlen) ||
        number(&f, cols->gpu_milli, "gpu_milli", GS_MILLI_PER_GPU, &milli, err, errlen))
        return -1;
    memset(out, 0, sizeof(*out));
    out->cpu_milli = cpu;
    out->mem_mib = mem;
    out->num_gpus = (int32_t)num;
    if (num == 0 && milli != 0) {
        fail(err, errlen, "field 'gpu_milli' is %lld but num_gpu is 0", (long long)milli);
        return -1;
    }
    if (num == 1 && milli == 0) {
        fail(err, errlen, "field 'gpu_milli' is 0 for a GPU pod");
        return -1;
    }
    /* Multi-GPU pods take whole GPUs; a single GPU may be shared. */
    out->gpu_milli = num == 0 ? 0 : num > 1 ? GS_MILLI_PER_GPU : (int32_t)milli;
    return model_mask(&f, cols->gpu_spec, models, out, err, errlen);
}

int trace_parse_node_row(const char *line, const trace_node_cols *cols, gs_cluster *cluster, char *err, size_t errlen)
{
    fields f;
    if (row_fields(line, cols->count, &f, err, errlen) != 0)
        return -1;
    int64_t cpu, mem, gpus;
    if (number(&f, cols->cpu, "cpu_milli", INT64_C(1) << 40, &cpu, err, errlen) ||
        number(&f, cols->mem, "memory_mib", INT64_C(1) << 40, &mem, err, errlen) ||
        number(&f, cols->gpu, "gpu", GS_MAX_GPUS_PER_NODE, &gpus, err, errlen))
        return -1;
    int model = -1;
    if (gpus > 0) {
        size_t n = f.len[cols->model];
        if (n == 0 || n >= GS_MODEL_NAME_MAX) {
            fail(err, errlen, "field 'model' is empty or too long for a node with GPUs");
            return -1;
        }
        char name[GS_MODEL_NAME_MAX];
        memcpy(name, f.at[cols->model], n);
        name[n] = '\0';
        model = gs_cluster_model(cluster, name);
        if (model < 0) {
            fail(err, errlen, "field 'model': more than %d GPU models", GS_MAX_MODELS);
            return -1;
        }
    }
    if (gs_cluster_add_node(cluster, NULL, cpu, mem, model, (int)gpus, GS_MILLI_PER_GPU) < 0) {
        fail(err, errlen, "cannot add node (out of memory)");
        return -1;
    }
    return 0;
}

/* Reads a file line by line, handing each data row to a callback. */
typedef int (*row_fn)(const char *line, void *ctx, char *err, size_t errlen);

static int each_line(const char *path, row_fn header, row_fn row, void *ctx, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    int rc = 0;
    char msg[256];
    while ((len = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if ((size_t)len != strlen(line)) {
            fail(err, errlen, "%s:%ld: NUL byte in line", path, lineno);
            rc = -1;
            break;
        }
        if (len == 0 && lineno > 1)
            continue; /* blank lines (e.g. a trailing one) carry nothing */
        row_fn fn = lineno == 1 ? header : row;
        if (fn(line, ctx, msg, sizeof(msg)) != 0) {
            fail(err, errlen, "%s:%ld: %s", path, lineno, msg);
            rc = -1;
            break;
        }
    }
    if (rc == 0 && lineno == 0) {
        fail(err, errlen, "%s: empty file (no header)", path);
        rc = -1;
    }
    free(line);
    fclose(fp);
    return rc;
}

typedef struct node_ctx {
    trace_node_cols cols;
    gs_cluster *cluster;
} node_ctx;

static int node_header_cb(const char *line, void *ctx, char *err, size_t errlen)
{
    return trace_node_header(line, &((node_ctx *)ctx)->cols, err, errlen);
}

static int node_row_cb(const char *line, void *ctx, char *err, size_t errlen)
{
    node_ctx *c = ctx;
    return trace_parse_node_row(line, &c->cols, c->cluster, err, errlen);
}

int trace_load_nodes(const char *path, gs_cluster *cluster, char *err, size_t errlen)
{
    node_ctx ctx = { .cluster = cluster };
    if (each_line(path, node_header_cb, node_row_cb, &ctx, err, errlen) != 0)
        return -1;
    if (cluster->num_nodes == 0) {
        fail(err, errlen, "%s: no nodes", path);
        return -1;
    }
    return 0;
}

typedef struct pod_ctx {
    trace_pod_cols cols;
    const gs_cluster *models;
    trace_pods *out;
    size_t cap;
} pod_ctx;

static int pod_header_cb(const char *line, void *ctx, char *err, size_t errlen)
{
    return trace_pod_header(line, &((pod_ctx *)ctx)->cols, err, errlen);
}

static int pod_row_cb(const char *line, void *ctx, char *err, size_t errlen)
{
    pod_ctx *c = ctx;
    if (c->out->count == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1024;
        gs_request *grown = realloc(c->out->pods, cap * sizeof(*grown));
        if (!grown) {
            fail(err, errlen, "out of memory");
            return -1;
        }
        c->out->pods = grown;
        c->cap = cap;
    }
    if (trace_parse_pod_row(line, &c->cols, c->models, &c->out->pods[c->out->count], err, errlen))
        return -1;
    c->out->count++;
    return 0;
}

int trace_load_pods(const char *path, const gs_cluster *models, trace_pods *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    pod_ctx ctx = { .models = models, .out = out };
    if (each_line(path, pod_header_cb, pod_row_cb, &ctx, err, errlen) != 0) {
        trace_pods_free(out);
        return -1;
    }
    if (out->count == 0) {
        fail(err, errlen, "%s: no pods", path);
        return -1;
    }
    return 0;
}

void trace_pods_free(trace_pods *p)
{
    free(p->pods);
    p->pods = NULL;
    p->count = 0;
}
