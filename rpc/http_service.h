/*
 * http_service.h: an HTTP/1.1 service on libmicrohttpd for request/response
 * APIs with bodies (the DynamoDB gateway, dynamodb/): any method on one path,
 * request headers and bodies up to a set size, keep-alive. rpc/ is the only
 * module that includes libmicrohttpd (and NNG, whose HTTP server serves the
 * smaller GET-only http.h, /metrics).
 *
 * libmicrohttpd reads and parses every connection on one thread of its own
 * (epoll), which must not block; a service's function may block (liblapse
 * calls do), so a request is suspended and queued, and a fixed pool of
 * worker threads owned by the service runs the function and resumes the
 * request with its response, which that thread then sends (the connection
 * reads its next request only after).
 *
 * A service may also have a quick function that runs on that thread and
 * takes requests it can answer without blocking (an asynchronous call whose
 * callback answers), sparing the worker's hand-offs; what it does not take
 * goes to the workers.
 *
 * Why libmicrohttpd rather than NNG's HTTP server, used before: each
 * request cost hand-offs between NNG's poller and task threads
 * (docs/benchmarks.md, "The gateway on libmicrohttpd").
 *
 * Thread-safety: fn runs on the service's worker threads, several at once;
 * quick on the server's thread; a taken request may be answered from any
 * thread.
 *
 * Invariants:
 *  1. Each request is answered exactly once: by fn's response, by the
 *     answer given through a quick function's http_pending, or by 503 when
 *     the queue is full or the service is closing.
 *  2. fn, quick and arg are never used after http_service_close returns,
 *     which waits for every taken request to be answered.
 *  3. A body over max_body never reaches fn: a Content-Length over it is
 *     answered 400 (with reject_body when set) before the body is read, and
 *     the connection closed; a body that grows past it unannounced gets the
 *     same 400 once read. Malformed requests and a missing Host get
 *     libmicrohttpd's own 400.
 */
#ifndef LAPSE_HTTP_SERVICE_H
#define LAPSE_HTTP_SERVICE_H

#include <stddef.h>

#include "../common/buf.h"

typedef struct http_service http_service;
/* One request, borrowed by fn for the duration of the call. */
typedef struct http_request http_request;

/* "GET", "POST", ... */
const char *http_request_method(const http_request *r);
/* The request target as sent: the path and any query ("/", "/?a=b"). */
const char *http_request_uri(const http_request *r);
/* The request's header of that name (case-insensitive), or NULL when absent.
 * Borrowed for the duration of fn. */
const char *http_request_header(const http_request *r, const char *name);
/* The request body (len 0 and *data NULL when there is none), borrowed for
 * the duration of fn; not NUL-terminated. */
void http_request_body(const http_request *r, const void **data, size_t *len);

/* What fn fills in. The service initializes it to status 200, an empty body
 * and content_type "application/octet-stream". */
typedef struct http_response {
    int status;            /* HTTP status code */
    char content_type[96]; /* NUL-terminated */
    buf body;              /* owned by the service, freed after sending */
} http_response;

typedef void (*http_serve_fn)(void *arg, const http_request *req, http_response *res);

/* A request a quick function took (http_quick_fn): answered later, from any
 * thread, by exactly one of http_pending_reply and http_pending_to_worker. */
typedef struct http_pending http_pending;

/* Runs on the server's thread for each request before it is queued for a worker,
 * so it must not block. Returns 0 to leave the request to fn on a worker
 * as usual, or 1 when it took it: the request (req, valid until then) is
 * then answered through p, e.g. from the callback of an asynchronous call,
 * which spares a worker's two thread switches. */
typedef int (*http_quick_fn)(void *arg, const http_request *req, http_pending *p);

/* Sends res (its body is consumed) as the answer to p, which is gone after. */
void http_pending_reply(http_pending *p, http_response *res);
/* Queues p for fn on a worker after all (503 when the queue is full or the
 * service is closing); p is gone after. */
void http_pending_to_worker(http_pending *p);
/* p's request, valid until p is answered. */
const http_request *http_pending_request(const http_pending *p);

typedef struct http_service_options {
    const char *path;        /* the one path served, e.g. "/" (exact match; others get 404) */
    size_t max_body;         /* largest request body accepted, bytes */
    int workers;             /* threads running fn; 0: 4 */
    size_t max_queued;       /* requests waiting for a worker beyond which 503; 0: 1024 */
    const char *reject_body; /* NULL, or the body of the 400 of invariant 3 */
    http_quick_fn quick;     /* NULL, or run first on the server's thread (with fn's arg) */
    /* NULL: the server has a thread of its own. Else "the server's thread"
     * is a loop the owner runs: watch(loop, fd, run, run_arg) must call
     * run(run_arg) on the loop's thread whenever fd is readable, until
     * unwatch(loop, fd) returns (after which run never runs again). The
     * gateway passes liblapse's lapse_loop, so the replies of its calls
     * and its HTTP are taken on one thread. */
    int (*watch)(void *loop, int fd, void (*run)(void *run_arg), void *run_arg);
    void (*unwatch)(void *loop, int fd);
    void *loop;
} http_service_options;

/* Serves opts->path on host_port ("127.0.0.1:8000") for every method, calling
 * fn for each request on a worker thread. Returns 0, LAPSE_EINVAL (bad
 * address or options), LAPSE_ENOMEM or LAPSE_EUNAVAILABLE (address in use)
 * with a reason in err; on error nothing is left running and *out is NULL. */
int http_service_open(http_service **out, const char *host_port, const http_service_options *opts,
                      http_serve_fn fn, void *arg, char *err, size_t errlen);
/* Stops taking requests (later ones get 503), waits for the requests a
 * quick function took to be answered, answers the queued ones with 503,
 * waits for calls of fn in progress, joins the workers and stops
 * listening. Accepts NULL. */
void http_service_close(http_service *s);

#endif
