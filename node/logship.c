/*
 * logship.c: replica sets on a node (contract in logship.h): the clients to
 * peer nodes, the per-partition state, ReplicateLog requests and catch-up
 * sends, taking a follower out of the in-sync set, and a new primary's
 * reconcile. The commit path (the store's hook, group commit) is
 * logship_commit.c.
 */
#include "logship.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/replog.h"
#include "../placement/failover.h"
#include "../placement/pmap.h"
#include "logship_int.h"
#include "maps.h"

/* The entry of node id in ls->peers, added when missing (NULL when the
 * table is full). REQUIRES: ls->lock held. */
static logship_peer *peer_of(logship *ls, uint32_t id)
{
    for (size_t i = 0; i < ls->npeers; i++) {
        if (ls->peers[i].id == id) {
            return &ls->peers[i];
        }
    }
    if (ls->npeers == LOGSHIP_MAX_PEERS) {
        return NULL;
    }
    logship_peer *p = &ls->peers[ls->npeers++];
    memset(p, 0, sizeof(*p));
    p->id = id;
    return p;
}

/* *c for node id at url, (re)opened into *c and cur_url (on loop, NULL:
 * each connection on its own thread) when missing or its URL changed; the
 * client it replaces goes to ls->retired, closed with the logship: a call
 * on another partition may be using it. URLs change only when a node
 * moves. REQUIRES: ls->lock held. */
static rpc_client *reopened(logship *ls, rpc_client **c, char *cur_url, uint32_t id,
                            const char *url, rpc_loop *loop)
{
    if (*c != NULL && strcmp(cur_url, url) == 0) {
        return *c;
    }
    char err[256];
    rpc_client *nc = NULL;
    if (rpc_client_open_on(&nc, url, loop, err, sizeof(err)) != 0) {
        log_error("replica set: cannot open a client to node %u at %s: %s", id, url, err);
        return *c;
    }
    retired_client *r = *c != NULL ? malloc(sizeof(*r)) : NULL;
    if (r != NULL) {
        *r = (retired_client){.client = *c, .next = ls->retired};
        ls->retired = r;
    } /* else (no memory) it stays open to the end of the process */
    *c = nc;
    snprintf(cur_url, PMAP_MAX_ADDR, "%s", url);
    return nc;
}

rpc_client *logship_peer_client(logship *ls, uint32_t id, const char *url)
{
    pthread_mutex_lock(&ls->lock);
    logship_peer *p = peer_of(ls, id);
    rpc_client *c = p != NULL ? reopened(ls, &p->client, p->url, id, url, NULL) : NULL;
    pthread_mutex_unlock(&ls->lock);
    return c;
}

rpc_client *logship_ship_client(logship *ls, uint32_t id, const char *url)
{
    pthread_mutex_lock(&ls->lock);
    logship_peer *p = peer_of(ls, id);
    rpc_client *c = p != NULL ? reopened(ls, &p->ship, p->ship_url, id, url, ls->ship_loop) : NULL;
    pthread_mutex_unlock(&ls->lock);
    return c;
}

part_state *logship_state(logship *ls, uint32_t table_id, uint32_t part)
{
    size_t b = (table_id * 31u + part) % LOGSHIP_STATE_BUCKETS;
    for (part_state *p = ls->states[b]; p != NULL; p = p->next) {
        if (p->table_id == table_id && p->part == part) {
            return p;
        }
    }
    part_state *p = calloc(1, sizeof(*p));
    if (p != NULL) {
        p->table_id = table_id;
        p->part = part;
        p->next = ls->states[b];
        ls->states[b] = p;
    }
    return p;
}

const pmap_replicas *logship_set_of(const node_map *m, uint32_t table_id, uint32_t part,
                                    const pmap_table **tb, char *err, size_t errlen)
{
    const pmap_table *t = pmap_table_find_id(m->pm, table_id);
    const pmap_replicas *r = pmap_part(t, part);
    if (tb != NULL) {
        *tb = t;
    }
    if (r == NULL) {
        snprintf(err, errlen,
                 "table %u partition %u is not in this node's map (version %" PRIu64 ")",
                 (unsigned)table_id, (unsigned)part, m->pm->version);
    }
    return r;
}

/* Sets follower id's heard position in p. REQUIRES: ls->lock held. */
static void heard_one(part_state *p, uint32_t id, uint64_t seq)
{
    size_t slot = PMAP_MAX_REPLICAS;
    for (size_t i = 0; i < PMAP_MAX_REPLICAS; i++) {
        if (p->heard_id[i] == id) {
            slot = i;
            break;
        }
        if (p->heard_id[i] == 0 && slot == PMAP_MAX_REPLICAS) {
            slot = i;
        }
    }
    slot = slot < PMAP_MAX_REPLICAS ? slot : id % PMAP_MAX_REPLICAS; /* full: replace one */
    p->heard_id[slot] = id;
    p->heard_seq[slot] = seq;
}

void logship_heard(logship *ls, uint32_t table_id, uint32_t part, const uint32_t *ids, size_t n,
                   uint64_t seq)
{
    if (n == 0) {
        return;
    }
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    for (size_t i = 0; p != NULL && i < n; i++) {
        heard_one(p, ids[i], seq);
    }
    pthread_mutex_unlock(&ls->lock);
}

void logship_pending_add(uint32_t ids[PMAP_MAX_REPLICAS], uint64_t *version, uint64_t map_version,
                         uint32_t id, uint64_t settles)
{
    if (*version <= map_version) {
        memset(ids, 0, PMAP_MAX_REPLICAS * sizeof(ids[0])); /* settled by the map */
    }
    for (size_t j = 0; j < PMAP_MAX_REPLICAS; j++) {
        if (ids[j] == 0 || ids[j] == id) {
            ids[j] = id;
            break;
        }
    }
    *version = settles > *version ? settles : *version;
}

uint32_t logship_required(logship *ls, const node_map *m, const pmap_replicas *r, uint32_t table_id,
                          uint32_t part, int *reconciled)
{
    uint32_t bits = 0;
    for (uint32_t i = 1; i < r->n; i++) {
        bits |= (uint32_t)pmap_in_sync(r, i) << i;
    }
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    uint32_t join = 0, drop = 0;
    for (size_t j = 0; p != NULL && j < PMAP_MAX_REPLICAS; j++) {
        int i = p->joining[j] != 0 ? pmap_replicas_index(r, p->joining[j]) : -1;
        join |= i > 0 && p->join_changes[j] == r->changes ? 1u << i : 0;
        i = p->dropped[j] != 0 ? pmap_replicas_index(r, p->dropped[j]) : -1;
        drop |= i > 0 && p->drop_version > m->pm->version ? 1u << i : 0;
    }
    /* A drop the coordinator committed moved the set's count past any
     * join asked before it: that join can no longer land. */
    bits = (bits | join) & ~drop;
    if (reconciled != NULL) {
        *reconciled = p != NULL && p->reconciled >= pmap_epoch(r);
    }
    pthread_mutex_unlock(&ls->lock);
    return bits;
}

void shipment_init(shipment *s, logship *ls, uint32_t table_id, uint32_t part, uint64_t epoch)
{
    memset(s, 0, sizeof(*s));
    lapse__request__init(&s->req);
    lapse__replicate_log_request__init(&s->body);
    s->body.table_id = table_id;
    s->body.partition = part;
    s->body.source_node = ls->ns->id;
    s->body.epoch = epoch;
    s->req.body_case = LAPSE__REQUEST__BODY_REPLICATE_LOG;
    s->req.replicate_log = &s->body;
    if (ls->ns->cluster_token_len > 0) {
        s->req.admin_token = ls->ns->cluster_token; /* the replica checks it */
    }
}

void shipment_fini(shipment *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->copies[i]);
    }
    free(s->copies);
    free(s->recs);
    free(s->ptrs);
}

int shipment_add(shipment *s, uint64_t seq, const uint8_t *rec, size_t len, int copy)
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

const Lapse__ReplicateLogResponse *logship_reply(const Lapse__Response *resp)
{
    return resp != NULL && resp->body_case == LAPSE__RESPONSE__BODY_REPLICATE_LOG
               ? resp->replicate_log
               : NULL;
}

uint64_t logship_applied_of(const Lapse__Response *resp)
{
    const Lapse__ReplicateLogResponse *r = logship_reply(resp);
    return r != NULL ? r->applied_seq : 0;
}

int logship_diverged_of(const Lapse__Response *resp)
{
    const Lapse__ReplicateLogResponse *r = logship_reply(resp);
    return r != NULL && r->diverged;
}

int logship_send_after(logship *ls, rpc_client *c, uint32_t id, uint32_t table_id, uint32_t part,
                       uint64_t epoch, uint64_t *applied, int *diverged, char *err, size_t errlen)
{
    shipment s;
    shipment_init(&s, ls, table_id, part, epoch);
    *diverged = 0;
    int rv =
        replog_record_epoch(ls->ns->st, table_id, part, *applied, &s.body.prev_epoch, err, errlen);
    if (rv == LAPSE_ENOTFOUND) {
        uint64_t my_epoch = 0, my_seq = 0;
        char perr[256];
        rv = replog_position(ls->ns->st, table_id, part, &my_epoch, &my_seq, perr, sizeof(perr));
        if (rv != 0) {
            snprintf(err, errlen, "%s", perr);
        } else if (*applied > my_seq) {
            *diverged = 1; /* the replica is ahead of this log */
            snprintf(err, errlen, "node %u is at record %" PRIu64 ", past this log", (unsigned)id,
                     *applied);
            rv = LAPSE_ESTATE;
        } else {
            snprintf(err, errlen,
                     "node %u is at record %" PRIu64 ", which this log no longer holds "
                     "(trimmed): it must be rebuilt from a snapshot",
                     (unsigned)id, *applied);
            rv = LAPSE_ESTATE;
        }
    }
    if (rv == 0) {
        rv = replog_read(ls->ns->st, table_id, part, *applied, LOGSHIP_CATCHUP_RECORDS,
                         LOGSHIP_CATCHUP_BYTES, add_from_log, &s, err, errlen);
    }
    Lapse__Response *resp = NULL;
    if (rv == 0 && s.n == 0) {
        s.body.prev_epoch = 0; /* nothing to send: a position query */
    }
    if (rv == 0) {
        rv = rpc_call(c, &s.req, LOGSHIP_TIMEOUT_MS, &resp, err, errlen);
        *diverged = logship_diverged_of(resp);
        if (logship_reply(resp) != NULL) {
            *applied = logship_applied_of(resp);
        }
    }
    rpc_response_free(resp);
    shipment_fini(&s);
    return rv;
}

int logship_shrink(logship *ls, const node_map *m, const pmap_replicas *r, uint32_t table_id,
                   uint32_t part, uint32_t id, const char *why, char *err, size_t errlen)
{
    Lapse__Request req;
    Lapse__ReplicaShrinkRequest body;
    lapse__request__init(&req);
    lapse__replica_shrink_request__init(&body);
    body.table_id = table_id;
    body.partition = part;
    body.epoch = pmap_epoch(r);
    body.primary_node = ls->ns->id;
    body.node = id;
    body.reason = (char *)why;
    req.body_case = LAPSE__REQUEST__BODY_REPLICA_SHRINK;
    req.replica_shrink = &body;
    Lapse__Response *resp = NULL;
    int rv = rpc_call(ls->ns->coord, &req, LOGSHIP_SHRINK_TIMEOUT_MS, &resp, err, errlen);
    if (rv == 0 && resp->body_case != LAPSE__RESPONSE__BODY_REPLICA_SHRINK) {
        snprintf(err, errlen, "no ReplicaShrink reply");
        rv = LAPSE_EPROTO;
    }
    if (rv == 0) {
        uint64_t settles = resp->replica_shrink->pmap_version;
        pthread_mutex_lock(&ls->lock);
        part_state *p = logship_state(ls, table_id, part);
        if (p != NULL) {
            logship_pending_add(p->dropped, &p->drop_version, m->pm->version, id, settles);
        }
        pthread_mutex_unlock(&ls->lock);
        log_warn("table %u partition %u: node %u left the in-sync set (%s); writes go on with "
                 "the others (map version %" PRIu64 ")",
                 (unsigned)table_id, (unsigned)part, (unsigned)id, why, settles);
    }
    rpc_response_free(resp);
    return rv;
}

int logship_apply_into(store *st, db_batch *b, replog_run *run, uint64_t prev_epoch,
                       Lapse__LogRecord *const *recs, size_t n, uint64_t *applied, int *diverged,
                       char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const Lapse__LogRecord *lr = recs[i];
        if (lr == NULL) {
            snprintf(err, errlen, "record %zu is missing", i);
            return LAPSE_EPROTO;
        }
        int rv = replog_apply_into(st, b, run, lr->seq, prev_epoch, lr->data.data, lr->data.len,
                                   applied, diverged, err, errlen);
        if (rv != 0) {
            return rv;
        }
        prev_epoch = replog_rec_epoch(lr->data.data, lr->data.len);
    }
    return 0;
}

int logship_apply_run(store *st, replog_run *run, uint64_t prev_epoch,
                      Lapse__LogRecord *const *recs, size_t n, uint64_t *applied, int *diverged,
                      char *err, size_t errlen)
{
    db_batch *b = db_batch_new();
    if (b == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    replog_run *runs[1] = {run};
    int rv = logship_apply_into(st, b, run, prev_epoch, recs, n, applied, diverged, err, errlen);
    /* The records before a refused one are valid: they are written. */
    if (run->added > 0) {
        char werr[256];
        int wrv = replog_write(st, b, runs, 1, werr, sizeof(werr));
        if (wrv == 0) {
            *applied = run->last;
        } else {
            *applied = run->last - run->added;
            run->loaded = 0; /* not written: the stored position is unknown here */
            rv = wrv;
            snprintf(err, errlen, "%s", werr);
        }
    }
    db_batch_free(b);
    return rv;
}

/* Takes in replica id's records after this log's end (one pull call of at
 * most LOGSHIP_CATCHUP_RECORDS). Sets *more when it sent any. REQUIRES:
 * the stripe lock. */
static int pull_from(logship *ls, rpc_client *c, uint32_t id, uint32_t table_id, uint32_t part,
                     uint64_t epoch, int *more, char *err, size_t errlen)
{
    uint64_t my_epoch, my_seq;
    *more = 0;
    int rv = replog_position(ls->ns->st, table_id, part, &my_epoch, &my_seq, err, errlen);
    if (rv != 0) {
        return rv;
    }
    shipment s;
    shipment_init(&s, ls, table_id, part, epoch);
    s.body.pull = 1;
    s.body.pull_after = my_seq;
    Lapse__Response *resp = NULL;
    char why[256] = "";
    rv = rpc_call(c, &s.req, LOGSHIP_TIMEOUT_MS, &resp, why, sizeof(why));
    const Lapse__ReplicateLogResponse *got = logship_reply(resp);
    if (rv != 0 || got == NULL) {
        snprintf(err, errlen,
                 "in-sync replica node %u of table %u partition %u cannot be reached to take "
                 "over as primary: %s",
                 (unsigned)id, (unsigned)table_id, (unsigned)part,
                 why[0] ? why : lapse_strerror(rv != 0 ? rv : LAPSE_EPROTO));
        rv = rv == LAPSE_EPERM ? LAPSE_EWRONGNODE : LAPSE_EUNAVAILABLE;
    }
    if (rv == 0) {
        uint64_t applied = 0;
        int diverged = 0;
        replog_run run;
        replog_run_init(&run, table_id, part);
        rv = logship_apply_run(ls->ns->st, &run, my_epoch, got->records, got->n_records, &applied,
                               &diverged, err, errlen);
        if (rv != 0) {
            log_error("table %u partition %u: cannot take in in-sync replica node %u's records "
                      "as the new primary: %s",
                      (unsigned)table_id, (unsigned)part, (unsigned)id, err);
        }
    }
    *more = rv == 0 && got->n_records > 0;
    rpc_response_free(resp);
    shipment_fini(&s);
    return rv;
}

/* logship_reconcile's pulls of p's records that its in-sync members hold
 * beyond this log, up to marking p reconciled at epoch. */
static int take_in(logship *ls, const node_map *m, const pmap_replicas *r, uint32_t table_id,
                   uint32_t part, part_state *p, uint64_t epoch, int *took_in, char *err,
                   size_t errlen)
{
    /* Every acknowledged write is on every in-sync member, but one may
     * hold more (the old primary's last records, unacknowledged): they are
     * taken in, so the members' logs stay one log. The pull also fences:
     * from now on each member refuses records of older epochs. */
    size_t taken = 0;
    for (uint32_t i = 1; i < r->n; i++) {
        if (!pmap_in_sync(r, i)) {
            continue;
        }
        const pmap_node *pn = pmap_node_find(m->pm, r->ids[i]);
        rpc_client *c = pn != NULL ? logship_peer_client(ls, pn->id, pn->address) : NULL;
        int more = 1, rv = 0;
        if (c == NULL || pn->state != PMAP_NODE_UP) {
            snprintf(err, errlen, "in-sync replica node %u of table %u partition %u is down",
                     (unsigned)r->ids[i], (unsigned)table_id, (unsigned)part);
            rv = LAPSE_EUNAVAILABLE;
        }
        for (int round = 0; rv == 0 && more && round < LOGSHIP_RECONCILE_ROUNDS; round++) {
            rv = pull_from(ls, c, r->ids[i], table_id, part, epoch, &more, err, errlen);
            taken += (size_t)(rv == 0 && more);
            if (took_in != NULL && rv == 0 && more) {
                *took_in = 1;
            }
        }
        if (rv == LAPSE_EUNAVAILABLE) {
            /* Every acknowledged write is here too: a member that cannot
             * be read may leave the in-sync set (its extra records, if
             * any, were never acknowledged; it diverges and is rebuilt). */
            char why[256] = "";
            if (logship_shrink(ls, m, r, table_id, part, r->ids[i], err, why, sizeof(why)) == 0) {
                continue;
            }
            size_t used = strlen(err);
            snprintf(err + used, errlen - used, "; it stays in the in-sync set (%s)", why);
        }
        if (rv != 0) {
            return rv;
        }
        if (more) {
            snprintf(err, errlen, "in-sync replica node %u still has more records to take in",
                     (unsigned)r->ids[i]);
            return LAPSE_EUNAVAILABLE;
        }
    }
    pthread_mutex_lock(&ls->lock);
    p->reconciled = epoch;
    /* An in-sync member may lack records of this log that no round
     * confirmed: ones whose round failed before this node restarted (the
     * restart forgot lag_gen), or ones a member had beyond another's when
     * this node took over. The resync thread sends them (send_lag), even
     * when no write follows. */
    p->lag_gen++;
    pthread_mutex_unlock(&ls->lock);
    log_info("table %u partition %u: primary at epoch %" PRIu64 "%s", (unsigned)table_id,
             (unsigned)part, epoch, taken > 0 ? " (took in records only its replicas had)" : "");
    return 0;
}

int logship_reconcile(logship *ls, const node_map *m, const pmap_replicas *r, uint32_t table_id,
                      uint32_t part, int *took_in, char *err, size_t errlen)
{
    uint64_t epoch = pmap_epoch(r);
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    int done = p != NULL && p->reconciled >= epoch;
    pthread_mutex_unlock(&ls->lock);
    if (p == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    if (done) {
        return 0;
    }
    /* The caller may hold the partition's stripe lock across the pulls. */
    atomic_fetch_add(&ls->calls_under_stripe, 1);
    int rv = take_in(ls, m, r, table_id, part, p, epoch, took_in, err, errlen);
    atomic_fetch_sub(&ls->calls_under_stripe, 1);
    return rv;
}
