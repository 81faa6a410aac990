/*
 * http_nng.h: the NNG HTTP server plumbing that http.c (one GET path) and
 * http_service.c (every method, worker threads) share: holding NNG's server
 * for a host:port, registering and starting one handler on it, taking both
 * down again, and sending a response. Internal to rpc/ (it exposes NNG types).
 *
 * NNG shares one nng_http_server per host:port within a process and may still
 * call a handler while the server is being stopped, so each caller keeps the
 * state its handler needs in a reference-counted struct whose destructor NNG
 * runs (http_nng_open); this module owns only the NNG objects.
 *
 * Thread-safety: http_nng_reply may be called from any thread; the others
 * act on one http_nng and are called by its owner only.
 *
 * Invariants:
 *  1. A zeroed http_nng holds nothing; http_nng_close accepts one in any
 *     state between zeroed and started, and leaves it holding nothing.
 *  2. The handler's data is set only together with the caller's reference
 *     count (http_nng_open): once set, NNG owns one reference and drops it by
 *     the destructor.
 */
#ifndef LAPSE_RPC_HTTP_NNG_H
#define LAPSE_RPC_HTTP_NNG_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

typedef struct http_nng {
    nng_url *url;              /* the parsed listen URL; NULL when none */
    nng_http_server *srv;      /* our hold on NNG's server; NULL when none */
    nng_http_handler *handler; /* ours until registered; NULL when none */
    int registered;            /* handler added to srv */
    int started;               /* nng_http_server_start succeeded */
} http_nng;

/* Sends a response with body[0..len) (len 0: empty) and Content-Type ctype;
 * the aio completes either way (on failure NNG closes the connection). */
void http_nng_reply(nng_aio *aio, uint16_t status, const char *ctype, const void *body, size_t len);

/* What http_nng_open registers. */
typedef struct http_nng_opts {
    const char *path;        /* served path, e.g. "/metrics" */
    void (*cb)(nng_aio *);   /* NNG's handler, called on NNG threads */
    const char *method;      /* "GET", or NULL for every method */
    int collect_body;        /* collect request bodies up to max_body */
    size_t max_body;         /* with collect_body */
    const char *reject_body; /* body of NNG's own 400 page; NULL: NNG's */
} http_nng_opts;

/* Holds NNG's server for urltext ("http://HOST:PORT"), registers a handler
 * as o says with data (dtor: the caller's unref, which NNG runs when it drops
 * the handler; *refs counts NNG's reference once the data is set) and starts
 * listening. Returns 0 or an NNG error with the failed step in *what; then
 * http_nng_close undoes what was done. REQUIRES: h zeroed. */
int http_nng_open(http_nng *h, const char *urltext, const http_nng_opts *o, void *data,
                  void (*dtor)(void *), int *refs, const char **what);

/* The error of a failed open: with nrv (an NNG error of http_nng_open)
 * writes "HTTP server on HOST_PORT: WHAT: NNG's text" into err (NULL: none)
 * and returns nrv as a LAPSE_* code (ENOMEM, EINVAL, else EUNAVAILABLE);
 * with nrv 0 writes "HTTP server on HOST_PORT: WHAT" and returns rv. */
int http_nng_fail(int rv, int nrv, const char *host_port, const char *what, char *err,
                  size_t errlen);

/* Unregisters and frees the handler (NNG runs its destructor once it no
 * longer uses it), stops and releases the server, frees the URL. */
void http_nng_close(http_nng *h);

#endif
