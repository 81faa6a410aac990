/* http_client_test: the keep-alive HTTP client (http_client.h) against the
 * HTTP service (http_service.h) on loopback: bodies and headers arrive and the
 * answer comes back whole over one connection; a request to nothing
 * listening fails with EUNAVAILABLE instead of hanging; once the server is
 * back, the next request connects again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/lapse_err.h"
#include "http_client.h"
#include "http_service.h"
#include "http_test_util.h"

/* Answers "<X-Tag header>:<body>" with status 201. */
static void echo(void *arg, const http_request *req, http_response *res)
{
    (void)arg;
    const void *body;
    size_t len;
    http_request_body(req, &body, &len);
    const char *tag = http_request_header(req, "X-Tag");
    res->status = 201;
    buf_printf(&res->body, "%s:", tag != NULL ? tag : "(none)");
    buf_append(&res->body, body, len);
}

static http_service *serve_on(int port)
{
    char hp[64], err[256];
    snprintf(hp, sizeof hp, "127.0.0.1:%d", port);
    http_service_options o = {.path = "/", .max_body = 1 << 20, .workers = 2};
    http_service *s = NULL;
    if (http_service_open(&s, hp, &o, echo, NULL, err, sizeof err) != 0) {
        fail_msg("http_service_open: %s", err);
    }
    return s;
}

static void posts_reuse_the_connection_and_reconnect(void **state)
{
    (void)state;
    int port = http_test_free_port();
    char url[64], err[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
    http_client *c = NULL;
    assert_int_equal(http_client_open(&c, url, err, sizeof err), 0);
    const char *names[] = {"X-Tag", "Content-Type"}, *values[] = {"t1", "application/json"};
    int status = 0;
    buf resp;
    buf_init(&resp);
    /* Nothing listening: a failure, not a hang. */
    assert_int_equal(
        http_client_post(c, names, values, 2, "x", 1, 2000, &status, &resp, err, sizeof err),
        LAPSE_EUNAVAILABLE);
    assert_true(err[0] != '\0');

    http_service *s = serve_on(port);
    char body[64], want[80];
    for (int i = 0; i < 200; i++) {
        int n = snprintf(body, sizeof body, "request %d", i);
        int rv = http_client_post(c, names, values, 2, body, (size_t)n, 5000, &status, &resp, err,
                                  sizeof err);
        if (rv != 0) {
            fail_msg("post %d: %s", i, err);
        }
        assert_int_equal(status, 201);
        snprintf(want, sizeof want, "t1:%s", body);
        assert_string_equal((const char *)resp.data, want);
        assert_int_equal(resp.len, strlen(want));
    }
    /* The server goes away and comes back: a failure, then a new
     * connection. */
    http_service_close(s);
    int rv = http_client_post(c, names, values, 2, "y", 1, 2000, &status, &resp, err, sizeof err);
    assert_int_not_equal(rv, 0);
    s = serve_on(port);
    rv = http_client_post(c, names, values, 1, "z", 1, 5000, &status, &resp, err, sizeof err);
    if (rv != 0) { /* the first try may meet the connection the old server closed */
        rv = http_client_post(c, names, values, 1, "z", 1, 5000, &status, &resp, err, sizeof err);
    }
    assert_int_equal(rv, 0);
    assert_string_equal((const char *)resp.data, "t1:z");
    http_service_close(s);
    buf_fini(&resp);
    http_client_close(c);
    http_client_close(NULL);
    assert_int_equal(http_client_open(&c, "not a url", err, sizeof err), LAPSE_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(posts_reuse_the_connection_and_reconnect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
