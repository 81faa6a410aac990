/*
 * token.c: shared secrets in files (contract in token.h).
 */
#include "token.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int token_read_file(const char *path, const char *what, char *tok, size_t cap, char *err,
                    size_t errlen)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) {
        snprintf(err, errlen, "cannot open %s file %s: %s", what, path, strerror(errno));
        return -1;
    }
    /* Up to cap bytes: a token of cap - 1 bytes may still end in a newline. */
    size_t n = fread(tok, 1, cap, fp);
    int more = n == cap && fgetc(fp) != EOF;
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        snprintf(err, errlen, "cannot read %s file %s", what, path);
        return -1;
    }
    if (n > 0 && tok[n - 1] == '\n' && !more) {
        n--;
    }
    if (n == cap || more) { /* no room left for the terminator: too long */
        snprintf(err, errlen, "%s file %s is longer than %zu bytes", what, path, cap - 1);
        return -1;
    }
    tok[n] = '\0';
    if (n == 0) {
        snprintf(err, errlen, "%s file %s is empty", what, path);
        return -1;
    }
    if (memchr(tok, '\0', n) != NULL) {
        snprintf(err, errlen, "%s file %s holds a NUL byte", what, path);
        return -1;
    }
    return 0;
}

int token_equal(const char *want, size_t want_len, const char *got)
{
    if (got == NULL) {
        got = "";
    }
    size_t got_len = strlen(got);
    unsigned diff = got_len != want_len;
    for (size_t i = 0; i < want_len; i++) {
        unsigned char g = i < got_len ? (unsigned char)got[i] : 0;
        diff |= (unsigned)((unsigned char)want[i] ^ g);
    }
    return diff == 0;
}
