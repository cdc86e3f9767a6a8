/* Byte sizes as people write them in environment variables and config files. */
#ifndef GPUSLICE_SIZE_PARSE_H
#define GPUSLICE_SIZE_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* Parses a byte size: plain bytes ("1048576") or a number with a binary unit
 * (all powers of 1024, as HAMi-core reads k/m/g): K/M/G/T, Ki/Mi/Gi/Ti, KiB/MiB/GiB/TiB.
 * The prefix letter and the 'i' are case-insensitive; a trailing 'B' must be upper case,
 * because 'b' means bits. "B" alone means bytes. A fraction ("1.5GiB") is accepted only
 * when it is a whole number of bytes.
 * Rejected: empty text, signs, whitespace anywhere, overflow past UINT64_MAX, unknown
 * units, and the decimal-looking KB/MB/GB/TB (any case), which the message redirects to
 * GiB or G.
 * Returns 0 and sets *out, or -1 and writes a one-line reason (without the value) into
 * err when errlen > 0; *out is untouched on failure. */
int gs_parse_size(const char *text, uint64_t *out, char *err, size_t errlen);

/* Formats bytes for people with three significant digits and a binary unit:
 * "17 B", "1.50 KiB", "512 MiB", "4.00 GiB", "16.0 TiB". Units stop at TiB so that the
 * output, without its space, is in gs_parse_size's grammar.
 * Returns the length written (excluding NUL), or -1 if buf is too small (24 bytes
 * always suffice); buf is NUL-terminated whenever len > 0. */
int gs_format_size(uint64_t bytes, char *buf, size_t len);

#define GS_FORMAT_SIZE_MAX 24

#endif
