/*
 * Finding an export from the importing side needs an identity that both
 * sides can compute from the shareable handle and that no other live export
 * can share (region_export.h holds the records):
 *
 * - a fabric handle (CU_MEM_HANDLE_TYPE_FABRIC) is 64 bytes that name the
 *   allocation: the bytes are the key;
 * - a POSIX fd is a key only when it is a regular file (the simulated
 *   driver's memfd): its (st_dev, st_ino) stays unique while the file lives,
 *   so the exporter keeps a duplicate of it open for as long as it holds the
 *   allocation, and the record's keys are void once it lets go. The real
 *   driver's fd is an open of its control device, whose inode every export
 *   shares: no key, and its importers are charged as foreign ones.
 */
#define _GNU_SOURCE
#include "vmm_share.h"
#include "fork_hooks.h"
#include "../core/alloc_table.h"
#include "../core/region_export.h"
#include "log.h"
#include "runtime.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What this process holds of each record: its handles, and (as exporter)
 * the duplicates that keep file keys unique. fd + 1, so 0 means none. */
static struct {
    uint32_t refs;
    int fd1[GS_EXPORT_KEYS];
} local[GS_REGION_MAX_EXPORTS];
static pthread_mutex_t local_lock = PTHREAD_MUTEX_INITIALIZER;

/* keep: for an export of a file, receives a duplicate to hold (-1: none). */
static int make_key(CUmemAllocationHandleType type, const void *h, int exporting, struct gs_export_key *key, int *keep)
{
    memset(key, 0, sizeof *key);
    *keep = -1;
    if (type == CU_MEM_HANDLE_TYPE_FABRIC && h) {
        key->type = GS_EXPORT_KEY_FABRIC;
        memcpy(key->bytes, h, sizeof key->bytes);
        return 0;
    }
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || (exporting && !h))
        return -1;
    int fd = exporting ? *(const int *)h : (int)(intptr_t)h;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    uint64_t id[2] = { (uint64_t)st.st_dev, (uint64_t)st.st_ino };
    key->type = GS_EXPORT_KEY_FILE;
    memcpy(key->bytes, id, sizeof id);
    if (exporting && (*keep = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
        return -1;
    return 0;
}

static void local_ref(int idx)
{
    pthread_mutex_lock(&local_lock);
    local[idx].refs++;
    pthread_mutex_unlock(&local_lock);
}

/* Holds keep (-1: nothing to hold) until this process lets go of idx. */
static void local_keep(int idx, int keep)
{
    if (keep < 0)
        return;
    pthread_mutex_lock(&local_lock);
    int k = 0;
    while (k < GS_EXPORT_KEYS && local[idx].fd1[k])
        k++;
    if (k < GS_EXPORT_KEYS)
        local[idx].fd1[k] = keep + 1;
    else
        close(keep); /* the region holds no more keys than this either */
    pthread_mutex_unlock(&local_lock);
}

static void local_drop(int idx)
{
    pthread_mutex_lock(&local_lock);
    if (local[idx].refs && --local[idx].refs == 0) {
        for (int k = 0; k < GS_EXPORT_KEYS; k++)
            if (local[idx].fd1[k])
                close(local[idx].fd1[k] - 1);
        memset(&local[idx], 0, sizeof local[idx]);
    }
    pthread_mutex_unlock(&local_lock);
}

void gs_vmm_share_exported(CUmemGenericAllocationHandle handle, const void *shareable, CUmemAllocationHandleType type)
{
    struct gs_region *r = gs_rt_region();
    int slot = gs_rt_slot();
    struct gs_export_key key;
    int keep = -1;
    if (!r || slot < 0 || make_key(type, shareable, 1, &key, &keep) != 0)
        return;
    struct gs_alloc_rec rec;
    if (gs_alloc_get(GS_ALLOC_VMM_SHARED, handle, &rec) == 0) { /* exported before: one more key */
        if (gs_region_export_add_key(r, rec.record, slot, &key) == 0)
            local_keep(rec.record, keep);
        else if (keep >= 0)
            close(keep);
        return;
    }
    /* The charge passes from this process's table to the record. */
    if (gs_alloc_take(GS_ALLOC_VMM, handle, &rec) != 0) {
        if (keep >= 0)
            close(keep); /* never charged by us: nothing to share */
        return;
    }
    int idx = gs_region_export_new(r, rec.slot, rec.dev, rec.bytes, &key);
    struct gs_alloc_rec shared = { .bytes = 0, .dev = rec.dev, .record = idx };
    if (idx < 0) {
        gs_log(GS_LOG_DEBUG, "export table full: importers of handle 0x%llx pay for it themselves",
               (unsigned long long)handle);
        (void)gs_alloc_put(GS_ALLOC_VMM, handle, rec, NULL, NULL); /* the slot it came from is free */
        if (keep >= 0)
            close(keep);
        return;
    }
    if (gs_alloc_put(GS_ALLOC_VMM_SHARED, handle, shared, NULL, NULL) != 0) {
        gs_region_export_leave(r, idx, rec.slot);
        gs_log(GS_LOG_ERROR, "out of host memory tracking an export; it is not counted");
        if (keep >= 0)
            close(keep);
        return;
    }
    local_ref(idx);
    local_keep(idx, keep);
}

int gs_vmm_share_imported(CUmemGenericAllocationHandle handle, const void *os_handle, CUmemAllocationHandleType type)
{
    struct gs_region *r = gs_rt_region();
    int slot = gs_rt_slot();
    struct gs_export_key key;
    int keep = -1, dev = -1;
    struct gs_alloc_rec rec;
    if (!r || slot < 0 || make_key(type, os_handle, 0, &key, &keep) != 0)
        return 0;
    if (gs_alloc_get(GS_ALLOC_VMM_SHARED, handle, &rec) == 0)
        return 1; /* the driver gave back a handle we hold of it already */
    int idx = gs_region_export_join(r, slot, &key, &dev);
    if (idx < 0)
        return 0;
    struct gs_alloc_rec shared = { .bytes = 0, .dev = dev, .record = idx };
    if (gs_alloc_put(GS_ALLOC_VMM_SHARED, handle, shared, NULL, NULL) != 0) {
        gs_region_export_leave(r, idx, slot);
        return 0;
    }
    local_ref(idx);
    return 1;
}

void gs_vmm_share_leave(int record)
{
    struct gs_region *r = gs_rt_region();
    int slot = gs_rt_slot();
    if (record < 0 || record >= GS_REGION_MAX_EXPORTS)
        return;
    if (r && slot >= 0 && gs_region_export_leave(r, record, slot) != 0)
        gs_log(GS_LOG_WARN, "export record %d no longer lists this process", record);
    local_drop(record);
}

void gs_vmm_share_fork_child(void)
{
    /* close() is async-signal-safe; the lock may be held by a thread that
     * does not exist in the child, so it is re-initialised, not taken. */
    for (int i = 0; i < GS_REGION_MAX_EXPORTS; i++)
        for (int k = 0; k < GS_EXPORT_KEYS; k++)
            if (local[i].fd1[k])
                close(local[i].fd1[k] - 1);
    memset(local, 0, sizeof local);
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    local_lock = fresh;
}
