/*
 * http_service.c: http_service.h on NNG 1.5's HTTP server.
 *
 * As in http.c, the state the NNG handler needs lives in a reference-counted
 * struct svc_state (one reference for the http_service, one for NNG's
 * handler, dropped by the handler's destructor), because NNG may still call
 * the handler while the server is being stopped and frees the handler
 * asynchronously.
 *
 * A request's life:
 *
 *   handle() on an NNG thread --queue--> worker thread: fn, reply() --> NNG writes it
 *        | full or closing                   | closing (queued before close)
 *        v                                   v
 *       503                                 503
 *
 * NNG calls nni_aio_begin on the handler's aio before calling it, so the
 * connection cannot be reaped while a worker still holds the aio: reaping
 * waits for the aio to finish (NNG http_server.c, http_sconn_rxdone).
 */
#include "http_service.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "../common/lapse_err.h"

struct http_request {
    nng_http_req *req; /* NNG's, valid until the aio finishes */
};

typedef struct job {
    nng_aio *aio; /* the handler's aio: finishing it sends the response */
    struct job *next;
} job;

typedef struct svc_state {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled on a new job and on close */
    int refs;          /* owner + NNG handler; freed at 0 (under mu) */
    int closed;        /* set by http_service_close: nothing more is queued */
    job *head, *tail;  /* FIFO of requests waiting for a worker */
    size_t queued;     /* jobs in the FIFO */
    size_t max_queued;
    http_serve_fn fn;
    void *arg;
} svc_state;

struct http_service {
    nng_http_server *srv;      /* our hold on NNG's server; NULL when none */
    nng_http_handler *handler; /* NULL when not allocated */
    int registered;            /* handler added to srv */
    int started;               /* nng_http_server_start succeeded */
    int st_ready;              /* st's mutex and condvar are initialized */
    svc_state *st;             /* our reference */
    pthread_t *threads;        /* nthreads workers, running */
    int nthreads;
};

static void state_unref(void *arg)
{
    svc_state *st = arg;
    if (st == NULL) {
        return;
    }
    pthread_mutex_lock(&st->mu);
    int last = --st->refs == 0;
    pthread_mutex_unlock(&st->mu);
    if (last) {
        pthread_cond_destroy(&st->cv);
        pthread_mutex_destroy(&st->mu);
        free(st);
    }
}

/* Sends a response; the aio completes either way (on failure NNG closes the
 * connection). */
static void reply(nng_aio *aio, uint16_t status, const char *ctype, const void *body, size_t len)
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

static void reply_unavailable(nng_aio *aio)
{
    static const char msg[] = "service unavailable\n";
    reply(aio, NNG_HTTP_STATUS_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", msg,
          sizeof msg - 1);
}

/* The NNG handler: never blocks beyond the queue's mutex. */
static void handle(nng_aio *aio)
{
    nng_http_handler *h = nng_aio_get_input(aio, 1);
    svc_state *st = nng_http_handler_get_data(h);
    job *j = malloc(sizeof *j);

    pthread_mutex_lock(&st->mu);
    if (j == NULL || st->closed || st->queued >= st->max_queued) {
        pthread_mutex_unlock(&st->mu);
        free(j);
        reply_unavailable(aio);
        return;
    }
    j->aio = aio;
    j->next = NULL;
    if (st->tail != NULL) {
        st->tail->next = j;
    } else {
        st->head = j;
    }
    st->tail = j;
    st->queued++;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

static void serve(svc_state *st, nng_aio *aio)
{
    http_request req = {.req = nng_aio_get_input(aio, 0)};
    http_response res = {.status = 200};
    snprintf(res.content_type, sizeof res.content_type, "application/octet-stream");
    buf_init(&res.body);
    st->fn(st->arg, &req, &res);
    if (res.status < 100 || res.status > 599) {
        res.status = 500; /* a bug in fn; still an answer */
    }
    reply(aio, (uint16_t)res.status, res.content_type, res.body.data, res.body.len);
    buf_fini(&res.body);
}

/* A worker: runs fn for queued requests until the service closes; jobs
 * still queued then get 503. */
static void *worker(void *arg)
{
    svc_state *st = arg;
    pthread_mutex_lock(&st->mu);
    for (;;) {
        while (st->head == NULL && !st->closed) {
            pthread_cond_wait(&st->cv, &st->mu);
        }
        job *j = st->head;
        if (j == NULL) {
            break; /* closed and drained */
        }
        st->head = j->next;
        if (st->head == NULL) {
            st->tail = NULL;
        }
        st->queued--;
        int closing = st->closed;
        pthread_mutex_unlock(&st->mu);
        if (closing) {
            reply_unavailable(j->aio);
        } else {
            serve(st, j->aio);
        }
        free(j);
        pthread_mutex_lock(&st->mu);
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

const char *http_request_method(const http_request *r)
{
    return nng_http_req_get_method(r->req);
}

const char *http_request_header(const http_request *r, const char *name)
{
    return nng_http_req_get_header(r->req, name);
}

void http_request_body(const http_request *r, const void **data, size_t *len)
{
    void *p = NULL;
    size_t n = 0;
    nng_http_req_get_data(r->req, &p, &n);
    *data = n > 0 ? p : NULL;
    *len = n;
}

static int map_nng(int rv)
{
    switch (rv) {
    case NNG_ENOMEM:
        return LAPSE_ENOMEM;
    case NNG_EINVAL:
    case NNG_EADDRINVAL:
        return LAPSE_EINVAL;
    default:
        return LAPSE_EUNAVAILABLE; /* NNG_EADDRINUSE, NNG_EPERM, ... */
    }
}

int http_service_open(http_service **out, const char *host_port, const http_service_options *opts,
                      http_serve_fn fn, void *arg, char *err, size_t errlen)
{
    int rv = 0;
    int nrv = 0;
    const char *what = "";
    nng_url *url = NULL;
    http_service *s = NULL;
    char urltext[300];

    *out = NULL;
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (host_port == NULL || strchr(host_port, ':') == NULL || strchr(host_port, '/') != NULL ||
        opts == NULL || opts->path == NULL || opts->path[0] != '/' || fn == NULL ||
        opts->workers < 0 ||
        (size_t)snprintf(urltext, sizeof urltext, "http://%s", host_port) >= sizeof urltext) {
        if (err != NULL) {
            snprintf(err, errlen, "bad HTTP listen address %s or options",
                     host_port ? host_port : "(null)");
        }
        return LAPSE_EINVAL;
    }

    if ((s = calloc(1, sizeof *s)) == NULL || (s->st = calloc(1, sizeof *s->st)) == NULL) {
        rv = LAPSE_ENOMEM;
        what = "out of memory";
        goto fail;
    }
    svc_state *st = s->st;
    st->refs = 1;
    st->fn = fn;
    st->arg = arg;
    st->max_queued = opts->max_queued ? opts->max_queued : 1024;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    s->st_ready = 1;

    int n = opts->workers ? opts->workers : 4;
    if ((s->threads = calloc((size_t)n, sizeof *s->threads)) == NULL) {
        rv = LAPSE_ENOMEM;
        what = "out of memory";
        goto fail;
    }
    for (; s->nthreads < n; s->nthreads++) {
        if (pthread_create(&s->threads[s->nthreads], NULL, worker, st) != 0) {
            rv = LAPSE_ENOMEM;
            what = "cannot start worker threads";
            goto fail;
        }
    }

    what = "parse URL";
    if ((nrv = nng_url_parse(&url, urltext)) != 0) {
        goto nng_fail;
    }
    what = "create server";
    if ((nrv = nng_http_server_hold(&s->srv, url)) != 0) {
        goto nng_fail;
    }
    if (opts->reject_body != NULL) {
        what = "set the 400 page";
        if ((nrv = nng_http_server_set_error_page(s->srv, NNG_HTTP_STATUS_BAD_REQUEST,
                                                  opts->reject_body)) != 0) {
            goto nng_fail;
        }
    }
    what = "create handler";
    if ((nrv = nng_http_handler_alloc(&s->handler, opts->path, handle)) != 0 ||
        (nrv = nng_http_handler_set_method(s->handler, NULL)) != 0 ||
        (nrv = nng_http_handler_collect_body(s->handler, true, opts->max_body)) != 0) {
        goto nng_fail;
    }
    st->refs++; /* the handler's reference, dropped by its destructor */
    if ((nrv = nng_http_handler_set_data(s->handler, st, state_unref)) != 0) {
        st->refs--;
        goto nng_fail;
    }
    what = "register handler";
    if ((nrv = nng_http_server_add_handler(s->srv, s->handler)) != 0) {
        goto nng_fail;
    }
    s->registered = 1;
    what = "listen";
    if ((nrv = nng_http_server_start(s->srv)) != 0) {
        goto nng_fail;
    }
    s->started = 1;
    nng_url_free(url);
    *out = s;
    return 0;

nng_fail:
    rv = map_nng(nrv);
    if (err != NULL) {
        snprintf(err, errlen, "HTTP server on %s: %s: %s", host_port, what, nng_strerror(nrv));
    }
    nng_url_free(url);
    http_service_close(s);
    return rv;
fail:
    if (err != NULL) {
        snprintf(err, errlen, "HTTP server on %s: %s", host_port, what);
    }
    http_service_close(s);
    return rv;
}

void http_service_close(http_service *s)
{
    if (s == NULL) {
        return;
    }
    svc_state *st = s->st;
    if (s->st_ready) {
        pthread_mutex_lock(&st->mu);
        st->closed = 1;
        pthread_cond_broadcast(&st->cv);
        pthread_mutex_unlock(&st->mu);
    }
    /* Workers answer what is queued (503) and exit; no call of fn is in
     * progress once they are joined. */
    for (int i = 0; i < s->nthreads; i++) {
        pthread_join(s->threads[i], NULL);
    }
    free(s->threads);
    if (s->handler != NULL) {
        if (!s->registered || nng_http_server_del_handler(s->srv, s->handler) == 0) {
            nng_http_handler_free(s->handler);
        }
    }
    if (s->srv != NULL) {
        if (s->started) {
            nng_http_server_stop(s->srv);
        }
        nng_http_server_release(s->srv);
    }
    if (st != NULL) {
        if (s->st_ready) {
            state_unref(st);
        } else {
            free(st);
        }
    }
    free(s);
}
