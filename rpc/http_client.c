/*
 * http_client.c: one keep-alive HTTP/1.1 connection on NNG's HTTP client
 * (http_client.h).
 */
#include "http_client.h"

#include <stdio.h>
#include <stdlib.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "../common/lapse_err.h"

struct http_client {
    nng_url *url;
    nng_http_client *cli;
    nng_http_conn *conn; /* NULL: not connected (invariant 1) */
    nng_aio *aio;
};

static int fail(int nng_rv, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: %s", what, nng_strerror(nng_rv));
    return nng_rv == NNG_ETIMEDOUT                                  ? LAPSE_ETIMEDOUT
           : nng_rv == NNG_ENOMEM                                   ? LAPSE_ENOMEM
           : nng_rv == NNG_ECONNREFUSED || nng_rv == NNG_EADDRINVAL ? LAPSE_EUNAVAILABLE
                                                                    : LAPSE_EIO;
}

int http_client_open(http_client **out, const char *url, char *err, size_t errlen)
{
    int rv;
    http_client *c = calloc(1, sizeof *c);
    *out = NULL;
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    if ((rv = nng_url_parse(&c->url, url)) != 0) {
        free(c);
        snprintf(err, errlen, "bad URL %s: %s", url, nng_strerror(rv));
        return LAPSE_EINVAL;
    }
    if ((rv = nng_http_client_alloc(&c->cli, c->url)) != 0 ||
        (rv = nng_aio_alloc(&c->aio, NULL, NULL)) != 0) {
        int code = fail(rv, "HTTP client", err, errlen);
        http_client_close(c);
        return code;
    }
    *out = c;
    return 0;
}

void http_client_close(http_client *c)
{
    if (c == NULL) {
        return;
    }
    if (c->conn != NULL) {
        nng_http_conn_close(c->conn);
    }
    if (c->aio != NULL) {
        nng_aio_free(c->aio);
    }
    if (c->cli != NULL) {
        nng_http_client_free(c->cli);
    }
    if (c->url != NULL) {
        nng_url_free(c->url);
    }
    free(c);
}

/* Drops the connection (after a failure: the next request opens another). */
static void disconnect(http_client *c)
{
    if (c->conn != NULL) {
        nng_http_conn_close(c->conn);
        c->conn = NULL;
    }
}

static int connect_now(http_client *c, int timeout_ms, char *err, size_t errlen)
{
    nng_aio_set_timeout(c->aio, timeout_ms);
    nng_http_client_connect(c->cli, c->aio);
    nng_aio_wait(c->aio);
    int rv = nng_aio_result(c->aio);
    if (rv != 0) {
        return fail(rv, "connect", err, errlen);
    }
    c->conn = nng_aio_get_output(c->aio, 0);
    return 0;
}

int http_client_post(http_client *c, const char *const *names, const char *const *values, size_t n,
                     const void *body, size_t len, int timeout_ms, int *status, buf *resp,
                     char *err, size_t errlen)
{
    nng_http_req *req = NULL;
    nng_http_res *res = NULL;
    int rv, code = 0;
    buf_clear(resp);
    if (c->conn == NULL && (code = connect_now(c, timeout_ms, err, errlen)) != 0) {
        return code;
    }
    if ((rv = nng_http_req_alloc(&req, c->url)) != 0 || (rv = nng_http_res_alloc(&res)) != 0 ||
        (rv = nng_http_req_set_method(req, "POST")) != 0 ||
        (rv = nng_http_req_copy_data(req, body, len)) != 0) {
        code = fail(rv, "request", err, errlen);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if ((rv = nng_http_req_set_header(req, names[i], values[i])) != 0) {
            code = fail(rv, "header", err, errlen);
            goto out;
        }
    }
    nng_aio_set_timeout(c->aio, timeout_ms);
    nng_http_conn_transact(c->conn, req, res, c->aio);
    nng_aio_wait(c->aio);
    if ((rv = nng_aio_result(c->aio)) != 0) {
        disconnect(c);
        code = fail(rv, "POST", err, errlen);
        goto out;
    }
    void *data = NULL;
    size_t dlen = 0;
    nng_http_res_get_data(res, &data, &dlen);
    *status = nng_http_res_get_status(res);
    if ((dlen > 0 && buf_append(resp, data, dlen) != 0) || buf_append_byte(resp, 0) != 0) {
        snprintf(err, errlen, "out of memory");
        code = LAPSE_ENOMEM;
        goto out;
    }
    resp->len--; /* the terminator is not part of the body (invariant 2) */
out:
    if (req != NULL) {
        nng_http_req_free(req);
    }
    if (res != NULL) {
        nng_http_res_free(res);
    }
    return code;
}
