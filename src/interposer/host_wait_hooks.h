/* Entry points that queue waits for the host (host_wait_hooks.c). */
#ifndef GS_HOST_WAIT_HOOKS_H
#define GS_HOST_WAIT_HOOKS_H

/* A lookup of name (a base name through cuGetProcAddress, an exported name
 * through dlsym) found the driver's function found and handed back handed.
 * Where it could not wrap a variant of an entry point that queues host waits
 * (a newer ABI than this build knows), the process is noted as one that
 * queues such work: that variant passes through unseen. */
void gs_host_wait_note_lookup(const char *name, const void *found, const void *handed);
#endif
