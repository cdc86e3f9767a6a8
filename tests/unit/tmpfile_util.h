/* Temporary files for config-file tests. */
#ifndef GPUSLICE_TEST_TMPFILE_UTIL_H
#define GPUSLICE_TEST_TMPFILE_UTIL_H

#include <stddef.h>

/* Writes len bytes to a new temporary file; returns its path (valid until the next call
 * or tmpfile_cleanup). Aborts on I/O errors, which are test-environment bugs. */
const char *tmpfile_write(const void *data, size_t len);
/* Same for a NUL-terminated string. */
const char *tmpfile_write_str(const char *text);
/* Removes the last file written, if any. */
void tmpfile_cleanup(void);

#endif
