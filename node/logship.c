/*
 * logship.c: replica sets on a node (contract in logship.h).
 */
#include "logship.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../common/token.h"
#include "../partition/replog.h"
#include "../placement/pmap.h"
#include "maps.h"

#define LOGSHIP_MAX_PEERS 64 /* distinct replicas a node ships to */

/* An RPC client to one replica node, opened on first use. */
typedef struct peer {
    uint32_t id;
    char url[PMAP_MAX_ADDR];
    rpc_client *client;
} peer;

struct logship {
    node_server *ns;
    pthread_mutex_t lock; /* guards peers */
    peer peers[LOGSHIP_MAX_PEERS];
    size_t npeers;
};

/* The client for node id at url (reopened when its URL changed), or NULL. */
static rpc_client *peer_client(logship *ls, uint32_t id, const char *url)
{
    rpc_client *c = NULL;
    pthread_mutex_lock(&ls->lock);
    peer *p = NULL;
    for (size_t i = 0; i < ls->npeers; i++) {
        if (ls->peers[i].id == id) {
            p = &ls->peers[i];
        }
    }
    if (p == NULL && ls->npeers < LOGSHIP_MAX_PEERS) {
        p = &ls->peers[ls->npeers++];
        memset(p, 0, sizeof(*p));
        p->id = id;
    }
    if (p != NULL && (p->client == NULL || strcmp(p->url, url) != 0)) {
        /* A replaced client may be in use by a call on another partition:
         * it is kept open (leaked to the end of the process) rather than
         * closed under that call. URLs change only when a node moves. */
        char err[256];
        rpc_client *nc = NULL;
        if (rpc_client_open(&nc, url, err, sizeof(err)) == 0) {
            p->client = nc;
            snprintf(p->url, sizeof(p->url), "%s", url);
        } else {
            log_error("replica set: cannot open a client to node %u at %s: %s", id, url, err);
        }
    }
    c = p != NULL ? p->client : NULL;
    pthread_mutex_unlock(&ls->lock);
    return c;
}

/* The replica set of (table_id, part) in m, or NULL (with err). */
static const pmap_replicas *set_of(const node_map *m, uint32_t table_id, uint32_t part,
                                   char *err, size_t errlen)
{
    const pmap_table *t = pmap_table_find_id(m->pm, table_id);
    const pmap_replicas *r = pmap_part(t, part);
    if (r == NULL) {
        snprintf(err, errlen, "table %u partition %u is not in this node's map (version %" PRIu64
                 ")", (unsigned)table_id, (unsigned)part, m->pm->version);
    }
    return r;
}

static int hook_begin(void *arg, uint32_t table_id, uint32_t part, uint64_t *epoch, char *err,
                      size_t errlen)
{
    logship *ls = arg;
    node_map *m = maps_acquire(ls->ns);
    int rv = 0;
    const pmap_replicas *r = set_of(m, table_id, part, err, errlen);
    if (r == NULL) {
        rv = LAPSE_EWRONGNODE;
    } else if (r->ids[0] != ls->ns->id) {
        snprintf(err, errlen, "node %u is the primary of table %u partition %u, not this node %u",
                 (unsigned)r->ids[0], (unsigned)table_id, (unsigned)part, (unsigned)ls->ns->id);
        rv = LAPSE_EWRONGNODE;
    } else {
        uint32_t in_sync = 0, need = r->n < LOGSHIP_MIN_IN_SYNC ? r->n : LOGSHIP_MIN_IN_SYNC;
        for (uint32_t i = 0; i < r->n; i++) {
            in_sync += (uint32_t)pmap_in_sync(r, i);
        }
        if (in_sync < need) {
            snprintf(err, errlen,
                     "table %u partition %u has %u of %u copies in sync; a write needs %u",
                     (unsigned)table_id, (unsigned)part, (unsigned)in_sync, (unsigned)r->n,
                     (unsigned)need);
            rv = LAPSE_EUNAVAILABLE;
        }
        *epoch = r->epoch > 0 ? r->epoch : 1;
    }
    maps_release(m);
    return rv;
}

/* A ReplicateLog request under construction (records point into recs). */
typedef struct shipment {
    Lapse__Request req;
    Lapse__ReplicateLogRequest body;
    Lapse__LogRecord *recs;
    Lapse__LogRecord **ptrs;
    size_t n, cap;
    uint8_t **copies; /* owned copies of records read from the log */
    size_t bytes;
} shipment;

static void shipment_init(shipment *s, logship *ls, uint32_t table_id, uint32_t part)
{
    memset(s, 0, sizeof(*s));
    lapse__request__init(&s->req);
    lapse__replicate_log_request__init(&s->body);
    s->body.table_id = table_id;
    s->body.partition = part;
    s->body.source_node = ls->ns->id;
    s->req.body_case = LAPSE__REQUEST__BODY_REPLICATE_LOG;
    s->req.replicate_log = &s->body;
    if (ls->ns->cluster_token_len > 0) {
        s->req.admin_token = ls->ns->cluster_token; /* the replica checks it */
    }
}

static void shipment_fini(shipment *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->copies[i]);
    }
    free(s->copies);
    free(s->recs);
    free(s->ptrs);
}

/* Adds record seq; copies its bytes when copy. 0 or LAPSE_ENOMEM. */
static int shipment_add(shipment *s, uint64_t seq, const uint8_t *rec, size_t len, int copy)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        Lapse__LogRecord *r = realloc(s->recs, cap * sizeof(*r));
        if (r == NULL) {
            return LAPSE_ENOMEM;
        }
        s->recs = r;
        uint8_t **c = realloc(s->copies, cap * sizeof(*c));
        if (c == NULL) {
            return LAPSE_ENOMEM;
        }
        s->copies = c;
        Lapse__LogRecord **p = realloc(s->ptrs, cap * sizeof(*p));
        if (p == NULL) {
            return LAPSE_ENOMEM;
        }
        s->ptrs = p;
        s->cap = cap;
    }
    uint8_t *data = (uint8_t *)rec;
    s->copies[s->n] = NULL;
    if (copy) {
        if ((data = malloc(len ? len : 1)) == NULL) {
            return LAPSE_ENOMEM;
        }
        memcpy(data, rec, len);
        s->copies[s->n] = data;
    }
    Lapse__LogRecord *r = &s->recs[s->n];
    lapse__log_record__init(r);
    r->seq = seq;
    r->data.data = data;
    r->data.len = len;
    s->n++;
    s->bytes += len;
    for (size_t i = 0; i < s->n; i++) {
        s->ptrs[i] = &s->recs[i]; /* recs may have moved */
    }
    s->body.records = s->ptrs;
    s->body.n_records = s->n;
    return 0;
}

static int add_from_log(void *arg, uint64_t seq, const uint8_t *rec, size_t len)
{
    return shipment_add(arg, seq, rec, len, 1);
}

/* The applied seq a ReplicateLog reply reports, or 0. */
static uint64_t applied_of(const Lapse__Response *resp)
{
    return resp != NULL && resp->body_case == LAPSE__RESPONSE__BODY_REPLICATE_LOG &&
                   resp->replicate_log != NULL
               ? resp->replicate_log->applied_seq
               : 0;
}

/* Brings replica (client) up to seq with the log from after applied: one
 * call, bounded by LOGSHIP_CATCHUP_RECORDS/_BYTES (a replica further behind
 * takes several writes' calls to catch up). */
static int catch_up(logship *ls, rpc_client *client, uint32_t id, uint32_t table_id,
                    uint32_t part, uint64_t applied, uint64_t seq, char *err, size_t errlen)
{
    shipment s;
    shipment_init(&s, ls, table_id, part);
    int rv = replog_read(ls->ns->st, table_id, part, applied, LOGSHIP_CATCHUP_RECORDS,
                         LOGSHIP_CATCHUP_BYTES, add_from_log, &s, err, errlen);
    Lapse__Response *resp = NULL;
    if (rv == 0 && s.n == 0) {
        snprintf(err, errlen, "node %u applied %" PRIu64 " but the log has nothing after it",
                 (unsigned)id, applied);
        rv = LAPSE_EINTERNAL;
    }
    if (rv == 0) {
        rv = rpc_call(client, &s.req, LOGSHIP_TIMEOUT_MS, &resp, err, errlen);
    }
    if (rv == 0 && applied_of(resp) < seq) {
        snprintf(err, errlen, "node %u is at %" PRIu64 " of %" PRIu64 " after a catch-up",
                 (unsigned)id, applied_of(resp), seq);
        rv = LAPSE_EUNAVAILABLE;
    }
    rpc_response_free(resp);
    shipment_fini(&s);
    return rv;
}

static int hook_ship(void *arg, uint32_t table_id, uint32_t part, uint64_t seq,
                     const uint8_t *rec, size_t len, char *err, size_t errlen)
{
    logship *ls = arg;
    node_map *m = maps_acquire(ls->ns);
    const pmap_replicas *r = set_of(m, table_id, part, err, errlen);
    int rv = r == NULL ? LAPSE_EWRONGNODE : 0;
    rpc_multi_call calls[PMAP_MAX_REPLICAS];
    uint32_t ids[PMAP_MAX_REPLICAS];
    size_t n = 0;
    shipment s;
    shipment_init(&s, ls, table_id, part);
    if (rv == 0) {
        rv = shipment_add(&s, seq, rec, len, 0);
    }
    for (uint32_t i = 1; rv == 0 && i < r->n; i++) {
        if (!pmap_in_sync(r, i)) {
            continue;
        }
        const pmap_node *pn = pmap_node_find(m->pm, r->ids[i]);
        rpc_client *c = pn != NULL ? peer_client(ls, pn->id, pn->address) : NULL;
        /* Fail at once, not after a whole timeout, for a replica known to be
         * down or with no connection: the client retries or reports it. */
        if (c == NULL || pn->state != PMAP_NODE_UP ||
            !rpc_client_connected(c, LOGSHIP_CONNECT_WAIT_MS)) {
            snprintf(err, errlen,
                     "replica node %u of table %u partition %u is %s: the write is not "
                     "acknowledged with fewer copies than its in-sync set",
                     (unsigned)r->ids[i], (unsigned)table_id, (unsigned)part,
                     c == NULL ? "unknown" : pn->state != PMAP_NODE_UP ? "down" : "unreachable");
            rv = LAPSE_EUNAVAILABLE;
            break;
        }
        memset(&calls[n], 0, sizeof(calls[n]));
        calls[n].client = c;
        calls[n].req = &s.req;
        ids[n++] = r->ids[i];
    }
    maps_release(m);
    if (rv == 0 && n > 0) {
        rpc_call_many(calls, n, LOGSHIP_TIMEOUT_MS);
    }
    for (size_t i = 0; i < n; i++) {
        rpc_multi_call *c = &calls[i];
        int crv = c->rv;
        if (rv == 0 && crv == LAPSE_ESTATE) {
            crv = catch_up(ls, c->client, ids[i], table_id, part, applied_of(c->resp), seq,
                           c->err, sizeof(c->err));
        }
        if (rv == 0 && crv != 0) {
            snprintf(err, errlen, "replica node %u did not confirm record %" PRIu64 ": %s",
                     (unsigned)ids[i], seq, c->err[0] ? c->err : lapse_strerror(crv));
            rv = crv == LAPSE_EPERM ? LAPSE_EWRONGNODE : LAPSE_EUNAVAILABLE;
        }
        rpc_response_free(c->resp);
    }
    shipment_fini(&s);
    return rv;
}

int logship_open(logship **out, node_server *ns)
{
    logship *ls = calloc(1, sizeof(*ls));
    if (ls == NULL) {
        return LAPSE_ENOMEM;
    }
    ls->ns = ns;
    pthread_mutex_init(&ls->lock, NULL);
    store_repl_hook h = {.begin = hook_begin, .ship = hook_ship, .arg = ls};
    store_set_repl_hook(ns->st, &h);
    *out = ls;
    return 0;
}

void logship_close(logship *ls)
{
    if (ls == NULL) {
        return;
    }
    store_set_repl_hook(ls->ns->st, NULL);
    for (size_t i = 0; i < ls->npeers; i++) {
        rpc_client_close(ls->peers[i].client);
    }
    pthread_mutex_destroy(&ls->lock);
    free(ls);
}

/* The checks of a node-to-node call: the cluster token and a body. 0, or
 * the error reply set. */
static int check_call(const logship_call *c, const void *body, const char *call)
{
    if (c->ns->cluster_token_len > 0 &&
        !token_equal(c->ns->cluster_token, c->ns->cluster_token_len, c->req->admin_token)) {
        log_warn("refused %s: cluster token %s", call,
                 c->req->admin_token == NULL || c->req->admin_token[0] == '\0' ? "missing"
                                                                               : "wrong");
        rpc_set_error(c->resp, c->a, LAPSE_EPERM, "cluster token missing or wrong");
        return -1;
    }
    if (body == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_EPROTO, "request body is empty");
        return -1;
    }
    return 0;
}

void logship_handle(const logship_call *c)
{
    const Lapse__ReplicateLogRequest *r = c->req->replicate_log;
    if (check_call(c, r, "ReplicateLog") != 0) {
        return;
    }
    Lapse__ReplicateLogResponse *out = arena_alloc(c->a, sizeof(*out));
    if (out == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__replicate_log_response__init(out);
    char err[512] = "";
    int rv = 0;
    uint64_t applied = 0;
    if (r->n_records == 0) {
        uint64_t epoch;
        rv = replog_position(c->ns->st, r->table_id, r->partition, &epoch, &applied, err,
                             sizeof(err));
    }
    for (size_t i = 0; rv == 0 && i < r->n_records; i++) {
        const Lapse__LogRecord *lr = r->records[i];
        if (lr == NULL) {
            rv = LAPSE_EPROTO;
            snprintf(err, sizeof(err), "record %zu is missing", i);
            break;
        }
        rv = replog_apply(c->ns->st, r->table_id, r->partition, lr->seq, lr->data.data,
                          lr->data.len, &applied, err, sizeof(err));
    }
    out->applied_seq = applied;
    /* The applied seq travels with ESTATE too: the sender resends from it. */
    c->resp->body_case = LAPSE__RESPONSE__BODY_REPLICATE_LOG;
    c->resp->replicate_log = out;
    if (rv != 0) {
        if (rv != LAPSE_ESTATE) {
            log_warn("ReplicateLog from node %u, table %u partition %u: %s: %s",
                     (unsigned)r->source_node, (unsigned)r->table_id, (unsigned)r->partition,
                     lapse_strerror(rv), err);
        }
        rpc_set_error(c->resp, c->a, rv, "%s", err[0] ? err : lapse_strerror(rv));
    }
}

void logship_digest(const logship_call *c)
{
    const Lapse__PartitionDigestRequest *r = c->req->partition_digest;
    if (check_call(c, r, "PartitionDigest") != 0) {
        return;
    }
    Lapse__PartitionDigestResponse *out = arena_alloc(c->a, sizeof(*out));
    if (out == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__partition_digest_response__init(out);
    char err[512] = "";
    int rv = replog_items_digest(c->ns->st, r->table_id, r->partition, &out->items, &out->digest,
                                 err, sizeof(err));
    if (rv == 0) {
        rv = replog_position(c->ns->st, r->table_id, r->partition, &out->epoch, &out->seq, err,
                             sizeof(err));
    }
    if (rv != 0) {
        rpc_set_error(c->resp, c->a, rv, "%s", err);
        return;
    }
    c->resp->body_case = LAPSE__RESPONSE__BODY_PARTITION_DIGEST;
    c->resp->partition_digest = out;
}
