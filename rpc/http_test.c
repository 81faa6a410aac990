/* http_test: the GET endpoint behind --metrics-listen, driven by a plain TCP
 * client over loopback: 200 with the content type and body, 404 elsewhere,
 * 500 when the body function fails, a clear error when the address is taken
 * or malformed, and the port reusable after close. */
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
#include "../common/metrics.h"
#include "http.h"
#include "http_test_util.h"

#define CTYPE "text/plain; version=0.0.4; charset=utf-8"

/* GETs path from 127.0.0.1:port and returns the whole response (caller
 * frees), reading until the server closes (Connection: close). 5 s timeout. */
static char *http_get(int port, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        fail_msg("connect to port %d: %s", port, strerror(errno));
    }
    char req[256];
    int n =
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    buf b;
    buf_init(&b);
    char tmp[4096];
    for (;;) {
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            fail_msg("recv: %s", strerror(errno));
        }
        if (r == 0) {
            break;
        }
        assert_int_equal(buf_append(&b, tmp, (size_t)r), 0);
    }
    close(fd);
    return buf_detach(&b);
}

static const char *body_of(const char *resp)
{
    const char *p = strstr(resp, "\r\n\r\n");
    assert_non_null(p);
    return p + 4;
}

static void assert_status(const char *resp, int status)
{
    char want[32];
    snprintf(want, sizeof want, "HTTP/1.1 %d ", status);
    if (strncmp(resp, want, strlen(want)) != 0) {
        fail_msg("want %s, got:\n%s", want, resp);
    }
}

typedef struct fixture {
    int calls;
    int fail_with; /* 0: succeed */
} fixture;

static int get_body(void *arg, buf *body)
{
    fixture *f = arg;
    f->calls++;
    if (f->fail_with != 0) {
        return f->fail_with;
    }
    return buf_printf(body, "hello %d\n", f->calls);
}

static http_server *open_ok(int port, fixture *f)
{
    char hp[64], err[256];
    snprintf(hp, sizeof hp, "127.0.0.1:%d", port);
    http_server *s = NULL;
    int rv = http_server_open(&s, hp, "/metrics", CTYPE, get_body, f, err, sizeof err);
    if (rv != 0) {
        fail_msg("http_server_open %s: %s: %s", hp, lapse_strerror(rv), err);
    }
    return s;
}

static void get_serves_body_and_404_elsewhere(void **state)
{
    (void)state;
    fixture f = {0};
    int port = http_test_free_port();
    http_server *s = open_ok(port, &f);

    char *resp = http_get(port, "/metrics");
    assert_status(resp, 200);
    assert_non_null(strstr(resp, "\r\nContent-Type: " CTYPE "\r\n"));
    assert_string_equal(body_of(resp), "hello 1\n");
    free(resp);

    resp = http_get(port, "/other");
    assert_status(resp, 404);
    free(resp);
    resp = http_get(port, "/metrics/deeper");
    assert_status(resp, 404);
    free(resp);
    assert_int_equal(f.calls, 1);

    http_server_close(s);
    http_server_close(NULL);
}

static void fn_error_gives_500(void **state)
{
    (void)state;
    fixture f = {.fail_with = LAPSE_ENOMEM};
    int port = http_test_free_port();
    http_server *s = open_ok(port, &f);
    char *resp = http_get(port, "/metrics");
    assert_status(resp, 500);
    assert_non_null(strstr(body_of(resp), lapse_strerror(LAPSE_ENOMEM)));
    free(resp);

    f.fail_with = 0; /* the server keeps serving */
    resp = http_get(port, "/metrics");
    assert_status(resp, 200);
    free(resp);
    http_server_close(s);
}

static void address_in_use_is_an_error(void **state)
{
    (void)state;
    char hp[64], err[256];

    /* Taken by a plain listening socket. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 4), 0);
    socklen_t len = sizeof sa;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    snprintf(hp, sizeof hp, "127.0.0.1:%d", ntohs(sa.sin_port));
    http_server *s = NULL;
    err[0] = '\0';
    fixture f = {0};
    assert_int_equal(http_server_open(&s, hp, "/metrics", CTYPE, get_body, &f, err, sizeof err),
                     LAPSE_EUNAVAILABLE);
    assert_null(s);
    assert_true(strlen(err) > 0);
    close(fd);

    /* Taken by our own endpoint for the same path. */
    int port = http_test_free_port();
    http_server *first = open_ok(port, &f);
    snprintf(hp, sizeof hp, "127.0.0.1:%d", port);
    err[0] = '\0';
    assert_int_equal(http_server_open(&s, hp, "/metrics", CTYPE, get_body, &f, err, sizeof err),
                     LAPSE_EUNAVAILABLE);
    assert_null(s);
    assert_true(strlen(err) > 0);
    char *resp = http_get(port, "/metrics"); /* the first one is unharmed */
    assert_status(resp, 200);
    free(resp);
    http_server_close(first);
}

static void bad_address_is_einval(void **state)
{
    (void)state;
    const char *bad[] = {
        "",       "nohostport", "127.0.0.1:", ":9401", "127.0.0.1:99999", "127.0.0.1:12x",
        "a/b:80", "[::1:80"};
    fixture f = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        http_server *s = NULL;
        char err[256] = "";
        int rv = http_server_open(&s, bad[i], "/metrics", CTYPE, get_body, &f, err, sizeof err);
        if (rv != LAPSE_EINVAL) {
            fail_msg("%s: got %s (%s)", bad[i], lapse_strerror(rv), err);
        }
        assert_null(s);
        assert_true(strlen(err) > 0);
    }
    http_server *s = NULL;
    char err[256] = "";
    assert_int_equal(
        http_server_open(&s, "127.0.0.1:1", "metrics", CTYPE, get_body, &f, err, sizeof err),
        LAPSE_EINVAL); /* path must be absolute */
    assert_null(s);
}

static void reopen_same_port_after_close(void **state)
{
    (void)state;
    fixture f = {0};
    int port = http_test_free_port();
    for (int round = 0; round < 3; round++) {
        http_server *s = open_ok(port, &f);
        char *resp = http_get(port, "/metrics");
        assert_status(resp, 200);
        free(resp);
        http_server_close(s);
    }
    assert_int_equal(f.calls, 3);
}

typedef struct slow {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered;
    int finished;
} slow;

/* Blocks until close has been called (close marks the state closed before it
 * waits, so give it 200 ms to get there), then records that it finished. */
static int slow_body(void *arg, buf *body)
{
    slow *w = arg;
    pthread_mutex_lock(&w->mu);
    w->entered = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    struct timespec ts = {.tv_nsec = 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&w->mu);
    w->finished = 1;
    pthread_mutex_unlock(&w->mu);
    return buf_append_str(body, "late\n");
}

typedef struct getter {
    int port;
} getter;

/* Connects and sends a request, then reads whatever comes back (a response
 * or a reset when the server is stopped): only the server side is checked. */
static void *get_thread(void *arg)
{
    getter *g = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)g->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        (void)send(fd, req, sizeof req - 1, MSG_NOSIGNAL);
        char tmp[512];
        while (recv(fd, tmp, sizeof tmp, 0) > 0) {
        }
    }
    close(fd);
    return NULL;
}

static void close_waits_for_running_fn(void **state)
{
    (void)state;
    slow w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    getter g = {.port = http_test_free_port()};
    char hp[64], err[256];
    snprintf(hp, sizeof hp, "127.0.0.1:%d", g.port);
    http_server *s = NULL;
    assert_int_equal(http_server_open(&s, hp, "/metrics", CTYPE, slow_body, &w, err, sizeof err),
                     0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, get_thread, &g), 0);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    pthread_mutex_lock(&w.mu);
    while (!w.entered) {
        if (pthread_cond_timedwait(&w.cv, &w.mu, &deadline) == ETIMEDOUT) {
            break;
        }
    }
    assert_true(w.entered);
    pthread_mutex_unlock(&w.mu);

    http_server_close(s);
    pthread_mutex_lock(&w.mu);
    assert_true(w.finished); /* fn and its arg are not used after close */
    pthread_mutex_unlock(&w.mu);
    assert_int_equal(pthread_join(t, NULL), 0);
}

static int render_metrics(void *arg, buf *body)
{
    return metrics_render(arg, body);
}

static void serves_a_metrics_registry(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    assert_non_null(m);
    metrics_counter_add(m, "lapse_rpc_requests_total", "RPC requests.", "op=\"get\"", 2);
    int port = http_test_free_port();
    char hp[64], err[256];
    snprintf(hp, sizeof hp, "127.0.0.1:%d", port);
    http_server *s = NULL;
    assert_int_equal(
        http_server_open(&s, hp, "/metrics", CTYPE, render_metrics, m, err, sizeof err), 0);
    char *resp = http_get(port, "/metrics");
    assert_status(resp, 200);
    assert_string_equal(body_of(resp), "# HELP lapse_rpc_requests_total RPC requests.\n"
                                       "# TYPE lapse_rpc_requests_total counter\n"
                                       "lapse_rpc_requests_total{op=\"get\"} 2\n");
    free(resp);
    http_server_close(s);
    metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(get_serves_body_and_404_elsewhere),
        cmocka_unit_test(fn_error_gives_500),
        cmocka_unit_test(address_in_use_is_an_error),
        cmocka_unit_test(bad_address_is_einval),
        cmocka_unit_test(reopen_same_port_after_close),
        cmocka_unit_test(serves_a_metrics_registry),
        cmocka_unit_test(close_waits_for_running_fn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
