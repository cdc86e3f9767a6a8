/* Command-line values shared by gpuslice's daemons, checked so that every
 * message names the program, the flag the user typed and the value. */
#ifndef GPUSLICE_FLAGS_H
#define GPUSLICE_FLAGS_H

/* A whole number in lo..hi: 0, or -1 after printing
 * "PROG: --FLAG 'TEXT': expected a whole number from LO to HI". */
int gs_flag_int(const char *prog, const char *flag, const char *text, long lo, long hi, int *out);

/* A file that must be readable now (a certificate, a key): 0, or -1 after
 * printing "PROG: --FLAG 'PATH': cannot read it: <reason>". */
int gs_flag_readable(const char *prog, const char *flag, const char *path);

/* Prints "PROG VERSION" on standard output. */
void gs_flag_print_version(const char *prog);

#endif
