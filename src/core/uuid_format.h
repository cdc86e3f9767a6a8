/* CUDA reports a device UUID as 16 raw bytes, NVML as text. The region keys
 * devices by NVML's text form so both sides meet. */
#ifndef GPUSLICE_UUID_FORMAT_H
#define GPUSLICE_UUID_FORMAT_H

#include <stddef.h>

#define GS_UUID_TEXT_LEN 48

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", lower-case hex. */
void gs_format_gpu_uuid(const char bytes[16], char *out, size_t len);

#endif
