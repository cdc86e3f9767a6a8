/* Makes untrusted text (environment values, file names, file contents) safe to quote in
 * a one-line error message, a terminal or a metrics label: no control bytes, no
 * newlines, bounded length. */
#ifndef GPUSLICE_TEXT_ESCAPE_H
#define GPUSLICE_TEXT_ESCAPE_H

#include <stddef.h>

/* Writes a printable copy of the first inlen bytes of in (stopping early at a NUL) to
 * out: printable ASCII stays, '\'' and '\\' get a backslash, anything else becomes \xNN.
 * At most `show` input bytes are copied; if more remain, "..." is appended. out is
 * always NUL-terminated when outlen > 0, truncating if it must. */
void gs_escape_text(char *out, size_t outlen, const char *in, size_t inlen, size_t show);

/* Writes a copy of the first inlen bytes of in (stopping early at a NUL) that is
 * valid UTF-8 with no control characters, for names shown in `gpuslice top`, its
 * JSON and the node agent's metrics labels: printable ASCII and well-formed UTF-8
 * characters stay, '\\' is doubled, and a control character (C0, DEL, C1) or a
 * byte that is not part of a well-formed character becomes \xNN. out is always
 * NUL-terminated when outlen > 0, truncated before a character or escape that
 * would not fit; 4 * inlen + 1 bytes always suffice. */
void gs_escape_utf8(char *out, size_t outlen, const char *in, size_t inlen);

/* How many bytes of a value error messages quote before eliding the rest. */
#define GS_ESCAPE_SHOW 96
/* Room for an escaped value of GS_ESCAPE_SHOW bytes: 4 output bytes per input byte. */
#define GS_ESCAPE_BUF (GS_ESCAPE_SHOW * 4 + 4)

/* The string s (NULL: "") as an error message or log line quotes it:
 * gs_escape_text of its first GS_ESCAPE_SHOW bytes into buf, which it
 * returns. */
const char *gs_escape_shown(char buf[GS_ESCAPE_BUF], const char *s);

#endif
