/* http_nng.c: the NNG HTTP server plumbing. Contract in http_nng.h. */
#include "http_nng.h"

#include <stdbool.h>
#include <stdio.h>

#include "../common/lapse_err.h"

void http_nng_reply(nng_aio *aio, uint16_t status, const char *ctype, const void *body, size_t len)
{
    nng_http_res *res;
    int rv;
    if ((rv = nng_http_res_alloc(&res)) != 0) {
        nng_aio_finish(aio, rv);
        return;
    }
    if ((rv = nng_http_res_set_status(res, status)) != 0 ||
        (rv = nng_http_res_set_header(res, "Content-Type", ctype)) != 0 ||
        (rv = nng_http_res_copy_data(res, len ? body : "", len)) != 0) {
        nng_http_res_free(res);
        nng_aio_finish(aio, rv);
        return;
    }
    nng_aio_set_output(aio, 0, res); /* NNG owns and frees res from here */
    nng_aio_finish(aio, 0);
}

int http_nng_open(http_nng *h, const char *urltext, const http_nng_opts *o, void *data,
                  void (*dtor)(void *), int *refs, const char **what)
{
    int nrv;
    *what = "parse URL";
    if ((nrv = nng_url_parse(&h->url, urltext)) != 0) {
        return nrv;
    }
    *what = "create server";
    if ((nrv = nng_http_server_hold(&h->srv, h->url)) != 0) {
        return nrv;
    }
    if (o->reject_body != NULL) {
        *what = "set the 400 page";
        if ((nrv = nng_http_server_set_error_page(h->srv, NNG_HTTP_STATUS_BAD_REQUEST,
                                                  o->reject_body)) != 0) {
            return nrv;
        }
    }
    *what = "create handler";
    if ((nrv = nng_http_handler_alloc(&h->handler, o->path, o->cb)) != 0 ||
        (nrv = nng_http_handler_set_method(h->handler, o->method)) != 0) {
        return nrv;
    }
    if (o->collect_body &&
        (nrv = nng_http_handler_collect_body(h->handler, true, o->max_body)) != 0) {
        return nrv;
    }
    (*refs)++; /* the handler's reference, dropped by its destructor */
    if ((nrv = nng_http_handler_set_data(h->handler, data, dtor)) != 0) {
        (*refs)--;
        return nrv;
    }
    /* In one process NNG hands back the same server for the same host:port,
     * so a second open of the same path conflicts here. */
    *what = "register handler";
    if ((nrv = nng_http_server_add_handler(h->srv, h->handler)) != 0) {
        return nrv;
    }
    h->registered = 1;
    *what = "listen";
    if ((nrv = nng_http_server_start(h->srv)) != 0) {
        return nrv;
    }
    h->started = 1;
    nng_url_free(h->url);
    h->url = NULL;
    return 0;
}

int http_nng_fail(int rv, int nrv, const char *host_port, const char *what, char *err,
                  size_t errlen)
{
    if (nrv == 0) {
        if (err != NULL) {
            snprintf(err, errlen, "HTTP server on %s: %s", host_port, what);
        }
        return rv;
    }
    if (err != NULL) {
        snprintf(err, errlen, "HTTP server on %s: %s: %s", host_port, what, nng_strerror(nrv));
    }
    switch (nrv) {
    case NNG_ENOMEM:
        return LAPSE_ENOMEM;
    case NNG_EINVAL:
    case NNG_EADDRINVAL:
        return LAPSE_EINVAL;
    default:
        return LAPSE_EUNAVAILABLE; /* NNG_EADDRINUSE, NNG_EPERM, ... */
    }
}

void http_nng_close(http_nng *h)
{
    if (h->handler != NULL) {
        /* Registered: take the server's reference back, then drop it. Not
         * registered: ours. Either way the destructor runs once NNG no longer
         * uses the handler. */
        if (!h->registered || nng_http_server_del_handler(h->srv, h->handler) == 0) {
            nng_http_handler_free(h->handler);
        }
        h->handler = NULL;
    }
    if (h->srv != NULL) {
        if (h->started) {
            nng_http_server_stop(h->srv);
        }
        nng_http_server_release(h->srv);
        h->srv = NULL;
    }
    nng_url_free(h->url);
    h->url = NULL;
    h->registered = 0;
    h->started = 0;
}
