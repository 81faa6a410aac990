/*
 * rpc_server_multi.c: the server half of rpc.h serving coalesced frames
 * (docs/wire-protocol.md, "Coalesced calls"): a frame's calls are decoded
 * on the thread that received it, the quick ones served there, the
 * ones that wait for their replicas (batchable) served together on one
 * worker, those the server's conn_thread accepts on the connection's own
 * thread (the stream transport), the others as jobs of their own; whoever serves the last call
 * packs and sends the frame's reply. The contexts, queues and workers are
 * in rpc_server.c; what the two share is in rpc_server_int.h.
 */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <nng/nng.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "rpc.h"
#include "rpc_internal.h"
#include "rpc_server_int.h"

void rpc_server_multi_free(srv_multi *m)
{
    for (size_t i = 0; i < m->n; i++) {
        lapse__request__free_unpacked(m->reqs[i], NULL);
        free(m->out[i].data);
    }
    lapse__request__free_unpacked(m->env, NULL);
    free(m);
}

/* Every call of m was served: packs the frame's reply and sends it. */
static void srv_multi_finish(srv_multi *m)
{
    srv_ctx *c = m->c;
    arena a;
    arena_init(&a);
    Lapse__Response resp = LAPSE__RESPONSE__INIT;
    Lapse__MultiResponse body = LAPSE__MULTI_RESPONSE__INIT;
    body.n_replies = m->n;
    body.replies = m->out;
    resp.body_case = LAPSE__RESPONSE__BODY_MULTI;
    resp.multi = &body;
    nng_msg *out = rpc_server_pack_reply(&resp, &a);
    arena_fini(&a);
    c->multi = NULL;
    rpc_server_multi_free(m);
    rpc_server_reply(c, out);
}

/* Packs resp into out (malloc'd). Without memory out stays empty: a
 * Response of status OK and no body, which the client reports as an
 * undecodable reply. */
static void pack_into(Lapse__Response *resp, arena *a, ProtobufCBinaryData *out)
{
    size_t n = rpc_server_reply_size(resp, a);
    if ((out->data = malloc(n > 0 ? n : 1)) != NULL) {
        out->len = lapse__response__pack(resp, out->data);
    }
}

/* Serves call i of m (decoded, or with its error reply packed already) and
 * finishes the frame if it was the last. */
void rpc_server_multi_call(rpc_server *s, srv_multi *m, size_t i)
{
    if (m->reqs[i] != NULL) {
        arena a;
        arena_init(&a);
        Lapse__Response resp = LAPSE__RESPONSE__INIT;
        rpc_server_run(s, m->reqs[i], m->c->arrived, &resp, &a);
        pack_into(&resp, &a, &m->out[i]);
        arena_fini(&a);
        lapse__request__free_unpacked(m->reqs[i], NULL);
        m->reqs[i] = NULL;
    }
    if (atomic_fetch_sub(&m->left, 1) == 1) {
        srv_multi_finish(m);
    }
}

/* Serves m's group of calls together (serve_many), each answered
 * ETIMEDOUT alone when its deadline passed while queued, and finishes the
 * frame if they were the last. */
void rpc_server_multi_group(rpc_server *s, srv_multi *m)
{
    const size_t ng = m->ngroup;
    size_t k = 0;
    /* A group is some of a frame's calls, at most RPC_MAX_COALESCED
     * (rpc_server_multi_start refuses bigger frames): no allocation per
     * group on this path, which every coalesced write takes. */
    const Lapse__Request *reqs[RPC_MAX_COALESCED];
    Lapse__Response resps[RPC_MAX_COALESCED];
    Lapse__Response *rp[RPC_MAX_COALESCED];
    arena ar[RPC_MAX_COALESCED];
    arena *ap[RPC_MAX_COALESCED];
    int64_t deadlines[RPC_MAX_COALESCED];
    size_t idx[RPC_MAX_COALESCED];
    assert(ng <= RPC_MAX_COALESCED);
    if (ng > RPC_MAX_COALESCED) { /* cannot happen: one by one, then */
        for (size_t g = 0; g < ng; g++) {
            rpc_server_multi_call(s, m, m->group[g]);
        }
        return;
    }
    atomic_fetch_add_explicit(&s->calls, ng, memory_order_relaxed);
    for (size_t g = 0; g < ng; g++) {
        size_t i = m->group[g];
        const Lapse__Request *req = m->reqs[i];
        int64_t deadline_ms = srv_deadline(req, m->c->arrived);
        if (clock_mono_now().ms >= deadline_ms) {
            arena a;
            arena_init(&a);
            Lapse__Response resp = LAPSE__RESPONSE__INIT;
            rpc_set_error(&resp, &a, LAPSE_ETIMEDOUT,
                          "deadline of %lld ms passed before the request was served",
                          (long long)(deadline_ms - m->c->arrived.ms));
            pack_into(&resp, &a, &m->out[i]);
            arena_fini(&a);
            continue;
        }
        idx[k] = i;
        reqs[k] = req;
        resps[k] = (Lapse__Response)LAPSE__RESPONSE__INIT;
        rp[k] = &resps[k];
        arena_init(&ar[k]);
        ap[k] = &ar[k];
        deadlines[k] = deadline_ms;
        k++;
    }
    if (k > 0) {
        s->serve_many(s->arg, reqs, rp, ap, deadlines, k);
    }
    for (size_t j = 0; j < k; j++) {
        pack_into(&resps[j], &ar[j], &m->out[idx[j]]);
        arena_fini(&ar[j]);
    }
    for (size_t g = 0; g < ng; g++) {
        lapse__request__free_unpacked(m->reqs[m->group[g]], NULL);
        m->reqs[m->group[g]] = NULL;
    }
    if (atomic_fetch_sub(&m->left, ng) == ng) {
        srv_multi_finish(m);
    }
}

/* Starts serving the coalesced frame env (taken) on the thread that
 * received it: decodes its calls, queues those that are not quick as work
 * of their own, and serves the quick ones here. Returns the reply to send
 * now when the frame fails as a whole, else NULL. */
nng_msg *rpc_server_multi_start(rpc_server *s, srv_ctx *c, Lapse__Request *env)
{
    size_t n = env->multi != NULL ? env->multi->n_calls : 0;
    srv_multi *m = NULL;
    if (n > 0 && n <= RPC_MAX_COALESCED) {
        m = calloc(1, sizeof(*m) + n * (sizeof(*m->reqs) + sizeof(*m->out) + sizeof(*m->jobs) +
                                        sizeof(*m->group)));
    }
    if (m == NULL) {
        arena a;
        arena_init(&a);
        Lapse__Response resp = LAPSE__RESPONSE__INIT;
        if (n == 0 || n > RPC_MAX_COALESCED) {
            rpc_set_error(&resp, &a, LAPSE_EPROTO, "a coalesced frame holds 1 to %d calls, not %zu",
                          RPC_MAX_COALESCED, n);
        } else {
            rpc_set_error(&resp, &a, LAPSE_ENOMEM, "out of memory");
        }
        nng_msg *out = rpc_server_pack_reply(&resp, &a);
        arena_fini(&a);
        lapse__request__free_unpacked(env, NULL);
        return out;
    }
    m->c = c;
    m->env = env;
    m->n = n;
    m->reqs = (Lapse__Request **)(m + 1);
    m->out = (ProtobufCBinaryData *)(m->reqs + n);
    m->jobs = (srv_job *)(m->out + n);
    m->group = (size_t *)(m->jobs + n);
    atomic_init(&m->left, n);
    c->multi = m;

    size_t nmine = 0, nfan = 0;
    size_t mine[RPC_MAX_COALESCED]; /* the calls served here */
    size_t fan[RPC_MAX_COALESCED];  /* the calls queued one by one */
    for (size_t i = 0; i < n; i++) {
        const ProtobufCBinaryData *call = &env->multi->calls[i];
        arena a;
        arena_init(&a);
        Lapse__Response resp = LAPSE__RESPONSE__INIT;
        m->reqs[i] = rpc_server_decode(call->data, call->len, 1, &resp, &a);
        if (m->reqs[i] == NULL) {
            pack_into(&resp, &a, &m->out[i]);
            mine[nmine++] = i;
        } else if (rpc_server_is_quick(s, m->reqs[i])) {
            atomic_fetch_add_explicit(&s->quick_calls, 1, memory_order_relaxed);
            mine[nmine++] = i;
        } else if (s->batchable != NULL && s->batchable(s->arg, m->reqs[i])) {
            m->group[m->ngroup++] = i;
        } else {
            fan[nfan++] = i;
        }
        arena_fini(&a);
    }
    if (m->ngroup == 1) { /* nothing to share a round with */
        fan[nfan++] = m->group[0];
        m->ngroup = 0;
    }
    /* The frame is answered once all its calls are: those that may wait on
     * this connection's thread are served here, one after another, while
     * the workers serve the rest, instead of a hand-off each (rpc.h,
     * conn_thread). */
    size_t kept = 0;
    for (size_t k = 0; k < nfan; k++) {
        if (rpc_server_on_conn_thread(s, m->reqs[fan[k]])) {
            atomic_fetch_add_explicit(&s->quick_calls, 1, memory_order_relaxed);
            mine[nmine++] = fan[k];
        } else {
            fan[kept++] = fan[k];
        }
    }
    nfan = kept;
    if (nfan > 0 || m->ngroup > 0) {
        pthread_mutex_lock(&s->mu);
        if (m->ngroup > 0) {
            srv_job *g = &m->jobs[m->group[0]];
            *g = (srv_job){.multi = m, .idx = SRV_GROUP};
            rpc_server_push(s, g, 0);
        }
        for (size_t k = 0; k < nfan; k++) {
            m->jobs[fan[k]] = (srv_job){.multi = m, .idx = fan[k]};
            rpc_server_push(s, &m->jobs[fan[k]], 0);
        }
        if (nfan + (m->ngroup > 0) > 1) {
            pthread_cond_broadcast(&s->cv);
        } else {
            pthread_cond_signal(&s->cv);
        }
        pthread_mutex_unlock(&s->mu);
    }
    /* From here a worker may serve the queued calls and finish m: touch
     * only the calls that are ours. (Queued while the server closes, they
     * are freed by rpc_server_close with m.) */
    for (size_t k = 0; k < nmine; k++) {
        rpc_server_multi_call(s, m, mine[k]);
    }
    return NULL;
}
