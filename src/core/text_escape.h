/* Makes untrusted text (environment values, file names, file contents) safe to quote in
 * a one-line error message: no control bytes, no newlines, bounded length. */
#ifndef GPUSLICE_TEXT_ESCAPE_H
#define GPUSLICE_TEXT_ESCAPE_H

#include <stddef.h>

/* Writes a printable copy of the first inlen bytes of in (stopping early at a NUL) to
 * out: printable ASCII stays, '\'' and '\\' get a backslash, anything else becomes \xNN.
 * At most `show` input bytes are copied; if more remain, "..." is appended. out is
 * always NUL-terminated when outlen > 0, truncating if it must. */
void gs_escape_text(char *out, size_t outlen, const char *in, size_t inlen, size_t show);

/* How many bytes of a value error messages quote before eliding the rest. */
#define GS_ESCAPE_SHOW 96
/* Room for an escaped value of GS_ESCAPE_SHOW bytes: 4 output bytes per input byte. */
#define GS_ESCAPE_BUF (GS_ESCAPE_SHOW * 4 + 4)

#endif
