/*
 * ddb_sigv4.h: AWS Signature Version 4 verification for the gateway
 * (docs/dynamodb-api.md, "Authentication"). With a credentials file
 * (--dynamodb-credentials), every POST must carry an Authorization header
 * that a listed access key signed for this region and the dynamodb service;
 * without one, the gateway accepts any signature (DynamoDB Local's
 * behaviour). The only includer of OpenSSL (libcrypto: SHA-256, HMAC).
 *
 * Thread-safety: a loaded ddb_credentials is read-only and may be shared by
 * any number of threads; ddb_sigv4_verify is reentrant.
 *
 * Invariants:
 *  1. A request is accepted only when the signature computed from the
 *     request as received (method, path, query, the signed headers, the
 *     body's SHA-256) with the listed secret equals the one sent; the
 *     comparison takes the same time whatever the bytes.
 *  2. Only a request dated within 15 minutes of the gateway's clock, with a
 *     credential scope of that date, this region, "dynamodb" and
 *     "aws4_request", and signing the host header, is accepted.
 */
#ifndef LAPSE_DDB_SIGV4_H
#define LAPSE_DDB_SIGV4_H

#include <stddef.h>
#include <stdint.h>

typedef struct ddb_credentials ddb_credentials;

/* Loads a credentials file: one "ACCESS_KEY_ID SECRET_ACCESS_KEY" pair per
 * line (blank lines and lines starting with # ignored). 0 with *out (free
 * with ddb_credentials_free), or -1 with the reason in err (no file, a bad
 * line, no key, a key listed twice). */
int ddb_credentials_load(const char *path, ddb_credentials **out, char *err, size_t errlen);
void ddb_credentials_free(ddb_credentials *c); /* accepts NULL */
size_t ddb_credentials_count(const ddb_credentials *c);

/* What the verification reads of a request. */
typedef struct ddb_sigv4_request {
    const char *method; /* "POST" */
    const char *uri;    /* the path and query as sent: "/", "/?a=b" */
    /* The value of header name (case-insensitive), or NULL when absent. */
    const char *(*header)(void *arg, const char *name);
    void *arg;
    const void *body;
    size_t len;
    int64_t now_ms; /* the gateway's wall clock, epoch ms */
} ddb_sigv4_request;

/* Checks r's signature against c for region. Returns 0, or -1 with
 * DynamoDB's error name in type (MissingAuthenticationTokenException,
 * IncompleteSignatureException, UnrecognizedClientException,
 * InvalidSignatureException) and a message in msg. */
int ddb_sigv4_verify(const ddb_credentials *c, const char *region, const ddb_sigv4_request *r,
                     char *type, size_t typelen, char *msg, size_t msglen);

#endif
