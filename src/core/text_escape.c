/* Quoting of untrusted text for error messages. */
#include "text_escape.h"

static const char gs_hex[] = "0123456789abcdef";

void gs_escape_text(char *out, size_t outlen, const char *in, size_t inlen, size_t show)
{
    size_t o = 0;
    size_t i;

    if (outlen == 0)
        return;
    for (i = 0; i < inlen && in[i] != '\0'; i++) {
        unsigned char c = (unsigned char)in[i];
        char tmp[4];
        size_t n = 0;
        size_t k;

        if (i == show) {
            /* Elide the rest so a 4 KiB path cannot swamp the message. */
            for (k = 0; k < 3 && o + 1 < outlen; k++)
                out[o++] = '.';
            break;
        }
        if (c == '\'' || c == '\\') {
            tmp[n++] = '\\';
            tmp[n++] = (char)c;
        } else if (c >= 0x20 && c < 0x7f) {
            tmp[n++] = (char)c;
        } else {
            tmp[n++] = '\\';
            tmp[n++] = 'x';
            tmp[n++] = gs_hex[c >> 4];
            tmp[n++] = gs_hex[c & 15];
        }
        if (o + n >= outlen)
            break; /* never split an escape sequence */
        for (k = 0; k < n; k++)
            out[o++] = tmp[k];
    }
    out[o] = '\0';
}
