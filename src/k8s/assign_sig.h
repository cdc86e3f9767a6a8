/*
 * The signature the scheduler extender puts next to each assignment it
 * binds (gpuslice.io/assignment-signature), so that the node agent and the
 * extender's own cache can tell the extender's decision from a value the
 * pod's owner edited: HMAC-SHA256, with a key both read from a file (a
 * Kubernetes Secret), over the pod's UID, the node and the assignment text
 * exactly as written. Value: "v1:hmac-sha256:<64 hex digits>".
 */
#ifndef GPUSLICE_DP_ASSIGN_SIG_H
#define GPUSLICE_DP_ASSIGN_SIG_H

#include <stddef.h>

#define GS_ANN_ASSIGNMENT_SIG "gpuslice.io/assignment-signature"
#define GS_SIG_KEY_MIN 32 /* bytes: shorter keys are refused */
#define GS_SIG_KEY_MAX 4096
#define GS_SIG_TEXT_MAX 96

struct gs_sig_key {
    unsigned char bytes[GS_SIG_KEY_MAX];
    size_t len;
};

/* Reads the key file (its bytes as they are; a Secret's file may be a
 * symbolic link into the volume's ..data). 0, or -1 with err naming the
 * path and what is wrong. */
int gs_sig_key_load(const char *path, struct gs_sig_key *key, char *err, size_t errlen);

/* The signature of assignment (as written) for pod uid on node. 0 or -1. */
int gs_sig_make(const struct gs_sig_key *key, const char *uid, const char *node, const char *assignment,
                char out[GS_SIG_TEXT_MAX]);

/* 0 when sig is assignment's signature for uid on node (compared in
 * constant time), else -1 with why ("missing", "malformed", "does not
 * match"). */
int gs_sig_verify(const struct gs_sig_key *key, const char *uid, const char *node, const char *assignment,
                  const char *sig, const char **why);

#endif
