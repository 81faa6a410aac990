/*
 * fuzz_sigv4.c: libFuzzer target for SigV4 verification (ddb_sigv4.h), whose
 * input is untrusted: whatever Authorization, X-Amz-Date and other headers
 * and body a client sends. The input is split at newlines into the
 * Authorization header, X-Amz-Date, Host, X-Amz-Target, the URI and the body
 * (what is missing is absent); the verdict must be an answer, never a crash,
 * a leak or an overread. The corpus holds a request botocore signed
 * (ddb_sigv4_test's), so mutations start from a valid signature.
 * Run by cmake/fuzz-run.sh (fuzz_sigv4_test, make fuzz).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ddb_sigv4.h"

static ddb_credentials *g_creds;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char path[] = "/tmp/fuzz_sigv4.XXXXXX", err[256];
    int fd = mkstemp(path);
    if (fd < 0) {
        abort();
    }
    const char text[] = "AKIDLAPSETEST lapse/secret+key\nOTHER other\n";
    if (write(fd, text, sizeof text - 1) != (ssize_t)(sizeof text - 1)) {
        abort();
    }
    close(fd);
    if (ddb_credentials_load(path, &g_creds, err, sizeof err) != 0) {
        abort();
    }
    unlink(path);
    return 0;
}

typedef struct headers {
    const char *auth, *date, *host, *target;
} headers;

static const char *header(void *arg, const char *name)
{
    const headers *h = arg;
    return strcasecmp(name, "Authorization") == 0  ? h->auth
           : strcasecmp(name, "X-Amz-Date") == 0   ? h->date
           : strcasecmp(name, "Host") == 0         ? h->host
           : strcasecmp(name, "X-Amz-Target") == 0 ? h->target
           : strcasecmp(name, "Content-Type") == 0 ? "application/x-amz-json-1.0"
                                                   : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    if (copy == NULL) {
        return 0;
    }
    memcpy(copy, data, size);
    copy[size] = '\0';
    char *field[6] = {NULL};
    char *p = copy;
    for (int i = 0; i < 6 && p != NULL; i++) {
        field[i] = p;
        char *nl = i < 5 ? strchr(p, '\n') : NULL;
        if (nl != NULL) {
            *nl = '\0';
        }
        p = nl != NULL ? nl + 1 : NULL;
    }
    headers h = {field[0], field[1], field[2], field[3]};
    const char *body = field[5] != NULL ? field[5] : "";
    ddb_sigv4_request r = {.method = "POST",
                           .uri = field[4] != NULL ? field[4] : "/",
                           .header = header,
                           .arg = &h,
                           .body = body,
                           .len = strlen(body),
                           .now_ms = 1795681145000LL}; /* the corpus request's instant */
    char type[64], msg[512];
    (void)ddb_sigv4_verify(g_creds, "us-east-1", &r, type, sizeof type, msg, sizeof msg);
    free(copy);
    return 0;
}
