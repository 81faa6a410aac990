/*
 * rpc_driven_test.c: a client on a driven loop (rpc_loop.h): nothing but
 * the caller reads its connections, so every call below that is answered
 * at all was read by the thread that waited for it. Calls are answered,
 * alone, many at once, mixed with a client of its own threads in one
 * rpc_call_many, and from several threads taking turns at the loop; a
 * deadline, a failed handshake (ended on the connection's thread, which
 * must wake the caller) and a peer that hangs up (read by the caller) each
 * end a wait long before the call's own timeout. Every wait is bounded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../common/clock.h"
#include "rpc_frame.h"
#include "rpc_loop.h"
#include "rpc_testutil.h"

#define LONG_TIMEOUT_MS 10000 /* a call's own timeout, never waited out */
#define SOON_MS 5000          /* a wait that ends early ends well before this */

/* A server with the test handler, and a client to it on a driven loop. */
typedef struct driven {
    fixture *f;
    rpc_loop *l;
    rpc_client *cli;
} driven;

static void driven_open(driven *d)
{
    d->f = fixture_open(64, 16);
    assert_int_equal(rpc_loop_open_driven(&d->l), 0);
    assert_true(rpc_loop_is_driven(d->l));
    char err[256] = "";
    assert_int_equal(rpc_client_open_on(&d->cli, d->f->url, d->l, err, sizeof err), 0);
}

static void driven_close(driven *d)
{
    rpc_client_close(d->cli);
    rpc_loop_close(d->l);
    fixture_close(d->f);
}

static Lapse__Request heartbeat_req(Lapse__HeartbeatRequest *hb, uint32_t id)
{
    lapse__heartbeat_request__init(hb);
    hb->node_id = id;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_HEARTBEAT;
    req.heartbeat = hb;
    return req;
}

/* Calls alone, and a group of three: two on the driven client and one on
 * the fixture's own (its connection's thread reads it), all answered.
 * Catches a caller that sleeps instead of driving (nobody would read). */
static void calls_answered(void **state)
{
    (void)state;
    driven d;
    driven_open(&d);
    char err[256] = "";
    assert_false(rpc_loop_on_thread(d.l)); /* nobody drives it now */
    for (uint32_t i = 1; i <= 20; i++) {
        assert_rv(fixture_heartbeat(d.cli, i, 0, LONG_TIMEOUT_MS, err, sizeof err), 0, err);
    }
    Lapse__HeartbeatRequest hb[3];
    Lapse__Request req[3];
    rpc_multi_call mc[3];
    for (int i = 0; i < 3; i++) {
        req[i] = heartbeat_req(&hb[i], 100 + (uint32_t)i);
        mc[i].client = i == 1 ? d.f->cli : d.cli;
        mc[i].req = &req[i];
    }
    rpc_call_many(mc, 3, LONG_TIMEOUT_MS);
    for (int i = 0; i < 3; i++) {
        assert_rv(mc[i].rv, 0, mc[i].err);
        assert_int_equal(mc[i].resp->pmap_version, 100 + i);
        rpc_response_free(mc[i].resp);
    }
    driven_close(&d);
}

typedef struct turn {
    rpc_client *cli;
    uint32_t base;
    int failed;
} turn;

static void *turn_run(void *arg)
{
    turn *t = arg;
    char err[256];
    for (uint32_t i = 0; i < 10; i++) {
        t->failed +=
            fixture_heartbeat(t->cli, t->base + i, 5, LONG_TIMEOUT_MS, err, sizeof err) != 0;
    }
    return NULL;
}

/* Four threads calling at once take turns at the loop: each call is read
 * by whichever of them drives then, and all forty are answered. Catches a
 * waiter that never looks again after another's round. */
static void threads_take_turns(void **state)
{
    (void)state;
    driven d;
    driven_open(&d);
    turn t[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (turn){.cli = d.cli, .base = 1000 * (uint32_t)(i + 1)};
        assert_int_equal(pthread_create(&th[i], NULL, turn_run, &t[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].failed, 0);
    }
    driven_close(&d);
}

/* A call whose handler outlasts its deadline ends at the deadline, and the
 * next call on the connection gets its own answer (the late one dropped). */
static void deadline_ends_the_wait(void **state)
{
    (void)state;
    driven d;
    driven_open(&d);
    char err[256] = "";
    clock_mono t0 = clock_mono_now();
    assert_int_not_equal(fixture_heartbeat(d.cli, 7, 2000, 200, err, sizeof err), 0);
    assert_true(clock_mono_now().ms - t0.ms < 1500);
    assert_rv(fixture_heartbeat(d.cli, 8, 0, LONG_TIMEOUT_MS, err, sizeof err), 0, err);
    driven_close(&d);
}

/* ---- a peer by hand: answers the handshake with hello, reads the
 * request's first bytes, then hangs up ---- */

typedef struct rude_peer {
    int lfd;
    char url[64];
    const uint8_t *hello;
    pthread_t th;
} rude_peer;

static void *rude_run(void *arg)
{
    rude_peer *p = arg;
    int fd = accept(p->lfd, NULL, NULL);
    /* No assertion here: this is not the test's thread. A failure shows as
     * the test's call answered, which it never is. */
    uint8_t buf[RPC_FRAME_HELLO];
    if (fd >= 0 && recv(fd, buf, sizeof buf, MSG_WAITALL) == RPC_FRAME_HELLO &&
        write(fd, p->hello, RPC_FRAME_HELLO) == RPC_FRAME_HELLO) {
        /* Waits for a request (after a good hello) or for the client to
         * hang up (after a bad one). */
        ssize_t k;
        do {
            k = recv(fd, buf, sizeof buf, 0);
        } while (k < 0 && errno == EINTR);
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

static void rude_open(rude_peer *p, const uint8_t *hello)
{
    p->hello = hello;
    p->lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(p->lfd >= 0);
    int one = 1;
    (void)setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(p->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t n = sizeof sa;
    assert_int_equal(getsockname(p->lfd, (struct sockaddr *)&sa, &n), 0);
    assert_int_equal(listen(p->lfd, 4), 0);
    snprintf(p->url, sizeof p->url, "tcp://127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    assert_int_equal(pthread_create(&p->th, NULL, rude_run, p), 0);
}

/* One heartbeat to the rude peer p on a driven client: fails, and soon. */
static void call_fails_soon(rude_peer *p)
{
    rpc_loop *l = NULL;
    rpc_client *cli = NULL;
    char err[256] = "";
    assert_int_equal(rpc_loop_open_driven(&l), 0);
    assert_int_equal(rpc_client_open_on(&cli, p->url, l, err, sizeof err), 0);
    clock_mono t0 = clock_mono_now();
    assert_int_not_equal(fixture_heartbeat(cli, 9, 0, LONG_TIMEOUT_MS, err, sizeof err), 0);
    assert_true(clock_mono_now().ms - t0.ms < SOON_MS);
    pthread_join(p->th, NULL);
    rpc_client_close(cli);
    rpc_loop_close(l);
    close(p->lfd);
}

/* A peer that hangs up once it has the request: the caller reads the end
 * of the stream itself and its call fails. */
static void hang_up_ends_the_wait(void **state)
{
    (void)state;
    rude_peer p;
    rude_open(&p, rpc_frame_hello_rep0);
    call_fails_soon(&p);
}

/* A peer that answers the handshake as the wrong protocol: the
 * connection's thread fails it and ends the waiting call there, which must
 * wake the caller from its loop. */
static void bad_handshake_ends_the_wait(void **state)
{
    (void)state;
    rude_peer p;
    rude_open(&p, rpc_frame_hello_req0);
    call_fails_soon(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(calls_answered),
        cmocka_unit_test(threads_take_turns),
        cmocka_unit_test(deadline_ends_the_wait),
        cmocka_unit_test(hang_up_ends_the_wait),
        cmocka_unit_test(bad_handshake_ends_the_wait),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    rpc_fini();
    return rv;
}
