/* Kubernetes resource quantities ("8192", "10k", "8Gi", "500m", "1e3"). */
#ifndef GPUSLICE_QUANTITY_H
#define GPUSLICE_QUANTITY_H

#include <stddef.h>
#include <stdint.h>

/* Parses a quantity that must be a whole number (after its suffix).
 * Returns 0 and *out, or -1 with a reason in err. */
int gs_quantity_int(const char *s, int64_t *out, char *err, size_t errlen);

#endif
