/* Quoting of untrusted text for error messages, tables, JSON and metrics labels. */
#include "text_escape.h"

#include <string.h>

static const char gs_hex[] = "0123456789abcdef";

/* Appends the n bytes of s to out at *o if they fit whole (keeping room for the
 * NUL): an escape sequence or a character is never split. 0, or -1 when full. */
static int put_whole(char *out, size_t outlen, size_t *o, const char *s, size_t n)
{
    size_t k;

    if (*o + n >= outlen)
        return -1;
    for (k = 0; k < n; k++)
        out[(*o)++] = s[k];
    return 0;
}

/* \xNN for byte c into tmp; returns 4. */
static size_t hex_escape(char *tmp, unsigned char c)
{
    tmp[0] = '\\';
    tmp[1] = 'x';
    tmp[2] = gs_hex[c >> 4];
    tmp[3] = gs_hex[c & 15];
    return 4;
}

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

        if (i == show) {
            /* Elide the rest so a 4 KiB path cannot swamp the message. */
            while (n < 3 && o + 1 < outlen) {
                out[o++] = '.';
                n++;
            }
            break;
        }
        if (c == '\'' || c == '\\') {
            tmp[n++] = '\\';
            tmp[n++] = (char)c;
        } else if (c >= 0x20 && c < 0x7f) {
            tmp[n++] = (char)c;
        } else {
            n = hex_escape(tmp, c);
        }
        if (put_whole(out, outlen, &o, tmp, n) != 0)
            break;
    }
    out[o] = '\0';
}

/* The first byte of a multi-byte UTF-8 character: its length, the bits it
 * carries and the least code point that length may encode; 0 if not one. */
static size_t utf8_lead(unsigned char c, unsigned *cp, unsigned *min)
{
    if (c >= 0xc2 && c <= 0xdf) {
        *cp = c & 0x1fu;
        *min = 0x80;
        return 2;
    }
    if (c >= 0xe0 && c <= 0xef) {
        *cp = c & 0x0fu;
        *min = 0x800;
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        *cp = c & 0x07u;
        *min = 0x10000;
        return 4;
    }
    return 0;
}

/* Length of the printable character at s (n bytes left): printable ASCII, or a
 * whole, shortest-form UTF-8 sequence of a code point that is neither a C1
 * control (a terminal may act on U+009B as on ESC [), a surrogate nor past
 * U+10FFFF. 0 for anything else: a control, a stray or truncated byte. */
static size_t printable_char(const unsigned char *s, size_t n)
{
    unsigned cp = 0;
    unsigned min = 0;
    size_t len;
    size_t k;

    if (s[0] >= 0x20 && s[0] < 0x7f)
        return 1;
    len = utf8_lead(s[0], &cp, &min);
    if (len == 0 || len > n)
        return 0;
    for (k = 1; k < len; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3fu);
    }
    if (cp < min || cp < 0xa0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void gs_escape_utf8(char *out, size_t outlen, const char *in, size_t inlen)
{
    const unsigned char *s = (const unsigned char *)in;
    size_t o = 0;
    size_t i = 0;

    if (outlen == 0)
        return;
    while (i < inlen && s[i] != '\0') {
        char tmp[4];
        size_t n = printable_char(s + i, inlen - i);
        int full;

        if (s[i] == '\\')
            full = put_whole(out, outlen, &o, "\\\\", 2);
        else if (n > 0)
            full = put_whole(out, outlen, &o, in + i, n);
        else
            full = put_whole(out, outlen, &o, tmp, hex_escape(tmp, s[i]));
        if (full != 0)
            break;
        i += n > 0 ? n : 1;
    }
    out[o] = '\0';
}

const char *gs_escape_shown(char buf[GS_ESCAPE_BUF], const char *s)
{
    gs_escape_text(buf, GS_ESCAPE_BUF, s ? s : "", s ? strlen(s) : 0, GS_ESCAPE_SHOW);
    return buf;
}
