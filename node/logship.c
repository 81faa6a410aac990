/*
 * logship.c: replica sets on a node (contract in logship.h).
 */
#include "logship.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/replog.h"
#include "../placement/failover.h"
#include "../placement/pmap.h"
#include "logship_int.h"
#include "maps.h"
#include "registry.h"

/* The client for node id at url (reopened when its URL changed), or NULL. */
rpc_client *logship_peer_client(logship *ls, uint32_t id, const char *url)
{
    rpc_client *c = NULL;
    pthread_mutex_lock(&ls->lock);
    logship_peer *p = NULL;
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

uint32_t logship_required(logship *ls, const node_map *m, const pmap_replicas *r,
                          uint32_t table_id, uint32_t part, int *reconciled)
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
        join |= i > 0 && p->join_version > m->pm->version ? 1u << i : 0;
        i = p->dropped[j] != 0 ? pmap_replicas_index(r, p->dropped[j]) : -1;
        drop |= i > 0 && p->drop_version > m->pm->version ? 1u << i : 0;
    }
    if (p != NULL && p->drop_version > p->join_version) {
        bits = (bits | join) & ~drop; /* the drop is the later word */
    } else {
        bits = (bits & ~drop) | join;
    }
    if (reconciled != NULL) {
        *reconciled = p != NULL && p->reconciled >= pmap_epoch(r);
    }
    pthread_mutex_unlock(&ls->lock);
    return bits;
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
    } else if ((rv = registry_may_lead(ls->ns, m->pm, err, errlen)) != 0) {
        /* no lease: writes, sweeps and backfill steps wait for the failover */
    } else {
        uint32_t in_sync = 1, need = pmap_min_in_sync(r);
        int reconciled = 0;
        uint32_t bits = logship_required(ls, m, r, table_id, part, &reconciled);
        for (uint32_t i = 1; i < r->n; i++) {
            in_sync += bits >> i & 1u;
        }
        if (in_sync < need) {
            snprintf(err, errlen,
                     "table %u partition %u has %u of %u copies in sync; a write needs %u",
                     (unsigned)table_id, (unsigned)part, (unsigned)in_sync, (unsigned)r->n,
                     (unsigned)need);
            rv = LAPSE_EUNAVAILABLE;
        } else if (!reconciled) {
            rv = logship_reconcile(ls, m, r, table_id, part, err, errlen);
        }
        *epoch = pmap_epoch(r);
    }
    maps_release(m);
    return rv;
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

/* The applied seq a ReplicateLog reply reports, or 0. */
static uint64_t applied_of(const Lapse__Response *resp)
{
    const Lapse__ReplicateLogResponse *r = logship_reply(resp);
    return r != NULL ? r->applied_seq : 0;
}

static int diverged_of(const Lapse__Response *resp)
{
    const Lapse__ReplicateLogResponse *r = logship_reply(resp);
    return r != NULL && r->diverged;
}

int logship_send_after(logship *ls, rpc_client *c, uint32_t id, uint32_t table_id, uint32_t part,
                       uint64_t epoch, uint64_t *applied, int *diverged, char *err,
                       size_t errlen)
{
    shipment s;
    shipment_init(&s, ls, table_id, part, epoch);
    *diverged = 0;
    int rv = replog_record_epoch(ls->ns->st, table_id, part, *applied, &s.body.prev_epoch, err,
                                 errlen);
    if (rv == LAPSE_ENOTFOUND) {
        uint64_t my_epoch = 0, my_seq = 0;
        char perr[256];
        rv = replog_position(ls->ns->st, table_id, part, &my_epoch, &my_seq, perr, sizeof(perr));
        if (rv != 0) {
            snprintf(err, errlen, "%s", perr);
        } else if (*applied > my_seq) {
            *diverged = 1; /* the replica is ahead of this log */
            snprintf(err, errlen, "node %u is at record %" PRIu64 ", past this log",
                     (unsigned)id, *applied);
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
        *diverged = diverged_of(resp);
        if (logship_reply(resp) != NULL) {
            *applied = applied_of(resp);
        }
    }
    rpc_response_free(resp);
    shipment_fini(&s);
    return rv;
}

/* Brings replica (client) up to seq with the log from after applied: one
 * call, bounded by LOGSHIP_CATCHUP_RECORDS/_BYTES (a replica further behind
 * takes several writes' calls to catch up). */
static int catch_up(logship *ls, rpc_client *client, uint32_t id, uint32_t table_id,
                    uint32_t part, uint64_t epoch, uint64_t applied, uint64_t seq, char *err,
                    size_t errlen)
{
    int diverged = 0;
    int rv = logship_send_after(ls, client, id, table_id, part, epoch, &applied, &diverged, err,
                                errlen);
    if (rv == 0 && applied < seq) {
        snprintf(err, errlen, "node %u is at %" PRIu64 " of %" PRIu64 " after a catch-up",
                 (unsigned)id, applied, seq);
        rv = LAPSE_EUNAVAILABLE;
    }
    return rv;
}

/* Asks the coordinator to take follower id out of r's in-sync set (it did
 * not confirm a record: why); on yes, counts it out (part_state.dropped)
 * and returns 0. Else the refusal or failure with err. */
static int shrink(logship *ls, const node_map *m, const pmap_replicas *r, uint32_t table_id,
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

/* A required replica that did not confirm a record, and why. */
typedef struct miss {
    uint32_t id;
    int deposed; /* it knows a newer epoch: this node is no longer primary */
    char why[512];
} miss;

/* One replication round of a partition: the records taken from its queue
 * (recs[0..n), in seq order, the one before recs[0] of its prev_epoch),
 * shipped to every required in-sync replica at once; rounds of several
 * partitions go out together (ship_rounds). */
typedef struct round {
    part_state *p;
    ship_entry *recs[LOGSHIP_GROUP_RECORDS];
    size_t n;
    node_map *m;
    const pmap_replicas *r;
    uint64_t epoch;
    shipment s;
    rpc_multi_call *calls; /* ncalls of them, in the caller's array */
    uint32_t ids[PMAP_MAX_REPLICAS];
    size_t ncalls;
    miss misses[PMAP_MAX_REPLICAS];
    size_t nmiss;
    int rv;
    char err[LOGSHIP_ERR_MAX];
} round;

/* Prepares rd's calls into calls[0..PMAP_MAX_REPLICAS): every required
 * member reachable now (the others are misses at once). */
static void round_start(logship *ls, round *rd, rpc_multi_call *calls)
{
    const uint32_t table_id = rd->p->table_id, part = rd->p->part;
    rd->calls = calls;
    rd->m = maps_acquire(ls->ns);
    rd->r = set_of(rd->m, table_id, part, rd->err, sizeof(rd->err));
    rd->rv = rd->r == NULL ? LAPSE_EWRONGNODE : 0;
    rd->epoch = rd->r != NULL ? pmap_epoch(rd->r) : 0;
    uint32_t bits = rd->r != NULL ? logship_required(ls, rd->m, rd->r, table_id, part, NULL) : 0;
    shipment_init(&rd->s, ls, table_id, part, rd->epoch);
    rd->s.body.prev_epoch = rd->recs[0]->prev_epoch;
    for (size_t i = 0; rd->rv == 0 && i < rd->n; i++) {
        rd->rv = shipment_add(&rd->s, rd->recs[i]->seq, rd->recs[i]->rec, rd->recs[i]->len, 0);
    }
    for (uint32_t i = 1; rd->rv == 0 && i < rd->r->n; i++) {
        if (!(bits >> i & 1u)) {
            continue;
        }
        const pmap_node *pn = pmap_node_find(rd->m->pm, rd->r->ids[i]);
        rpc_client *c = pn != NULL ? logship_peer_client(ls, pn->id, pn->address) : NULL;
        /* No wait of a whole timeout for a replica known to be down or with
         * no connection. */
        if (c == NULL || pn->state != PMAP_NODE_UP ||
            !rpc_client_connected(c, LOGSHIP_CONNECT_WAIT_MS)) {
            rd->misses[rd->nmiss] = (miss){.id = rd->r->ids[i]};
            snprintf(rd->misses[rd->nmiss++].why, sizeof(rd->misses[0].why), "%s",
                     c == NULL ? "unknown" : pn->state != PMAP_NODE_UP ? "down" : "unreachable");
            continue;
        }
        memset(&calls[rd->ncalls], 0, sizeof(calls[0]));
        calls[rd->ncalls].client = c;
        calls[rd->ncalls].req = &rd->s.req;
        rd->ids[rd->ncalls++] = rd->r->ids[i];
    }
}

/* Takes in rd's answers (rpc_call_many done): a member that reports a gap
 * gets the log from where it stands; one that did not confirm leaves the
 * in-sync set on the coordinator's word, and the records count with the
 * others (never with fewer than min-in-sync copies: the coordinator
 * refuses that); until that answer they count as failed. Sets rd->rv. */
static void round_end(logship *ls, round *rd)
{
    const uint32_t table_id = rd->p->table_id, part = rd->p->part;
    const uint64_t seq = rd->recs[rd->n - 1]->seq;
    uint32_t confirmed[PMAP_MAX_REPLICAS];
    size_t nconfirmed = 0;
    for (size_t i = 0; i < rd->ncalls; i++) {
        rpc_multi_call *c = &rd->calls[i];
        int crv = c->rv;
        if (rd->rv == 0 && crv == LAPSE_ESTATE && !diverged_of(c->resp)) {
            crv = catch_up(ls, c->client, rd->ids[i], table_id, part, rd->epoch,
                           applied_of(c->resp), seq, c->err, sizeof(c->err));
        }
        if (rd->rv == 0 && crv != 0) {
            rd->misses[rd->nmiss] = (miss){.id = rd->ids[i], .deposed = crv == LAPSE_EPERM};
            snprintf(rd->misses[rd->nmiss++].why, sizeof(rd->misses[0].why), "%s",
                     c->err[0] ? c->err : lapse_strerror(crv));
        } else if (rd->rv == 0) {
            confirmed[nconfirmed++] = rd->ids[i];
        }
        rpc_response_free(c->resp);
    }
    logship_heard(ls, table_id, part, confirmed, nconfirmed, seq); /* one lock per round */
    for (size_t i = 0; rd->rv == 0 && i < rd->nmiss; i++) {
        char why[256] = "";
        const miss *ms = &rd->misses[i];
        if (ms->deposed) {
            snprintf(rd->err, sizeof(rd->err), "replica node %u refused record %" PRIu64 ": %s",
                     (unsigned)ms->id, seq, ms->why);
            rd->rv = LAPSE_EWRONGNODE;
        } else if (shrink(ls, rd->m, rd->r, table_id, part, ms->id, ms->why, why,
                          sizeof(why)) != 0) {
            snprintf(rd->err, sizeof(rd->err),
                     "replica node %u of table %u partition %u did not confirm record %" PRIu64
                     " (%s) and stays in the in-sync set (%s): the write is not acknowledged",
                     (unsigned)ms->id, (unsigned)table_id, (unsigned)part, seq, ms->why, why);
            rd->rv = LAPSE_EUNAVAILABLE;
        }
    }
    maps_release(rd->m);
    shipment_fini(&rd->s);
}

/* Group commit. The ship hook only queues a record (in seq order: it runs
 * under the stripe lock); whoever then waits for a record of the partition
 * while no round is on the wire takes the whole queue (up to
 * LOGSHIP_GROUP_RECORDS / _BYTES) and ships it as one round, so the writes
 * that queued while a round was out share the next one. */
static int hook_ship(void *arg, uint32_t table_id, uint32_t part, uint64_t seq,
                     uint64_t prev_epoch, const uint8_t *rec, size_t len, void **ticket,
                     char *err, size_t errlen)
{
    logship *ls = arg;
    ship_entry *e = malloc(sizeof(*e) + (len ? len : 1));
    if (e == NULL) {
        snprintf(err, errlen, "out of memory queueing record %" PRIu64, seq);
        return LAPSE_ENOMEM;
    }
    memset(e, 0, sizeof(*e));
    e->seq = seq;
    e->prev_epoch = prev_epoch;
    e->rec = (uint8_t *)(e + 1);
    e->len = len;
    memcpy(e->rec, rec, len);
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    if (p != NULL) {
        if (p->q_head == NULL && !p->shipping) {
            p->done_seq = seq - 1; /* every record before this one is through */
        }
        e->owner = p;
        *(p->q_head != NULL ? &p->q_tail->next : &p->q_head) = e;
        p->q_tail = e;
    }
    pthread_mutex_unlock(&ls->lock);
    if (p == NULL) {
        free(e);
        snprintf(err, errlen, "out of memory queueing record %" PRIu64, seq);
        return LAPSE_ENOMEM;
    }
    *ticket = e;
    return 0;
}

/* Takes the queue of each of ps[0..nps) that has records and no round on
 * the wire, ships those rounds together and marks their records through
 * (shipped, or failed with the round's error). Returns how many rounds it
 * shipped: 0 when every one was on the wire or empty (the caller waits
 * for ls->shipped). REQUIRES: ls->lock held (released while the rounds
 * are on the wire). */
static size_t ship_rounds(logship *ls, part_state *const *ps, size_t nps)
{
    round *rds = NULL;
    size_t nr = 0;
    for (size_t i = 0; i < nps; i++) {
        part_state *p = ps[i];
        if (p->shipping || p->q_head == NULL) {
            continue;
        }
        if (rds == NULL && (rds = calloc(nps, sizeof(*rds))) == NULL) {
            return 0; /* out of memory: try again after the next round */
        }
        round *rd = &rds[nr++];
        rd->p = p;
        size_t bytes = 0;
        while (p->q_head != NULL && rd->n < LOGSHIP_GROUP_RECORDS &&
               (rd->n == 0 || bytes + p->q_head->len <= LOGSHIP_GROUP_BYTES)) {
            rd->recs[rd->n++] = p->q_head;
            bytes += p->q_head->len;
            p->q_head = p->q_head->next;
        }
        p->shipping = 1;
    }
    if (nr == 0) {
        return 0;
    }
    pthread_mutex_unlock(&ls->lock);
    rpc_multi_call *calls = calloc(nr * PMAP_MAX_REPLICAS, sizeof(*calls));
    size_t ncalls = 0;
    for (size_t i = 0; i < nr; i++) {
        if (calls == NULL) {
            rds[i].rv = LAPSE_ENOMEM;
            snprintf(rds[i].err, sizeof(rds[i].err), "out of memory shipping a round");
            continue;
        }
        round_start(ls, &rds[i], calls + ncalls);
        ncalls += rds[i].ncalls;
    }
    if (ncalls > 0) {
        rpc_call_many(calls, ncalls, LOGSHIP_TIMEOUT_MS);
    }
    for (size_t i = 0; calls != NULL && i < nr; i++) {
        round_end(ls, &rds[i]);
    }
    free(calls);
    atomic_fetch_add(&ls->rounds, nr);
    pthread_mutex_lock(&ls->lock);
    for (size_t i = 0; i < nr; i++) {
        round *rd = &rds[i];
        for (size_t k = 0; k < rd->n; k++) {
            rd->recs[k]->rv = rd->rv;
            snprintf(rd->recs[k]->err, sizeof(rd->recs[k]->err), "%s", rd->err);
            rd->recs[k]->done = 1;
        }
        atomic_fetch_add(&ls->round_records, rd->n);
        rd->p->done_seq = rd->recs[rd->n - 1]->seq;
        rd->p->shipping = 0;
        rd->p->lag_gen += rd->rv != 0; /* the resync thread sends the records on */
    }
    pthread_cond_broadcast(&ls->shipped);
    free(rds);
    return nr;
}

/* Waits until every ticket's record is through, shipping the rounds of
 * their partitions itself (together) whenever none is on the wire: so a
 * batch's partitions go out in one go. Returns the first failure in
 * ticket order. */
static int hook_wait(void *arg, void *const *tickets, size_t n, char *err, size_t errlen)
{
    logship *ls = arg;
    part_state *one[1], **ps = n > 1 ? calloc(n, sizeof(*ps)) : NULL;
    const size_t cap = ps != NULL ? n : 1; /* out of memory: a partition at a time */
    ps = ps != NULL ? ps : one;
    pthread_mutex_lock(&ls->lock);
    for (;;) {
        size_t nps = 0;
        for (size_t i = 0; i < n; i++) {
            const ship_entry *e = tickets[i];
            size_t k = 0;
            while (!e->done && k < nps && ps[k] != e->owner) {
                k++;
            }
            if (!e->done && k == nps && nps < cap) {
                ps[nps++] = e->owner;
            }
        }
        if (nps == 0) {
            break;
        }
        if (ship_rounds(ls, ps, nps) == 0) {
            pthread_cond_wait(&ls->shipped, &ls->lock);
        }
    }
    pthread_mutex_unlock(&ls->lock);
    int rv = 0;
    for (size_t i = 0; i < n; i++) {
        ship_entry *e = tickets[i];
        if (rv == 0 && e->rv != 0) {
            rv = e->rv;
            snprintf(err, errlen, "%s", e->err[0] ? e->err : lapse_strerror(rv));
        }
        free(e);
    }
    if (ps != one) {
        free(ps);
    }
    return rv;
}

static void hook_settle(void *arg, uint32_t table_id, uint32_t part, uint64_t seq)
{
    logship *ls = arg;
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    while (p != NULL && p->done_seq < seq && (p->shipping || p->q_head != NULL)) {
        if (ship_rounds(ls, &p, 1) == 0) {
            pthread_cond_wait(&ls->shipped, &ls->lock);
        }
    }
    pthread_mutex_unlock(&ls->lock);
}

int logship_apply_run(store *st, uint32_t table_id, uint32_t part, uint64_t prev_epoch,
                      Lapse__LogRecord *const *recs, size_t n, uint64_t *applied, int *diverged,
                      char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const Lapse__LogRecord *lr = recs[i];
        if (lr == NULL) {
            snprintf(err, errlen, "record %zu is missing", i);
            return LAPSE_EPROTO;
        }
        int rv = replog_apply_locked(st, table_id, part, lr->seq, prev_epoch, lr->data.data,
                                     lr->data.len, applied, diverged, err, errlen);
        if (rv != 0) {
            return rv;
        }
        prev_epoch = replog_rec_epoch(lr->data.data, lr->data.len);
    }
    return 0;
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
        rv = logship_apply_run(ls->ns->st, table_id, part, my_epoch, got->records, got->n_records,
                               &applied, &diverged, err, errlen);
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

int logship_reconcile(logship *ls, const node_map *m, const pmap_replicas *r, uint32_t table_id,
                      uint32_t part, char *err, size_t errlen)
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
        }
        if (rv == LAPSE_EUNAVAILABLE) {
            /* Every acknowledged write is here too: a member that cannot
             * be read may leave the in-sync set (its extra records, if
             * any, were never acknowledged; it diverges and is rebuilt). */
            char why[256] = "";
            if (shrink(ls, m, r, table_id, part, r->ids[i], err, why, sizeof(why)) == 0) {
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
    pthread_mutex_unlock(&ls->lock);
    log_info("table %u partition %u: primary at epoch %" PRIu64 "%s", (unsigned)table_id,
             (unsigned)part, epoch,
             taken > 0 ? " (took in records only its replicas had)" : "");
    return 0;
}

int logship_open(logship **out, node_server *ns)
{
    logship *ls = calloc(1, sizeof(*ls));
    if (ls == NULL) {
        return LAPSE_ENOMEM;
    }
    ls->ns = ns;
    pthread_mutex_init(&ls->lock, NULL);
    clock_cond_init_mono(&ls->wake); /* resync_main waits on clock_mono_abstime */
    pthread_cond_init(&ls->shipped, NULL);
    store_repl_hook h = {.begin = hook_begin,
                         .ship = hook_ship,
                         .wait = hook_wait,
                         .settle = hook_settle,
                         .arg = ls};
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
    for (size_t b = 0; b < LOGSHIP_STATE_BUCKETS; b++) {
        while (ls->states[b] != NULL) {
            part_state *p = ls->states[b];
            ls->states[b] = p->next;
            free(p);
        }
    }
    pthread_cond_destroy(&ls->wake);
    pthread_cond_destroy(&ls->shipped);
    pthread_mutex_destroy(&ls->lock);
    free(ls);
}
