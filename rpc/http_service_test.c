/* http_service_test: the request/response HTTP service (http_service.h) over
 * loopback with a plain TCP client: a POST's method, headers and body reach
 * fn and its status, type and body come back; keep-alive serves two requests
 * on one connection; fn runs on the service's workers, so a blocked call does
 * not hold up another; a body over max_body gets NNG's 400 with reject_body
 * and fn is not called; close waits for a running fn and answers nothing
 * after; a quick function's taken requests are answered from another
 * thread or handed to the workers, and close waits for them. Every case
 * runs twice: on the service's own thread, then on an owner's loop
 * (http_service_options.watch), where the quick function must run on the
 * loop's thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "http_service.h"
#include "http_test_util.h"
#include "rpc_loop.h"

/* The owner's loop of the second group; NULL in the first. */
static rpc_loop *g_loop;

/* http_service_options.watch and unwatch on g_loop (the loop keeps the
 * watches), counting the descriptors watched. */
static int g_nwatches;

static int loop_watch(void *loop, int fd, void (*run)(void *), void *arg)
{
    int rv = rpc_loop_watch_fd(loop, fd, run, arg);
    g_nwatches += rv == 0;
    return rv;
}

static void loop_unwatch(void *loop, int fd)
{
    rpc_loop_unwatch_fd(loop, fd);
    g_nwatches--;
}

/* o on g_loop when there is one. */
static void on_loop(http_service_options *o)
{
    if (g_loop != NULL) {
        o->watch = loop_watch;
        o->unwatch = loop_unwatch;
        o->loop = g_loop;
    }
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        fail_msg("connect to port %d: %s", port, strerror(errno));
    }
    return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        assert_true(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

/* Reads one response (headers and a Content-Length body) from fd; caller
 * frees. Fails the test on a timeout (10 s). */
static char *read_response(int fd)
{
    buf b;
    buf_init(&b);
    char tmp[4096];
    for (;;) {
        const char *hdr_end = b.len ? strstr((char *)b.data, "\r\n\r\n") : NULL;
        if (hdr_end != NULL) {
            const char *cl = strcasestr((char *)b.data, "Content-Length:");
            size_t want = (size_t)(hdr_end + 4 - (char *)b.data) +
                          (cl && cl < hdr_end ? strtoul(cl + 15, NULL, 10) : 0);
            if (b.len >= want) {
                break;
            }
        }
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break; /* closed: what we have is the answer */
        }
        assert_int_equal(buf_append(&b, tmp, (size_t)r), 0);
    }
    return buf_detach(&b);
}

static void assert_status(const char *resp, int status)
{
    char want[32];
    snprintf(want, sizeof want, "HTTP/1.1 %d ", status);
    if (strncmp(resp, want, strlen(want)) != 0) {
        fail_msg("want %s, got:\n%s", want, resp);
    }
}

static const char *body_of(const char *resp)
{
    const char *p = strstr(resp, "\r\n\r\n");
    assert_non_null(p);
    return p + 4;
}

typedef struct fixture {
    pthread_mutex_t mu;
    int calls;
    int block;   /* fn waits while set (for the "slow" target) */
    int running; /* fn calls in progress */
} fixture;

static void serve(void *arg, const http_request *req, http_response *res)
{
    fixture *f = arg;
    const char *target = http_request_header(req, "x-amz-target"); /* any case */
    const void *body;
    size_t len;
    http_request_body(req, &body, &len);
    pthread_mutex_lock(&f->mu);
    f->calls++;
    f->running++;
    pthread_mutex_unlock(&f->mu);
    if (target != NULL && strcmp(target, "slow") == 0) {
        for (;;) {
            pthread_mutex_lock(&f->mu);
            int b = f->block;
            pthread_mutex_unlock(&f->mu);
            if (!b) {
                break;
            }
            struct timespec ts = {.tv_nsec = 5000000};
            nanosleep(&ts, NULL);
        }
    }
    res->status = 201;
    snprintf(res->content_type, sizeof res->content_type, "application/x-test");
    buf_printf(&res->body, "%s %s %zu:%.*s", http_request_method(req), target ? target : "-", len,
               (int)len, body ? (const char *)body : "");
    pthread_mutex_lock(&f->mu);
    f->running--;
    pthread_mutex_unlock(&f->mu);
}

static http_service *open_ok(int port, fixture *f, int workers)
{
    char hp[64], err[256];
    snprintf(hp, sizeof hp, "127.0.0.1:%d", port);
    http_service_options o = {
        .path = "/", .max_body = 1000, .workers = workers, .reject_body = "{\"refused\":true}"};
    on_loop(&o);
    http_service *s = NULL;
    int rv = http_service_open(&s, hp, &o, serve, f, err, sizeof err);
    if (rv != 0) {
        fail_msg("http_service_open: %s", err);
    }
    return s;
}

static char *post(int fd, const char *target, const char *body)
{
    char req[2048];
    int n = snprintf(req, sizeof req,
                     "POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: %s\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     target, strlen(body), body);
    send_all(fd, req, (size_t)n);
    return read_response(fd);
}

static void post_reaches_fn_with_headers_and_body_keep_alive(void **state)
{
    (void)state;
    fixture f = {.mu = PTHREAD_MUTEX_INITIALIZER};
    int port = http_test_free_port();
    http_service *s = open_ok(port, &f, 2);
    int fd = connect_to(port);
    char *r = post(fd, "Op.One", "{\"a\":1}");
    assert_status(r, 201);
    assert_non_null(strcasestr(r, "Content-Type: application/x-test"));
    assert_string_equal(body_of(r), "POST Op.One 7:{\"a\":1}");
    free(r);
    /* The same connection serves the next request. */
    r = post(fd, "Op.Two", "");
    assert_status(r, 201);
    assert_string_equal(body_of(r), "POST Op.Two 0:");
    free(r);
    close(fd);
    http_service_close(s);
    assert_int_equal(f.calls, 2);
}

static void body_over_max_gets_reject_body_without_fn(void **state)
{
    (void)state;
    fixture f = {.mu = PTHREAD_MUTEX_INITIALIZER};
    int port = http_test_free_port();
    http_service *s = open_ok(port, &f, 1);
    int fd = connect_to(port);
    const char req[] = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n";
    send_all(fd, req, sizeof req - 1);
    char *r = read_response(fd);
    assert_status(r, 400);
    assert_string_equal(body_of(r), "{\"refused\":true}");
    free(r);
    close(fd);
    /* Still serving. */
    fd = connect_to(port);
    r = post(fd, "after", "x");
    assert_status(r, 201);
    free(r);
    close(fd);
    http_service_close(s);
    assert_int_equal(f.calls, 1);
}

static void blocked_fn_does_not_hold_other_requests(void **state)
{
    (void)state;
    fixture f = {.mu = PTHREAD_MUTEX_INITIALIZER, .block = 1};
    int port = http_test_free_port();
    http_service *s = open_ok(port, &f, 2);
    int slow = connect_to(port);
    const char req[] = "POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: slow\r\n"
                       "Content-Length: 0\r\n\r\n";
    send_all(slow, req, sizeof req - 1);
    /* Wait (bounded) until the slow call is running, then another request
     * must complete while it still blocks. */
    for (int i = 0;; i++) {
        pthread_mutex_lock(&f.mu);
        int running = f.running;
        pthread_mutex_unlock(&f.mu);
        if (running == 1) {
            break;
        }
        assert_true(i < 2000);
        struct timespec ts = {.tv_nsec = 5000000};
        nanosleep(&ts, NULL);
    }
    int fast = connect_to(port);
    char *r = post(fast, "fast", "");
    assert_status(r, 201);
    free(r);
    close(fast);
    pthread_mutex_lock(&f.mu);
    assert_int_equal(f.running, 1); /* the slow one still blocks */
    f.block = 0;
    pthread_mutex_unlock(&f.mu);
    r = read_response(slow);
    assert_status(r, 201);
    assert_string_equal(body_of(r), "POST slow 0:");
    free(r);
    close(slow);
    http_service_close(s);
}

static void *unblock_later(void *arg)
{
    fixture *f = arg;
    struct timespec ts = {.tv_nsec = 100000000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&f->mu);
    f->block = 0;
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static void close_waits_for_running_fn_then_refuses(void **state)
{
    (void)state;
    fixture f = {.mu = PTHREAD_MUTEX_INITIALIZER, .block = 1};
    int port = http_test_free_port();
    http_service *s = open_ok(port, &f, 1);
    int slow = connect_to(port);
    const char req[] = "POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: slow\r\n"
                       "Content-Length: 0\r\n\r\n";
    send_all(slow, req, sizeof req - 1);
    for (int i = 0;; i++) {
        pthread_mutex_lock(&f.mu);
        int running = f.running;
        pthread_mutex_unlock(&f.mu);
        if (running == 1) {
            break;
        }
        assert_true(i < 2000);
        struct timespec ts = {.tv_nsec = 5000000};
        nanosleep(&ts, NULL);
    }
    /* Unblock 100 ms after close starts; close must not return before. */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, unblock_later, &f), 0);
    http_service_close(s);
    pthread_mutex_lock(&f.mu);
    assert_int_equal(f.running, 0);
    assert_int_equal(f.block, 0); /* close returned only after fn was let go */
    pthread_mutex_unlock(&f.mu);
    pthread_join(t, NULL);
    close(slow);
    /* Nothing listens any more. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_not_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    close(fd);
}

/* ---- a quick function (http_quick_fn) ---- */

typedef struct later {
    fixture *f;
    http_pending *p;
    int to_worker;
    int delay_ms;
    char body[64];
} later;

enum { MAX_LATER = 8 };
static later g_later[MAX_LATER];
static pthread_t g_later_th[MAX_LATER];
static int g_nlater, g_replied;

/* Answers a taken request from another thread after delay_ms: itself, or
 * by handing it to the workers. */
static void *answer_later(void *arg)
{
    later *l = arg;
    struct timespec ts = {.tv_nsec = (long)l->delay_ms * 1000000L};
    nanosleep(&ts, NULL);
    if (l->to_worker) {
        http_pending_to_worker(l->p);
        return NULL;
    }
    http_response res = {.status = 202};
    snprintf(res.content_type, sizeof res.content_type, "application/x-later");
    buf_init(&res.body);
    buf_printf(&res.body, "later %s", l->body);
    pthread_mutex_lock(&l->f->mu);
    g_replied++;
    pthread_mutex_unlock(&l->f->mu);
    http_pending_reply(l->p, &res);
    return NULL;
}

/* Takes "quick-later" (answered by another thread 50 ms later, or as long
 * as the body says, in ms) and "quick-worker" (handed to the workers);
 * leaves everything else to fn. */
static int quick(void *arg, const http_request *req, http_pending *p)
{
    fixture *f = arg;
    const char *target = http_request_header(req, "X-Amz-Target");
    if (target == NULL || strncmp(target, "quick-", 6) != 0 || g_nlater == MAX_LATER) {
        return 0;
    }
    assert_ptr_equal(http_pending_request(p), req);
    assert_true(g_loop == NULL || rpc_loop_on_thread(g_loop)); /* the server's thread */
    const void *body;
    size_t len;
    http_request_body(req, &body, &len);
    later *l = &g_later[g_nlater];
    *l = (later){.f = f, .p = p, .to_worker = strcmp(target, "quick-worker") == 0, .delay_ms = 50};
    snprintf(l->body, sizeof l->body, "%.*s", (int)len, body ? (const char *)body : "");
    if (len > 0 && atoi(l->body) > 0) {
        l->delay_ms = atoi(l->body);
    }
    assert_int_equal(pthread_create(&g_later_th[g_nlater], NULL, answer_later, l), 0);
    g_nlater++;
    return 1;
}

static http_service *open_quick(int port, fixture *f)
{
    char hp[64], err[256];
    snprintf(hp, sizeof hp, "127.0.0.1:%d", port);
    http_service_options o = {.path = "/", .max_body = 1000, .workers = 1, .quick = quick};
    on_loop(&o);
    http_service *s = NULL;
    if (http_service_open(&s, hp, &o, serve, f, err, sizeof err) != 0) {
        fail_msg("http_service_open: %s", err);
    }
    return s;
}

static void quick_function_answers_later_or_hands_to_workers(void **state)
{
    (void)state;
    fixture f = {.mu = PTHREAD_MUTEX_INITIALIZER};
    g_nlater = g_replied = 0;
    int port = http_test_free_port();
    http_service *s = open_quick(port, &f);
    int fd = connect_to(port);
    /* Taken and answered from another thread, on a kept-alive connection. */
    char *r = post(fd, "quick-later", "abc");
    assert_status(r, 202);
    assert_non_null(strcasestr(r, "Content-Type: application/x-later"));
    assert_string_equal(body_of(r), "later abc");
    free(r);
    /* Not taken: fn answers. */
    r = post(fd, "plain", "x");
    assert_status(r, 201);
    assert_string_equal(body_of(r), "POST plain 1:x");
    free(r);
    /* Taken, then handed to the workers: fn answers with the request intact. */
    r = post(fd, "quick-worker", "yz");
    assert_status(r, 201);
    assert_string_equal(body_of(r), "POST quick-worker 2:yz");
    free(r);
    close(fd);
    http_service_close(s);
    assert_int_equal(f.calls, 2);
    for (int i = 0; i < g_nlater; i++) {
        pthread_join(g_later_th[i], NULL);
    }
}

static void close_waits_for_taken_requests(void **state)
{
    (void)state;
    fixture f = {.mu = PTHREAD_MUTEX_INITIALIZER};
    g_nlater = g_replied = 0;
    int port = http_test_free_port();
    http_service *s = open_quick(port, &f);
    int fd = connect_to(port);
    char req[] = "POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: quick-later\r\n"
                 "Content-Length: 3\r\n\r\n300";
    send_all(fd, req, sizeof req - 1);
    for (int i = 0; g_nlater == 0; i++) { /* taken (bounded wait) */
        assert_true(i < 2000);
        struct timespec ts = {.tv_nsec = 5000000};
        nanosleep(&ts, NULL);
    }
    /* The answer comes 300 ms later; close must wait for it to be given
     * (whether its bytes still go out as the server stops is NNG's race,
     * as for a worker's last answer). */
    http_service_close(s);
    pthread_mutex_lock(&f.mu);
    assert_int_equal(g_replied, 1);
    pthread_mutex_unlock(&f.mu);
    close(fd);
    pthread_join(g_later_th[0], NULL);
}

static void bad_options_are_einval(void **state)
{
    (void)state;
    fixture f = {.mu = PTHREAD_MUTEX_INITIALIZER};
    http_service *s = (http_service *)&f;
    char err[256];
    http_service_options o = {.path = "/", .max_body = 10};
    assert_int_equal(http_service_open(&s, "no-port", &o, serve, &f, err, sizeof err),
                     LAPSE_EINVAL);
    assert_null(s);
    o.path = "relative";
    assert_int_equal(http_service_open(&s, "127.0.0.1:1", &o, serve, &f, err, sizeof err),
                     LAPSE_EINVAL);
    assert_non_null(strstr(err, "bad HTTP listen address"));
    http_service_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(post_reaches_fn_with_headers_and_body_keep_alive),
        cmocka_unit_test(body_over_max_gets_reject_body_without_fn),
        cmocka_unit_test(blocked_fn_does_not_hold_other_requests),
        cmocka_unit_test(close_waits_for_running_fn_then_refuses),
        cmocka_unit_test(quick_function_answers_later_or_hands_to_workers),
        cmocka_unit_test(close_waits_for_taken_requests),
        cmocka_unit_test(bad_options_are_einval),
    };
    int rv = cmocka_run_group_tests_name("own thread", tests, NULL, NULL);
    if (rpc_loop_open(&g_loop, "test:loop") != 0) {
        fprintf(stderr, "cannot start a loop\n");
        return 1;
    }
    rv |= cmocka_run_group_tests_name("on a loop", tests, NULL, NULL);
    assert_int_equal(g_nwatches, 0); /* every service unwatched what it watched */
    rpc_loop_close(g_loop);
    return rv;
}
