/* base64.c: RFC 4648 base64 (base64.h). */
#include "base64.h"

#include <stdlib.h>
#include <string.h>

#include "lapse_err.h"

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const uint8_t *p, size_t n)
{
    if (n > (SIZE_MAX - 1) / 4 * 3 - 3) {
        return NULL;
    }
    char *out = malloc((n + 2) / 3 * 4 + 1);
    if (out == NULL) {
        return NULL;
    }
    size_t k = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[k++] = b64chars[v >> 18 & 63];
        out[k++] = b64chars[v >> 12 & 63];
        out[k++] = b64chars[v >> 6 & 63];
        out[k++] = b64chars[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        out[k++] = b64chars[v >> 18 & 63];
        out[k++] = b64chars[v >> 12 & 63];
        out[k++] = i + 1 < n ? b64chars[v >> 6 & 63] : '=';
        out[k++] = '=';
    }
    out[k] = 0;
    return out;
}

static int b64_val(char c)
{
    const char *p = c == 0 ? NULL : strchr(b64chars, c);
    return p == NULL ? -1 : (int)(p - b64chars);
}

int base64_decode(const char *s, size_t n, uint8_t **out, size_t *outlen)
{
    if (n % 4 != 0) {
        return LAPSE_EINVAL;
    }
    uint8_t *d = malloc(n / 4 * 3 + 1);
    if (d == NULL) {
        return LAPSE_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int last = i + 4 == n;
        int pad = 0;
        if (last && s[i + 3] == '=') {
            pad = s[i + 2] == '=' ? 2 : 1;
        }
        int v[4] = {0, 0, 0, 0};
        for (int j = 0; j < 4 - pad; j++) {
            if ((v[j] = b64_val(s[i + j])) < 0) {
                free(d);
                return LAPSE_EINVAL;
            }
        }
        uint32_t x =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        if ((pad == 1 && (x & 0xFF) != 0) || (pad == 2 && (x & 0xFFFF) != 0)) {
            free(d); /* non-canonical: stray bits in the padding */
            return LAPSE_EINVAL;
        }
        d[k++] = (uint8_t)(x >> 16);
        if (pad < 2) {
            d[k++] = (uint8_t)(x >> 8);
        }
        if (pad < 1) {
            d[k++] = (uint8_t)x;
        }
    }
    d[k] = 0;
    *out = d;
    *outlen = k;
    return 0;
}
