/* peerclock.c: the clock check against peers. Contract in peerclock.h. */
#include "peerclock.h"

#include <stdio.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/log.h"
#include "maps.h"

/* The client of peer id at url, (re)opened when its address changed; NULL
 * when there is no room or it cannot be opened. */
static rpc_client *client_of(peerclock *pc, uint32_t id, const char *url)
{
    peerclock_peer *p = NULL;
    for (size_t i = 0; i < pc->n && p == NULL; i++) {
        p = pc->peers[i].id == id ? &pc->peers[i] : NULL;
    }
    if (p == NULL) {
        if (pc->n == PEERCLOCK_MAX_PEERS) {
            return NULL;
        }
        p = &pc->peers[pc->n++];
        p->id = id;
        p->url[0] = 0;
        p->client = NULL;
    }
    if (p->client != NULL && strcmp(p->url, url) != 0) {
        rpc_client_close(p->client);
        p->client = NULL;
    }
    if (p->client == NULL) {
        char err[256];
        snprintf(p->url, sizeof(p->url), "%s", url);
        if (rpc_client_open(&p->client, url, err, sizeof(err)) != 0) {
            p->client = NULL;
        }
    }
    return p->client;
}

int peerclock_check(node_server *ns, peerclock *pc)
{
    if (ns->ttl == NULL) {
        return 0;
    }
    uint32_t ids[PEERCLOCK_MAX_PEERS];
    char urls[PEERCLOCK_MAX_PEERS][NODE_MAX_URL];
    size_t n = 0;
    node_map *m = maps_acquire(ns);
    for (size_t i = 0; i < m->pm->nnodes && n < PEERCLOCK_MAX_PEERS; i++) {
        if (m->pm->nodes[i].id != ns->id) {
            ids[n] = m->pm->nodes[i].id;
            snprintf(urls[n++], NODE_MAX_URL, "%s", m->pm->nodes[i].address);
        }
    }
    maps_release(m);

    int trusted = 0;
    int64_t worst = 0, worst_rtt = 0;
    uint32_t worst_id = 0;
    for (size_t i = 0; i < n; i++) {
        rpc_client *c = client_of(pc, ids[i], urls[i]);
        if (c == NULL) {
            continue;
        }
        Lapse__Request req = LAPSE__REQUEST__INIT;
        Lapse__HeartbeatRequest body = LAPSE__HEARTBEAT_REQUEST__INIT;
        Lapse__Response *resp = NULL;
        char err[256];
        body.node_id = ns->id;
        body.clock_ms = clock_wall_now().ms;
        req.body_case = LAPSE__REQUEST__BODY_HEARTBEAT;
        req.heartbeat = &body;
        int64_t sent_mono = clock_mono_now().ms;
        int rv = rpc_call(c, &req, PEERCLOCK_CALL_TIMEOUT_MS, &resp, err, sizeof(err));
        if (rv == 0 && resp->body_case == LAPSE__RESPONSE__BODY_HEARTBEAT &&
            resp->heartbeat != NULL && resp->heartbeat->clock_trusted) {
            /* As membership.c's heartbeat: the peer read its clock about
             * half-way through the round trip. */
            int64_t rtt = clock_mono_now().ms - sent_mono;
            int64_t skew = body.clock_ms + rtt - (resp->heartbeat->clock_ms + rtt / 2);
            int64_t mag = skew < 0 ? -skew : skew, wmag = worst < 0 ? -worst : worst;
            if (trusted++ == 0 || mag > wmag) {
                worst = skew;
                worst_rtt = rtt;
                worst_id = ids[i];
            }
        }
        rpc_response_free(resp);
    }
    if (trusted == 0) {
        if (!pc->warned) {
            log_warn("no coordinator answers and no peer with a checked clock does: the TTL "
                     "scanners keep their last clock verdict");
            pc->warned = 1;
        }
        return 0;
    }
    if (pc->warned || expiry_engine_clock(ns->ttl, NULL) == EXPIRY_ENGINE_CLOCK_UNKNOWN) {
        log_info("clock checked against %d peer node(s) while no coordinator answers: skew %lld "
                 "ms against node %u",
                 trusted, (long long)worst, worst_id);
    }
    pc->warned = 0;
    atomic_store(&ns->clock_skew_ms, (long long)worst);
    expiry_engine_clock_report(ns->ttl, worst, worst_rtt);
    return trusted;
}

void peerclock_fini(peerclock *pc)
{
    for (size_t i = 0; i < pc->n; i++) {
        rpc_client_close(pc->peers[i].client);
    }
    pc->n = 0;
}
