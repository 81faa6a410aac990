/*
 * http_service.c: http_service.h on libmicrohttpd.
 *
 * One MHD polling thread (epoll) reads and parses. A request's life, in
 * its per-request context (mreq, MHD's con_cls):
 *
 *   R_READING --body read, path ok--> R_WAITING (suspended) --answer()--> R_ANSWERED
 *                                       quick's callback, or a worker    (resumed: MHD
 *                                                                         sends it)
 *
 * The listening socket is ours (listen_on), so that "Address in use" is
 * told apart from a bad address; MHD takes it over.
 */
#include "http_service.h"

#include <errno.h>
#include <netdb.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/lapse_err.h"
#include "rpc_frame.h"

typedef struct mreq mreq;

struct http_request {
    struct MHD_Connection *conn;
    const char *method;
    const char *uri;
    buf body;
};

struct http_pending {
    mreq *r;
};

typedef enum { R_READING, R_WAITING, R_ANSWERED } rstate;

struct mreq {
    http_service *s;
    http_request req;
    http_pending pend;
    rstate state;
    int too_big;
    http_response res; /* once answered */
    mreq *next;        /* on the workers' queue */
};

struct http_service {
    struct MHD_Daemon *d;
    const char *path;
    size_t max_body;
    const char *reject_body; /* the 400's body: the option's, or a plain text */
    http_serve_fn fn;
    http_quick_fn quick;
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv, done_cv;
    mreq *head, *tail;
    size_t queued, max_queued, pending;
    int closed;
    pthread_t *threads;
    int nthreads;
    /* With an owner's loop (http_service_options.watch): MHD's epoll
     * descriptor is watched there and MHD_run runs on its thread. */
    void (*unwatch)(void *loop, int fd);
    void *loop;
    int epoll_fd; /* watched; -1: MHD's own thread */
    int kick_fd;  /* an eventfd, watched: an answer was given (MHD_run must follow a
                     resume; MHD's epoll descriptor does not report it here) */
    int kick_watched;
    atomic_int kicked; /* kick_fd written since run_on_loop last ran: one write a round */
};

const char *http_request_method(const http_request *r)
{
    return r->method;
}

const char *http_request_uri(const http_request *r)
{
    return r->uri;
}

const char *http_request_header(const http_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

void http_request_body(const http_request *r, const void **data, size_t *len)
{
    *data = r->body.len > 0 ? r->body.data : NULL;
    *len = r->body.len;
}

/* Sets r's answer and resumes its connection (MHD sends it). */
static void answer(mreq *r, http_response *res)
{
    r->res = *res;
    if (r->res.status < 100 || r->res.status > 599) {
        r->res.status = 500;
    }
    http_service *s = r->s; /* r may be gone once resumed */
    r->state = R_ANSWERED;
    MHD_resume_connection(r->req.conn);
    if (s->kick_fd >= 0 && atomic_exchange(&s->kicked, 1) == 0) {
        rpc_frame_wake(s->kick_fd);
    }
}

static void answer_text(mreq *r, int status, const char *text)
{
    http_response res = {.status = status};
    snprintf(res.content_type, sizeof res.content_type, "text/plain; charset=utf-8");
    buf_init(&res.body);
    (void)buf_append(&res.body, text, strlen(text));
    answer(r, &res);
}

static void enqueue(http_service *s, mreq *r)
{
    pthread_mutex_lock(&s->mu);
    if (s->closed || s->queued >= s->max_queued) {
        pthread_mutex_unlock(&s->mu);
        answer_text(r, 503, "service unavailable\n");
        return;
    }
    r->next = NULL;
    *(s->tail != NULL ? &s->tail->next : &s->head) = r;
    s->tail = r;
    s->queued++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Counts a request the quick function took as answered (or handed on):
 * http_service_close waits for none to be left. */
static void pending_done(http_service *s)
{
    pthread_mutex_lock(&s->mu);
    if (--s->pending == 0) {
        pthread_cond_broadcast(&s->done_cv);
    }
    pthread_mutex_unlock(&s->mu);
}

void http_pending_reply(http_pending *p, http_response *res)
{
    http_service *s = p->r->s;
    answer(p->r, res);
    pending_done(s);
}

void http_pending_to_worker(http_pending *p)
{
    http_service *s = p->r->s;
    enqueue(s, p->r);
    pending_done(s);
}

const http_request *http_pending_request(const http_pending *p)
{
    return &p->r->req;
}

static void *worker(void *arg)
{
    http_service *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->head == NULL && !s->closed) {
            pthread_cond_wait(&s->cv, &s->mu);
        }
        mreq *r = s->head;
        if (r == NULL) {
            break;
        }
        s->head = r->next;
        if (s->head == NULL) {
            s->tail = NULL;
        }
        s->queued--;
        int closing = s->closed;
        pthread_mutex_unlock(&s->mu);
        if (closing) {
            answer_text(r, 503, "service unavailable\n");
        } else {
            http_response res = {.status = 200};
            snprintf(res.content_type, sizeof res.content_type, "application/octet-stream");
            buf_init(&res.body);
            s->fn(s->arg, &r->req, &res);
            answer(r, &res);
        }
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static enum MHD_Result queue_answer(struct MHD_Connection *conn, mreq *r)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(r->res.body.len, r->res.body.data, MHD_RESPMEM_MUST_COPY);
    if (resp == NULL) {
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->res.content_type);
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)r->res.status, resp);
    MHD_destroy_response(resp);
    buf_fini(&r->res.body);
    return ok;
}

static enum MHD_Result queue_static(struct MHD_Connection *conn, int status, const char *text)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (resp == NULL) {
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ok;
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls)
{
    http_service *s = cls;
    (void)version;
    mreq *r = *con_cls;
    if (r == NULL) {
        if ((r = calloc(1, sizeof *r)) == NULL) {
            return MHD_NO;
        }
        r->s = s;
        r->req = (http_request){.conn = conn, .method = method, .uri = url};
        buf_init(&r->req.body);
        r->pend.r = r;
        *con_cls = r;
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl != NULL && strtoull(cl, NULL, 10) > s->max_body) {
            /* Refused before its body is read; MHD closes the connection
             * after this answer, the body unread. */
            r->too_big = 1;
            return queue_static(conn, 400, s->reject_body);
        }
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (!r->too_big && r->req.body.len + *upload_size > s->max_body) {
            r->too_big = 1;
        }
        if (!r->too_big && buf_append(&r->req.body, upload, *upload_size) != 0) {
            r->too_big = 1;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->state == R_ANSWERED) {
        return queue_answer(conn, r);
    }
    if (r->state == R_WAITING) {
        return MHD_YES; /* resumed spuriously */
    }
    if (r->too_big) {
        return queue_static(conn, 400, s->reject_body);
    }
    if (strcmp(url, s->path) != 0) {
        return queue_static(conn, 404, "not found\n");
    }
    r->state = R_WAITING;
    MHD_suspend_connection(conn);
    if (s->quick != NULL) {
        pthread_mutex_lock(&s->mu);
        int closed = s->closed;
        s->pending += !closed;
        pthread_mutex_unlock(&s->mu);
        if (!closed) {
            if (s->quick(s->arg, &r->req, &r->pend)) {
                return MHD_YES;
            }
            pending_done(s);
        }
    }
    enqueue(s, r);
    return MHD_YES;
}

static void completed_cb(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)conn, (void)toe;
    mreq *r = *con_cls;
    if (r != NULL) {
        buf_fini(&r->req.body);
        buf_fini(&r->res.body);
        free(r);
        *con_cls = NULL;
    }
}

/* A listening socket on host_port ("host:port"), or -1 with err set and
 * *rv LAPSE_EINVAL (bad address) or LAPSE_EUNAVAILABLE ("Address in use"). */
static int listen_on(const char *host_port, int *ipv6, int *rv, char *err, size_t errlen)
{
    char host[256];
    const char *colon = host_port != NULL ? strrchr(host_port, ':') : NULL;
    size_t hl = colon != NULL ? (size_t)(colon - host_port) : 0;
    if (colon == NULL || hl >= sizeof host || colon[1] == '\0' || strchr(host_port, '/') != NULL) {
        snprintf(err, errlen, "bad HTTP listen address %s", host_port ? host_port : "(null)");
        *rv = LAPSE_EINVAL;
        return -1;
    }
    if (hl >= 2 && host_port[0] == '[' && host_port[hl - 1] == ']') {
        memcpy(host, host_port + 1, hl - 2);
        host[hl - 2] = '\0';
    } else {
        memcpy(host, host_port, hl);
        host[hl] = '\0';
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai = NULL;
    if (getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &ai) != 0 || ai == NULL) {
        snprintf(err, errlen, "bad HTTP listen address %s", host_port);
        *rv = LAPSE_EINVAL;
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        snprintf(err, errlen, "cannot listen on %s: %s", host_port,
                 e == EADDRINUSE ? "Address in use" : strerror(e));
        *rv = e == EADDRINUSE ? LAPSE_EUNAVAILABLE : LAPSE_EINVAL;
        if (fd >= 0) {
            close(fd);
        }
        freeaddrinfo(ai);
        return -1;
    }
    *ipv6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    return fd;
}

/* The owner's loop found MHD's epoll descriptor readable: serve what is
 * ready. MHD keeps connections it has more to do for on a list of its own
 * that the descriptor does not report again; MHD_get_timeout says 0 while
 * any is left. */
static void run_on_loop(void *arg)
{
    http_service *s = arg;
    if (atomic_exchange(&s->kicked, 0)) { /* before MHD_run: a later answer kicks again */
        rpc_frame_wake_drain(s->kick_fd);
    }
    for (int round = 1;; round++) {
        MHD_UNSIGNED_LONG_LONG left;
        if (MHD_run(s->d) != MHD_YES || MHD_get_timeout(s->d, &left) != MHD_YES || left != 0) {
            return;
        }
        if (round == 64) { /* the loop's other descriptors get their turn first */
            atomic_store(&s->kicked, 1);
            rpc_frame_wake(s->kick_fd);
            return;
        }
    }
}

int http_service_open(http_service **out, const char *host_port, const http_service_options *opts,
                      http_serve_fn fn, void *arg, char *err, size_t errlen)
{
    *out = NULL;
    if (opts == NULL || opts->path == NULL || opts->path[0] != '/' || fn == NULL ||
        opts->workers < 0) {
        snprintf(err, errlen, "bad HTTP listen address %s or options",
                 host_port ? host_port : "(null)");
        return LAPSE_EINVAL;
    }
    int rv = 0, ipv6 = 0;
    int fd = listen_on(host_port, &ipv6, &rv, err, errlen);
    if (fd < 0) {
        return rv;
    }
    http_service *s = calloc(1, sizeof *s);
    if (s == NULL) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    s->epoll_fd = -1;
    s->kick_fd = -1;
    s->path = opts->path;
    s->max_body = opts->max_body;
    s->reject_body = opts->reject_body != NULL ? opts->reject_body : "body too large\n";
    s->fn = fn;
    s->quick = opts->quick;
    s->arg = arg;
    s->max_queued = opts->max_queued ? opts->max_queued : 1024;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    int n = opts->workers ? opts->workers : 4;
    s->threads = calloc((size_t)n, sizeof *s->threads);
    for (; s->threads != NULL && s->nthreads < n; s->nthreads++) {
        if (pthread_create(&s->threads[s->nthreads], NULL, worker, s) != 0) {
            break;
        }
    }
    if (s->nthreads < n) {
        close(fd);
        snprintf(err, errlen, "cannot start worker threads");
        http_service_close(s);
        return LAPSE_ENOMEM;
    }
    s->d =
        MHD_start_daemon((opts->watch == NULL ? MHD_USE_INTERNAL_POLLING_THREAD : 0) |
                             MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | (ipv6 ? MHD_USE_IPv6 : 0),
                         0, NULL, NULL, access_cb, s, MHD_OPTION_LISTEN_SOCKET, fd,
                         MHD_OPTION_NOTIFY_COMPLETED, completed_cb, s, MHD_OPTION_END);
    if (s->d == NULL) {
        close(fd);
        snprintf(err, errlen, "cannot serve HTTP on %s", host_port);
        http_service_close(s);
        return LAPSE_ENOMEM;
    }
    if (opts->watch != NULL) {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_EPOLL_FD);
        s->unwatch = opts->unwatch;
        s->loop = opts->loop;
        s->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        s->kick_watched =
            s->kick_fd >= 0 && opts->watch(opts->loop, s->kick_fd, run_on_loop, s) == 0;
        if (!s->kick_watched || di == NULL ||
            opts->watch(opts->loop, di->epoll_fd, run_on_loop, s) != 0) {
            snprintf(err, errlen, "cannot serve HTTP on %s: the loop refused its descriptors",
                     host_port);
            http_service_close(s);
            return LAPSE_ENOMEM;
        }
        s->epoll_fd = di->epoll_fd;
    }
    *out = s;
    return 0;
}

void http_service_close(http_service *s)
{
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->closed = 1;
    pthread_cond_broadcast(&s->cv);
    while (s->pending > 0) {
        pthread_cond_wait(&s->done_cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->nthreads; i++) {
        pthread_join(s->threads[i], NULL);
    }
    free(s->threads);
    if (s->epoll_fd >= 0) {
        s->unwatch(s->loop, s->epoll_fd); /* no MHD_run after these two */
    }
    if (s->kick_watched) {
        s->unwatch(s->loop, s->kick_fd);
    }
    if (s->kick_fd >= 0) {
        close(s->kick_fd);
    }
    if (s->d != NULL) {
        MHD_stop_daemon(s->d);
    }
    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
