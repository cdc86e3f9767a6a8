/* A library preloaded after the interposer, so that its destructor runs
 * after the interposer's (glibc finalizes the later preload last): it frees
 * the device memory the client handed it (gs_late_free_keep) once the file
 * $GS_LATE_FREE_GO exists, after saying so in $GS_LATE_FREE_GO.waiting.
 * A tenant's process can free so at its exit, after its region slot has
 * gone to another process. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuda_abi.h"

void gs_late_free_keep(CUdeviceptr p);

static CUdeviceptr kept[64];
static int nkept;

__attribute__((visibility("default"))) void gs_late_free_keep(CUdeviceptr p)
{
    if (nkept < (int)(sizeof kept / sizeof kept[0]))
        kept[nkept++] = p;
}

__attribute__((destructor)) static void late_free(void)
{
    const char *go = getenv("GS_LATE_FREE_GO");
    if (!go || !nkept)
        return;
    char waiting[4096];
    snprintf(waiting, sizeof waiting, "%s.waiting", go);
    int fd = open(waiting, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0)
        close(fd);
    for (int i = 0; i < 3000 && access(go, F_OK) != 0; i++)
        usleep(10 * 1000);
    CUresult (*mem_free)(CUdeviceptr) = (CUresult(*)(CUdeviceptr))dlsym(RTLD_DEFAULT, "cuMemFree_v2");
    for (int i = 0; mem_free && i < nkept; i++)
        fprintf(stderr, "late free rc=%d\n", (int)mem_free(kept[i]));
}
