/*
 * http.c: http.h on NNG 1.5's HTTP server (nng/supplemental/http/http.h).
 *
 * NNG shares one nng_http_server per host:port within a process and finalizes
 * it asynchronously, and a handler callback may still be running while the
 * server is being stopped. So the state the callback needs (fn, arg, content
 * type) lives in a separately reference-counted struct handler_state: one
 * reference belongs to the http_server, one to the NNG handler (dropped by the
 * handler's destructor, which NNG runs when its last reference to the handler
 * goes). http_server_close marks the state closed and waits until no call of
 * fn is in progress, so fn and arg are never used after close returns; a
 * request that arrives later gets 503 without calling fn.
 */
#include "http.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "http_nng.h"

typedef struct handler_state {
    pthread_mutex_t mu;
    pthread_cond_t idle; /* signalled when inflight drops to 0 after closing */
    int refs;            /* owner + NNG handler; freed at 0 (under mu) */
    int closed;          /* set by http_server_close: fn is not called again */
    int inflight;        /* calls of fn in progress */
    http_get_fn fn;
    void *arg;
    char *content_type;
} handler_state;

struct http_server {
    http_nng nng;      /* NNG's server and our handler on it */
    int st_ready;      /* st's mutex and condvar are initialized */
    handler_state *st; /* our reference */
};

static void state_unref(void *arg)
{
    handler_state *st = arg;
    if (st == NULL) {
        return;
    }
    pthread_mutex_lock(&st->mu);
    int last = --st->refs == 0;
    pthread_mutex_unlock(&st->mu);
    if (last) {
        pthread_cond_destroy(&st->idle);
        pthread_mutex_destroy(&st->mu);
        free(st->content_type);
        free(st);
    }
}

static void handle_get(nng_aio *aio)
{
    nng_http_handler *h = nng_aio_get_input(aio, 1);
    handler_state *st = nng_http_handler_get_data(h);

    pthread_mutex_lock(&st->mu);
    if (st->closed) {
        pthread_mutex_unlock(&st->mu);
        static const char msg[] = "closing\n";
        http_nng_reply(aio, NNG_HTTP_STATUS_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", msg,
                       sizeof msg - 1);
        return;
    }
    st->inflight++;
    pthread_mutex_unlock(&st->mu);

    buf body;
    buf_init(&body);
    int rv = st->fn(st->arg, &body);
    if (rv == 0) {
        http_nng_reply(aio, NNG_HTTP_STATUS_OK, st->content_type, body.data, body.len);
    } else {
        char msg[128];
        int n = snprintf(msg, sizeof msg, "error: %s\n", lapse_strerror(rv));
        http_nng_reply(aio, NNG_HTTP_STATUS_INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8", msg,
                       (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    }
    buf_fini(&body);

    pthread_mutex_lock(&st->mu);
    if (--st->inflight == 0 && st->closed) {
        pthread_cond_broadcast(&st->idle);
    }
    pthread_mutex_unlock(&st->mu);
}

/* host_port must be HOST:PORT with a non-empty host (an IPv6 address in
 * brackets) and a decimal port 0..65535. */
static int valid_host_port(const char *hp)
{
    const char *colon = strrchr(hp, ':');
    if (colon == NULL || colon == hp || colon[1] == '\0') {
        return 0;
    }
    if (hp[0] == '[' && colon[-1] != ']') {
        return 0;
    }
    for (const char *p = hp; p < colon; p++) {
        if (*p == '/' || *p == '?' || *p == '#' || *p == '@' || *p == ' ') {
            return 0;
        }
    }
    long port = 0;
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9' || (port = port * 10 + (*p - '0')) > 65535) {
            return 0;
        }
    }
    return 1;
}

int http_server_open(http_server **out, const char *host_port, const char *path,
                     const char *content_type, http_get_fn fn, void *arg, char *err, size_t errlen)
{
    int rv = 0;
    int nrv = 0;
    const char *what = "";
    http_server *s = NULL;
    char urltext[300];

    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (host_port == NULL || path == NULL || path[0] != '/' || content_type == NULL || fn == NULL ||
        !valid_host_port(host_port) ||
        (size_t)snprintf(urltext, sizeof urltext, "http://%s", host_port) >= sizeof urltext) {
        if (err != NULL) {
            snprintf(err, errlen, "bad HTTP listen address %s or path %s",
                     host_port ? host_port : "(null)", path ? path : "(null)");
        }
        return LAPSE_EINVAL;
    }

    if ((s = calloc(1, sizeof *s)) == NULL || (s->st = calloc(1, sizeof *s->st)) == NULL) {
        rv = LAPSE_ENOMEM;
        what = "out of memory";
        goto fail;
    }
    handler_state *st = s->st;
    if ((st->content_type = strdup(content_type)) == NULL) {
        rv = LAPSE_ENOMEM;
        what = "out of memory";
        goto fail;
    }
    st->refs = 1;
    st->fn = fn;
    st->arg = arg;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->idle, NULL);
    s->st_ready = 1;

    http_nng_opts o = {.path = path, .cb = handle_get, .method = "GET"};
    if ((nrv = http_nng_open(&s->nng, urltext, &o, st, state_unref, &st->refs, &what)) != 0) {
        goto fail;
    }
    *out = s;
    return 0;

fail:
    rv = http_nng_fail(rv, nrv, host_port, what, err, errlen);
    http_server_close(s);
    return rv;
}

void http_server_close(http_server *s)
{
    if (s == NULL) {
        return;
    }
    handler_state *st = s->st;
    if (s->st_ready) {
        /* No new call of fn from here on; wait out the ones in progress. */
        pthread_mutex_lock(&st->mu);
        st->closed = 1;
        while (st->inflight > 0) {
            pthread_cond_wait(&st->idle, &st->mu);
        }
        pthread_mutex_unlock(&st->mu);
    }
    http_nng_close(&s->nng);
    if (st != NULL) {
        if (s->st_ready) {
            state_unref(st);
        } else {
            free(st->content_type); /* never initialized further */
            free(st);
        }
    }
    free(s);
}
