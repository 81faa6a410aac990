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
 *   handle() on an NNG thread --queue--> worker: fn, http_nng_reply() --> NNG writes it
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

#include "../common/lapse_err.h"
#include "http_nng.h"

struct http_request {
    nng_http_req *req; /* NNG's, valid until the aio finishes */
};

typedef struct job {
    nng_aio *aio; /* the handler's aio: finishing it sends the response */
    struct job *next;
} job;

typedef struct svc_state svc_state;

struct http_pending {
    nng_aio *aio; /* the handler's aio, as a job's */
    http_request req;
    svc_state *st; /* alive while pending > 0 (http_service_close waits) */
};

struct svc_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* signalled on a new job and on close */
    pthread_cond_t done_cv; /* signalled when pending falls */
    size_t pending;         /* requests a quick function took, not answered yet */
    http_quick_fn quick;
    int refs;         /* owner + NNG handler; freed at 0 (under mu) */
    int closed;       /* set by http_service_close: nothing more is queued */
    job *head, *tail; /* FIFO of requests waiting for a worker */
    size_t queued;    /* jobs in the FIFO */
    size_t max_queued;
    http_serve_fn fn;
    void *arg;
};

struct http_service {
    http_nng nng;       /* NNG's server and our handler on it */
    int st_ready;       /* st's mutex and condvar are initialized */
    svc_state *st;      /* our reference */
    pthread_t *threads; /* nthreads workers, running */
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
        pthread_cond_destroy(&st->done_cv);
        pthread_cond_destroy(&st->cv);
        pthread_mutex_destroy(&st->mu);
        free(st);
    }
}

static void reply_unavailable(nng_aio *aio)
{
    static const char msg[] = "service unavailable\n";
    http_nng_reply(aio, NNG_HTTP_STATUS_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", msg,
                   sizeof msg - 1);
}

/* Queues aio for a worker, or answers 503 when the queue is full or the
 * service is closing. REQUIRES: st->mu held; released on return. */
static void enqueue_locked(svc_state *st, nng_aio *aio)
{
    job *j = malloc(sizeof *j);
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

/* Counts p answered. REQUIRES: st->mu held. */
static void pending_done_locked(svc_state *st)
{
    if (--st->pending == 0) {
        pthread_cond_broadcast(&st->done_cv);
    }
}

/* Offers aio to the quick function; 1 when it took it. */
static int offer_quick(svc_state *st, nng_aio *aio)
{
    http_pending *p = malloc(sizeof *p);
    if (p == NULL) {
        return 0;
    }
    *p = (http_pending){.aio = aio, .req = {.req = nng_aio_get_input(aio, 0)}, .st = st};
    pthread_mutex_lock(&st->mu);
    if (st->closed) {
        pthread_mutex_unlock(&st->mu);
        free(p);
        return 0; /* the queue answers 503 */
    }
    st->pending++;
    pthread_mutex_unlock(&st->mu);
    if (st->quick(st->arg, &p->req, p)) {
        return 1;
    }
    pthread_mutex_lock(&st->mu);
    pending_done_locked(st);
    pthread_mutex_unlock(&st->mu);
    free(p);
    return 0;
}

/* The NNG handler: never blocks beyond the queue's mutex (and the quick
 * function, which must not block either). */
static void handle(nng_aio *aio)
{
    nng_http_handler *h = nng_aio_get_input(aio, 1);
    svc_state *st = nng_http_handler_get_data(h);
    if (st->quick != NULL && offer_quick(st, aio)) {
        return;
    }
    pthread_mutex_lock(&st->mu);
    enqueue_locked(st, aio);
}

static void send_response(nng_aio *aio, http_response *res)
{
    if (res->status < 100 || res->status > 599) {
        res->status = 500; /* a bug in fn; still an answer */
    }
    http_nng_reply(aio, (uint16_t)res->status, res->content_type, res->body.data, res->body.len);
    buf_fini(&res->body);
}

void http_pending_reply(http_pending *p, http_response *res)
{
    svc_state *st = p->st;
    send_response(p->aio, res);
    free(p);
    pthread_mutex_lock(&st->mu);
    pending_done_locked(st);
    pthread_mutex_unlock(&st->mu);
}

void http_pending_to_worker(http_pending *p)
{
    svc_state *st = p->st;
    nng_aio *aio = p->aio;
    free(p);
    pthread_mutex_lock(&st->mu);
    pending_done_locked(st); /* the queue answers it from here on */
    enqueue_locked(st, aio);
}

const http_request *http_pending_request(const http_pending *p)
{
    return &p->req;
}

static void serve(svc_state *st, nng_aio *aio)
{
    http_request req = {.req = nng_aio_get_input(aio, 0)};
    http_response res = {.status = 200};
    snprintf(res.content_type, sizeof res.content_type, "application/octet-stream");
    buf_init(&res.body);
    st->fn(st->arg, &req, &res);
    send_response(aio, &res);
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

const char *http_request_uri(const http_request *r)
{
    return nng_http_req_get_uri(r->req);
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

int http_service_open(http_service **out, const char *host_port, const http_service_options *opts,
                      http_serve_fn fn, void *arg, char *err, size_t errlen)
{
    int rv = 0;
    int nrv = 0;
    const char *what = "";
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
    st->quick = opts->quick;
    st->arg = arg;
    st->max_queued = opts->max_queued ? opts->max_queued : 1024;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    pthread_cond_init(&st->done_cv, NULL);
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

    http_nng_opts o = {.path = opts->path,
                       .cb = handle,
                       .method = NULL,
                       .collect_body = 1,
                       .max_body = opts->max_body,
                       .reject_body = opts->reject_body};
    if ((nrv = http_nng_open(&s->nng, urltext, &o, st, state_unref, &st->refs, &what)) != 0) {
        goto fail;
    }
    *out = s;
    return 0;

fail:
    rv = http_nng_fail(rv, nrv, host_port, what, err, errlen);
    http_service_close(s);
    return rv;
}

/* Shaped like http_server_close (http.c), but it stops workers rather than
 * waiting for inflight calls; the NNG part both share is http_nng_close. */
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
        /* Taken requests are answered, or handed to the queue (which
         * answers 503 now), before the workers go. */
        while (st->pending > 0) {
            pthread_cond_wait(&st->done_cv, &st->mu);
        }
        pthread_mutex_unlock(&st->mu);
    }
    /* Workers answer what is queued (503) and exit; no call of fn is in
     * progress once they are joined. */
    for (int i = 0; i < s->nthreads; i++) {
        pthread_join(s->threads[i], NULL);
    }
    free(s->threads);
    http_nng_close(&s->nng);
    if (st != NULL) {
        if (s->st_ready) {
            state_unref(st);
        } else {
            free(st);
        }
    }
    free(s);
}
