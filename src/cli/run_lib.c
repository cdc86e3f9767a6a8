/* The interposer `gpuslice run` preloads must be one: a path that the
 * dynamic loader cannot preload (a directory, /dev/zero, another library)
 * is skipped by ld.so with one line on stderr, and the command would run
 * with no limit at all. */
#include "run_checks.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exported by libgpuslice.so (src/interposer/runtime.c). */
#define GS_INTERPOSER_MARKER "gpuslice_interposer_marker"

int gs_run_verify_lib(const char *lib)
{
    if (strpbrk(lib, ": \t")) {
        fprintf(stderr, "gpuslice run: interposer '%s': LD_PRELOAD cannot hold a path with ':' or a blank\n", lib);
        return -1;
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        fprintf(stderr, "gpuslice run: interposer '%s' cannot be loaded (%s); the command would run unlimited\n", lib,
                why ? why : "unknown error");
        return -1;
    }
    int ok = dlsym(h, GS_INTERPOSER_MARKER) != NULL;
    dlclose(h);
    if (!ok) {
        fprintf(stderr,
                "gpuslice run: '%s' is not the gpuslice interposer (it lacks %s); the command would run "
                "unlimited\n",
                lib, GS_INTERPOSER_MARKER);
        return -1;
    }
    return 0;
}

/* 1 when one entry of list (split on ':' and blanks, as ld.so does) is lib. */
static int has_entry(const char *list, const char *lib)
{
    size_t n = strlen(lib);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ": \t");
        if (len == n && strncmp(p, lib, n) == 0)
            return 1;
        p += len;
        p += *p != '\0';
    }
    return 0;
}

int gs_run_prepend_preload(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    if (!old || !*old)
        return setenv("LD_PRELOAD", lib, 1);
    if (has_entry(old, lib))
        return 0;
    size_t n = strlen(lib) + strlen(old) + 2;
    char *v = malloc(n);
    if (!v)
        return -1;
    snprintf(v, n, "%s:%s", lib, old);
    int rc = setenv("LD_PRELOAD", v, 1);
    free(v);
    return rc;
}
