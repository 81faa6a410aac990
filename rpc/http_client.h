/*
 * http_client.h: a blocking HTTP/1.1 client on one keep-alive connection
 * (NNG's HTTP client), for harnesses that drive Lapse's HTTP endpoints the
 * way DynamoDB's clients do: the DynamoDB gateway's benchmark
 * (bench/ddb_bench.c). Not used by the daemons.
 *
 * Thread-safety: one http_client belongs to one thread at a time.
 *
 * Invariants:
 *  1. Requests go over one connection, opened at the first request and
 *     opened again after a failure (the server closed it, say); a request
 *     never silently goes unsent: a failure is returned.
 *  2. The response body is the caller's copy, whole (NNG reads
 *     Content-Length bytes), NUL-terminated for convenience.
 */
#ifndef LAPSE_HTTP_CLIENT_H
#define LAPSE_HTTP_CLIENT_H

#include <stddef.h>

#include "../common/buf.h"

typedef struct http_client http_client;

/* A client of url (http://host:port/path: the path is the one POSTed to).
 * Returns 0 or a LAPSE_E* code with a reason in err; connects lazily. */
int http_client_open(http_client **out, const char *url, char *err, size_t errlen);
void http_client_close(http_client *c); /* accepts NULL */

/* POSTs body with the headers (name/value pairs, n of them) and waits at most
 * timeout_ms. Returns 0 with *status and the response body in resp (cleared
 * first), or a LAPSE_E* code (LAPSE_EUNAVAILABLE: no connection,
 * LAPSE_ETIMEDOUT, LAPSE_EIO) with a reason in err. */
int http_client_post(http_client *c, const char *const *names, const char *const *values, size_t n,
                     const void *body, size_t len, int timeout_ms, int *status, buf *resp,
                     char *err, size_t errlen);

#endif
