/* See assign_sig.h. */
#include "assign_sig.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIG_PREFIX "v1:hmac-sha256:"

int gs_sig_key_load(const char *path, struct gs_sig_key *key, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "assignment key %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    ssize_t r = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        r = read(fd, key->bytes, sizeof key->bytes);
    char more;
    int longer = r == (ssize_t)sizeof key->bytes && read(fd, &more, 1) == 1;
    close(fd);
    if (r < 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "assignment key %s: not a readable regular file", path);
        return -1;
    }
    if (r < GS_SIG_KEY_MIN || longer) {
        snprintf(err, errlen, "assignment key %s: %s bytes; use %d to %d random bytes", path,
                 longer ? "too many" : "too few", GS_SIG_KEY_MIN, GS_SIG_KEY_MAX);
        return -1;
    }
    key->len = (size_t)r;
    return 0;
}

/* HMAC over length-prefixed fields, so that no two (uid, node,
 * assignment) triples give the same message. */
static int mac(const struct gs_sig_key *key, const char *uid, const char *node, const char *assignment,
               unsigned char out[32])
{
    const char *fields[] = { "gpuslice assignment v1", uid, node, assignment };
    size_t n = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        n += strlen(fields[i]) + 24;
    char *msg = malloc(n);
    if (!msg)
        return -1;
    size_t l = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        l += (size_t)snprintf(msg + l, n - l, "%zu:%s", strlen(fields[i]), fields[i]);
    unsigned int outlen = 0;
    int ok = HMAC(EVP_sha256(), key->bytes, (int)key->len, (const unsigned char *)msg, l, out, &outlen) != NULL &&
             outlen == 32;
    free(msg);
    return ok ? 0 : -1;
}

int gs_sig_make(const struct gs_sig_key *key, const char *uid, const char *node, const char *assignment,
                char out[GS_SIG_TEXT_MAX])
{
    unsigned char d[32];
    if (mac(key, uid, node, assignment, d) != 0)
        return -1;
    int l = snprintf(out, GS_SIG_TEXT_MAX, "%s", SIG_PREFIX);
    for (int i = 0; i < 32; i++)
        l += snprintf(out + l, GS_SIG_TEXT_MAX - (size_t)l, "%02x", d[i]);
    return 0;
}

int gs_sig_verify(const struct gs_sig_key *key, const char *uid, const char *node, const char *assignment,
                  const char *sig, const char **why)
{
    char want[GS_SIG_TEXT_MAX];
    if (!sig || !*sig) {
        *why = "missing";
        return -1;
    }
    if (strlen(sig) != strlen(SIG_PREFIX) + 64 || strncmp(sig, SIG_PREFIX, strlen(SIG_PREFIX)) != 0) {
        *why = "malformed (not v1:hmac-sha256:<64 hex digits>)";
        return -1;
    }
    if (gs_sig_make(key, uid, node, assignment, want) != 0) {
        *why = "could not be computed";
        return -1;
    }
    if (CRYPTO_memcmp(want, sig, strlen(want)) != 0) {
        *why = "does not match (edited, copied from another pod or node, or another key)";
        return -1;
    }
    return 0;
}
