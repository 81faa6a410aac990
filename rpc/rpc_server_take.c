/*
 * rpc_server_take.c: the server half of rpc.h taking a received request,
 * whichever transport brought it (rpc_server.c's rep0 contexts or
 * rpc_server_stream.c's connections): decoding it on the thread that
 * received it, answering it there when it does not decode, is quick, or
 * may wait on its connection's thread (a stream request that
 * conn_thread accepts, alone in its frame; a coalesced frame's such calls
 * are served there too, rpc_server_multi.c),
 * starting a coalesced frame (rpc_server_multi.c), or queueing it for the
 * workers in its lane; and serving a plain request. Both transports call
 * down to it, and it to rpc_server_multi.c and rpc_server_call.c; what
 * they share is in rpc_server_int.h.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "../common/arena.h"
#include "../common/clock.h"
#include "rpc.h"
#include "rpc_server_int.h"

static int is_urgent(const rpc_server *s, const Lapse__Request *req)
{
    for (size_t i = 0; i < s->nurgent; i++) {
        if ((uint32_t)req->body_case == s->urgent_calls[i]) {
            return 1;
        }
    }
    return 0;
}

void rpc_server_serve(rpc_server *s, srv_ctx *c, Lapse__Request *req)
{
    arena a;
    arena_init(&a);
    Lapse__Response resp = LAPSE__RESPONSE__INIT;
    rpc_server_run(s, req, c->arrived, &resp, &a);
    nng_msg *out = rpc_server_pack_reply(&resp, &a);
    lapse__request__free_unpacked(req, NULL);
    arena_fini(&a);
    rpc_server_reply(c, out);
}

void rpc_server_take(rpc_server *s, srv_ctx *c, const void *data, size_t len)
{
    arena a;
    arena_init(&a);
    Lapse__Response resp = LAPSE__RESPONSE__INIT;
    Lapse__Request *req = rpc_server_decode(data, len, 0, &resp, &a);
    atomic_fetch_add_explicit(&s->frames, 1, memory_order_relaxed);
    if (req == NULL) {
        nng_msg *out = rpc_server_pack_reply(&resp, &a);
        arena_fini(&a);
        rpc_server_reply(c, out);
        return;
    }
    arena_fini(&a);
    if (req->body_case == LAPSE__REQUEST__BODY_MULTI) {
        atomic_fetch_add_explicit(&s->coalesced, 1, memory_order_relaxed);
        nng_msg *out = rpc_server_multi_start(s, c, req);
        if (out != NULL) {
            rpc_server_reply(c, out);
        }
        return;
    }
    if (rpc_server_is_quick(s, req) || rpc_server_on_conn_thread(s, req)) {
        atomic_fetch_add_explicit(&s->quick_calls, 1, memory_order_relaxed);
        rpc_server_serve(s, c, req);
        return;
    }
    int lane = is_urgent(s, req);
    pthread_mutex_lock(&s->mu);
    if (s->closing) { /* c stays unanswered: the connection is closing */
        pthread_mutex_unlock(&s->mu);
        lapse__request__free_unpacked(req, NULL);
        return;
    }
    c->call = req;
    c->job = (srv_job){.ctx = c};
    rpc_server_push(s, &c->job, lane);
    pthread_cond_signal(&s->cv);
    if (lane) {
        pthread_cond_signal(&s->ucv);
    }
    pthread_mutex_unlock(&s->mu);
}
