/* See container_edits.h. */
#include "container_edits.h"

#include <stdio.h>
#include <string.h>

#include "placement.h"
#include "statedir.h"

static void add_env(struct gs_container_edits *e, const char *k, const char *v)
{
    /* At most 6 of GS_EDITS_MAX_ENV are ever added. */
    snprintf(e->env[e->nenv][0], sizeof e->env[0][0], "%s", k);
    snprintf(e->env[e->nenv][1], sizeof e->env[0][1], "%s", v);
    e->nenv++;
}

static int add_mount(struct gs_container_edits *e, const char *host, const char *cont, int ro)
{
    struct gs_edit_mount *m = &e->m[e->nmounts];
    if (snprintf(m->host, sizeof m->host, "%s", host) >= (int)sizeof m->host ||
        snprintf(m->cont, sizeof m->cont, "%s", cont) >= (int)sizeof m->cont)
        return -1;
    m->ro = ro;
    e->nmounts++;
    return 0;
}

/* Each GPU's device ledger, shared by the containers on that GPU, as a
 * file of its own: the container can neither see other GPUs' ledgers nor
 * add, replace or remove entries in the agent's ledger directory; and its
 * roster, read-only, the agent's word on the ledger's members (roster.h):
 * a directory, so that a replaced roster shows. */
static int add_gpu_mounts(const struct gs_edits_in *in, struct gs_container_edits *e, char *msg, size_t msglen)
{
    char ldir[700], rdir[700], host[800], cont[200];
    if (gs_statedir_agent_ledger_dir(ldir, sizeof ldir, in->state_root) != 0 ||
        gs_statedir_agent_roster_dir(rdir, sizeof rdir, in->state_root) != 0) {
        snprintf(msg, msglen, "state root %s is too long", in->state_root);
        return GS_ST_INTERNAL;
    }
    for (size_t j = 0; j < in->n; j++) {
        const char *uuid = in->uuids[j];
        if (gs_statedir_ledger_path(host, sizeof host, ldir, uuid) ||
            gs_statedir_ledger_path(cont, sizeof cont, GS_STATEDIR_CONTAINER_LEDGER, uuid) ||
            add_mount(e, host, cont, 0) != 0) {
            snprintf(msg, msglen, "ledger path of GPU %s is too long", uuid);
            return GS_ST_INTERNAL;
        }
        if (snprintf(host, sizeof host, "%s/%s", rdir, uuid) >= (int)sizeof host ||
            snprintf(cont, sizeof cont, "%s/%s", GS_STATEDIR_CONTAINER_ROSTER, uuid) >= (int)sizeof cont ||
            add_mount(e, host, cont, 1) != 0) {
            snprintf(msg, msglen, "roster path of GPU %s is too long", uuid);
            return GS_ST_INTERNAL;
        }
    }
    return 0;
}

int gs_container_edits(const struct gs_edits_in *in, struct gs_container_edits *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    if (in->n > GS_ASSIGN_MAX_GPUS) {
        snprintf(msg, msglen, "%zu GPUs for one container (at most %d)", in->n, GS_ASSIGN_MAX_GPUS);
        return GS_ST_INTERNAL;
    }
    if (in->visible_env) {
        char visible[GS_ASSIGN_MAX_GPUS * GS_UUID_MAX] = "";
        for (size_t j = 0; j < in->n; j++) {
            size_t l = strlen(visible);
            snprintf(visible + l, sizeof visible - l, "%s%s", j ? "," : "", in->uuids[j]);
        }
        add_env(out, "NVIDIA_VISIBLE_DEVICES", visible);
    }
    add_env(out, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    add_env(out, "GPUSLICE_REGION", GS_STATEDIR_CONTAINER_REGION);
    add_env(out, "GPUSLICE_CONFIG", GS_STATEDIR_CONTAINER_CONFIG);
    add_env(out, "GPUSLICE_LEDGER_DIR", GS_STATEDIR_CONTAINER_LEDGER);
    add_env(out, "GPUSLICE_ROSTER_DIR", GS_STATEDIR_CONTAINER_ROSTER);
    if (add_mount(out, in->lib_host, in->lib_container, 1) != 0 ||
        add_mount(out, in->preload_host, "/etc/ld.so.preload", 1) != 0 ||
        add_mount(out, in->dirs->state_dir, GS_STATEDIR_CONTAINER, 0) != 0 ||
        add_mount(out, in->dirs->limits_dir, GS_STATEDIR_CONTAINER_LIMITS, 1) != 0) {
        snprintf(msg, msglen, "a path of the interposer or the state root is too long");
        return GS_ST_INTERNAL;
    }
    return add_gpu_mounts(in, out, msg, msglen);
}
