/*
 * logship_commit.c: the primary's commit path of replica sets (contract in
 * logship.h, docs/replication.md "Group commit"): the store's repl hook
 * (begin: may this node write; ship: queue a record; wait: see it through;
 * settle: for a read), the replication rounds that carry the queued
 * records to the in-sync followers, and the hook's installation.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/replog.h"
#include "../placement/failover.h"
#include "../placement/pmap.h"
#include "../rpc/wire.h"
#include "fault_switch.h"
#include "logship_int.h"
#include "maps.h"
#include "registry.h"

/* How late each shipment leaves while the test fault switch slow-ship is
 * on (--debug-fault-dir): well inside a client's default time-out. */
#define SLOW_SHIP_MS 600

/* store_repl_hook.prepare: a new primary takes in its replicas' extra
 * records before the write reads the partition (replog.h). Anything else
 * (not the primary, no lease) is begin's to say. */
static int hook_prepare(void *arg, uint32_t table_id, uint32_t part, char *err, size_t errlen)
{
    logship *ls = arg;
    node_map *m = maps_acquire(ls->ns);
    int rv = 0;
    char why[64];
    const pmap_replicas *r = logship_set_of(m, table_id, part, NULL, why, sizeof(why));
    if (r != NULL && r->ids[0] == ls->ns->id) {
        /* One look at the partition's state when it is reconciled already. */
        rv = logship_reconcile(ls, m, r, table_id, part, NULL, err, errlen);
    }
    maps_release(m);
    return rv;
}

/* store_repl_hook.logged: a one-copy table's partition while a move gives
 * it a second copy (maps_logged; STORE_ANY_PART is PMAP_ANY_PART). */
static int hook_logged(void *arg, uint32_t table_id, uint32_t part)
{
    logship *ls = arg;
    return maps_logged(ls->ns, table_id, part);
}

const pmap_replicas *logship_led(logship *ls, const node_map *m, uint32_t table_id, uint32_t part,
                                 const pmap_table **tb, int *rv, char *err, size_t errlen)
{
    const pmap_replicas *r = logship_set_of(m, table_id, part, tb, err, errlen);
    *rv = 0;
    if (r == NULL) {
        *rv = LAPSE_EWRONGNODE;
    } else if (r->ids[0] != ls->ns->id) {
        snprintf(err, errlen, "node %u is the primary of table %u partition %u, not this node %u",
                 (unsigned)r->ids[0], (unsigned)table_id, (unsigned)part, (unsigned)ls->ns->id);
        *rv = LAPSE_EWRONGNODE;
    } else if (r->handing_since != 0) {
        snprintf(err, errlen,
                 "table %u partition %u: this node %u is handing its primaryship over; try again",
                 (unsigned)table_id, (unsigned)part, (unsigned)ls->ns->id);
        *rv = LAPSE_EWRONGNODE;
    } else {
        *rv = registry_may_lead(ls->ns, m->pm, err, errlen);
    }
    return *rv == 0 ? r : NULL;
}

static int hook_begin(void *arg, uint32_t table_id, uint32_t part, uint64_t *epoch, int *took_in,
                      char *err, size_t errlen)
{
    logship *ls = arg;
    node_map *m = maps_acquire(ls->ns);
    int rv = 0;
    const pmap_table *t = NULL;
    const pmap_replicas *r = logship_led(ls, m, table_id, part, &t, &rv, err, errlen);
    if (r == NULL) {
        /* not the primary, or no lease: writes, sweeps and backfill steps
         * wait for the failover */
    } else {
        uint32_t in_sync = 1, need = pmap_min_in_sync(r, schema_replication(&t->schema));
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
            rv = logship_reconcile(ls, m, r, table_id, part, took_in, err, errlen);
        }
        *epoch = pmap_epoch(r);
    }
    maps_release(m);
    return rv;
}

/* Brings replica (client) up to seq with the log from after applied: one
 * call, bounded by LOGSHIP_CATCHUP_RECORDS/_BYTES (a replica further behind
 * takes several writes' calls to catch up). */
static int catch_up(logship *ls, rpc_client *client, uint32_t id, uint32_t table_id, uint32_t part,
                    uint64_t epoch, uint64_t applied, uint64_t seq, char *err, size_t errlen)
{
    int diverged = 0;
    int rv =
        logship_send_after(ls, client, id, table_id, part, epoch, &applied, &diverged, err, errlen);
    if (rv == 0 && applied < seq) {
        snprintf(err, errlen, "node %u is at %" PRIu64 " of %" PRIu64 " after a catch-up",
                 (unsigned)id, applied, seq);
        rv = LAPSE_EUNAVAILABLE;
    }
    return rv;
}

/* A required replica that did not confirm a record, and why. */
typedef struct miss {
    uint32_t id;
    int deposed; /* it knows a newer epoch: this node is no longer primary */
    char why[512];
} miss;

/* What one follower answered for one round (its part of a call). */
typedef struct answer {
    uint32_t id;
    rpc_client *client;
    int rv;
    uint64_t applied;
    int diverged;
    char err[LOGSHIP_ERR_MAX];
} answer;

/* One replication round of a partition: the records taken from its queue
 * (recs[0..n), in seq order, the one before recs[0] of its prev_epoch),
 * for every required in-sync replica; the rounds of every partition that
 * had records go out together, one call per follower (ship_rounds). */
typedef struct round {
    part_state *p;
    ship_entry *recs[LOGSHIP_GROUP_RECORDS];
    size_t n;
    node_map *m;
    const pmap_replicas *r;
    uint32_t need; /* copies that must hold the records: min-in-sync */
    uint64_t epoch;
    shipment s;
    uint64_t ob_trimmed;          /* the outbox trimmed through, for the replicas to follow */
    answer to[PMAP_MAX_REPLICAS]; /* the followers it goes to, then their answers */
    size_t nto;
    miss misses[PMAP_MAX_REPLICAS];
    size_t nmiss;
    int rv;
    int told; /* the round made more of the outbox shippable */
    char err[LOGSHIP_ERR_MAX];
} round;

/* Whether every record of rd was written in the epoch this node leads rd's
 * set at in the map the round was started with. A round is started after
 * its writes began, under a map taken then: a handover's take-over (or a
 * failover, or a later return of the primaryship) may have landed in
 * between. Shipped under the new epoch, the old primary's records would
 * pass the fence of a member its successor has already reconciled from,
 * be confirmed and acknowledged, and then be dropped when the successor
 * writes its own record under the same number (the member diverges and is
 * rebuilt): an acknowledged write lost, with no trace in the stream. Such
 * records are the successor's to take in or not (logship_reconcile); this
 * node leaves them unshipped and their writes unacknowledged (the client
 * retries them on the new primary under the same request id). */
static int written_in_epoch(const logship *ls, const round *rd)
{
    if (rd->r->ids[0] != ls->ns->id) {
        return 0;
    }
    for (size_t i = 0; i < rd->n; i++) {
        if (replog_rec_epoch(rd->recs[i]->rec, rd->recs[i]->len) != rd->epoch) {
            return 0;
        }
    }
    return 1;
}

/* Prepares rd: its shipment, and every required member reachable now in
 * rd->to (the others are misses at once). */
static void round_start(logship *ls, round *rd)
{
    const uint32_t table_id = rd->p->table_id, part = rd->p->part;
    rd->m = maps_acquire(ls->ns);
    const pmap_table *t = NULL;
    rd->r = logship_set_of(rd->m, table_id, part, &t, rd->err, sizeof(rd->err));
    rd->rv = rd->r == NULL ? LAPSE_EWRONGNODE : 0;
    rd->need = rd->r != NULL ? pmap_min_in_sync(rd->r, schema_replication(&t->schema)) : 1;
    rd->epoch = rd->r != NULL ? pmap_epoch(rd->r) : 0;
    if (rd->rv == 0 && !written_in_epoch(ls, rd)) {
        snprintf(rd->err, sizeof(rd->err),
                 "table %u partition %u: records %" PRIu64 "..%" PRIu64
                 " were written here as primary, but node %u leads at epoch %" PRIu64
                 " now: not shipped, not acknowledged",
                 (unsigned)table_id, (unsigned)part, rd->recs[0]->seq, rd->recs[rd->n - 1]->seq,
                 (unsigned)rd->r->ids[0], rd->epoch);
        rd->rv = LAPSE_EWRONGNODE;
    }
    uint32_t bits = rd->rv == 0 ? logship_required(ls, rd->m, rd->r, table_id, part, NULL) : 0;
    shipment_init(&rd->s, ls, table_id, part, rd->epoch);
    rd->s.body.prev_epoch = rd->recs[0]->prev_epoch;
    rd->s.body.outbox_trimmed = rd->ob_trimmed;
    for (size_t i = 0; rd->rv == 0 && i < rd->n; i++) {
        rd->rv = shipment_add(&rd->s, rd->recs[i]->seq, rd->recs[i]->rec, rd->recs[i]->len, 0);
    }
    for (uint32_t i = 1; rd->rv == 0 && i < rd->r->n; i++) {
        if (!(bits >> i & 1u)) {
            continue;
        }
        const pmap_node *pn = pmap_node_find(rd->m->pm, rd->r->ids[i]);
        rpc_client *c = pn != NULL ? logship_ship_client(ls, pn->id, pn->address) : NULL;
        /* No wait of a whole timeout for a replica known to be down or with
         * no connection. */
        if (c == NULL || pn->state != PMAP_NODE_UP ||
            !rpc_client_connected(c, LOGSHIP_CONNECT_WAIT_MS)) {
            rd->misses[rd->nmiss] = (miss){.id = rd->r->ids[i]};
            snprintf(rd->misses[rd->nmiss++].why, sizeof(rd->misses[0].why), "%s",
                     c == NULL                   ? "unknown"
                     : pn->state != PMAP_NODE_UP ? "down"
                                                 : "unreachable");
            continue;
        }
        rd->to[rd->nto++] = (answer){.id = rd->r->ids[i], .client = c};
    }
}

/* Takes in rd's answers: a member that reports a gap gets the log from
 * where it stands; one that did not confirm leaves the in-sync set on the
 * coordinator's word, and the records count with the others; until that
 * answer they count as failed, and they count as failed whenever fewer
 * than min-in-sync copies (this one and the followers that confirmed)
 * hold them. Sets rd->rv. */
static void round_end(logship *ls, round *rd)
{
    const uint32_t table_id = rd->p->table_id, part = rd->p->part;
    const uint64_t seq = rd->recs[rd->n - 1]->seq;
    uint32_t confirmed[PMAP_MAX_REPLICAS];
    size_t nconfirmed = 0;
    for (size_t i = 0; i < rd->nto; i++) {
        answer *an = &rd->to[i];
        int crv = an->rv;
        if (rd->rv == 0 && crv == LAPSE_ESTATE && !an->diverged) {
            crv = catch_up(ls, an->client, an->id, table_id, part, rd->epoch, an->applied, seq,
                           an->err, sizeof(an->err));
        }
        if (rd->rv == 0 && crv != 0) {
            rd->misses[rd->nmiss] = (miss){.id = an->id, .deposed = crv == LAPSE_EPERM};
            snprintf(rd->misses[rd->nmiss++].why, sizeof(rd->misses[0].why), "%.500s",
                     an->err[0] ? an->err : lapse_strerror(crv));
        } else if (rd->rv == 0) {
            confirmed[nconfirmed++] = an->id;
        }
    }
    logship_heard(ls, table_id, part, confirmed, nconfirmed, seq); /* one lock per round */
    for (size_t i = 0; rd->rv == 0 && i < rd->nmiss; i++) {
        char why[256] = "";
        const miss *ms = &rd->misses[i];
        if (ms->deposed) {
            snprintf(rd->err, sizeof(rd->err), "replica node %u refused record %" PRIu64 ": %s",
                     (unsigned)ms->id, seq, ms->why);
            rd->rv = LAPSE_EWRONGNODE;
        } else if (logship_shrink(ls, rd->m, rd->r, table_id, part, ms->id, ms->why, why,
                                  sizeof(why)) != 0) {
            snprintf(rd->err, sizeof(rd->err),
                     "replica node %u of table %u partition %u did not confirm record %" PRIu64
                     " (%s) and stays in the in-sync set (%s): the write is not acknowledged",
                     (unsigned)ms->id, (unsigned)table_id, (unsigned)part, seq, ms->why, why);
            rd->rv = LAPSE_EUNAVAILABLE;
        }
    }
    /* Never acknowledged with fewer than min-in-sync copies holding it.
     * A shrink agreed to is not enough: the coordinator takes a DOWN
     * node's copy out of the in-sync set even below min-in-sync (and then
     * answers its shrink with yes), and a round started under that map
     * has no follower to wait for at all. Acknowledged from this copy
     * alone, the write was lost with this copy's disk: the member that left
     * the set last, which takes over then, never had it (chaos_rf3_test,
     * seed 704817032). */
    if (rd->rv == 0 && nconfirmed + 1 < rd->need) {
        snprintf(rd->err, sizeof(rd->err),
                 "table %u partition %u: record %" PRIu64 " is held by %zu of the %u copies a "
                 "write needs: not acknowledged (it stays in the log, for the followers when "
                 "they are back)",
                 (unsigned)table_id, (unsigned)part, seq, nconfirmed + 1, (unsigned)rd->need);
        rd->rv = LAPSE_EUNAVAILABLE;
    }
    maps_release(rd->m);
    shipment_fini(&rd->s);
}

/* One call to one follower carrying its part of several rounds (node-level
 * group commit): the first round's request with the others in more[]. */
typedef struct fcall {
    uint32_t id;
    rpc_client *client;
    Lapse__Request req;
    Lapse__ReplicateLogRequest env;
    Lapse__ReplicateLogRequest **more;
    answer **parts; /* nparts: where each part's answer goes */
    size_t nparts;
} fcall;

/* The calls of one send_rounds, one per follower, and the arrays their
 * parts live in (each of total entries, total being every round's
 * followers added up). */
typedef struct fcalls {
    fcall *fc;                         /* nf used */
    answer **parts;                    /* fc[f].parts are slices of it */
    Lapse__ReplicateLogRequest **more; /* fc[f].more are slices of it */
    rpc_multi_call *calls;             /* calls[f] carries fc[f] */
    size_t nf;
} fcalls;

/* Frees x's arrays (NULL ones too); x itself is the caller's. */
static void fcalls_free(fcalls *x)
{
    free(x->fc);
    free(x->parts);
    free(x->more);
    free(x->calls);
}

/* Sets every answer of rds[0..nr) to LAPSE_ENOMEM: no call was made. */
static void answer_all_oom(round *rds, size_t nr)
{
    for (size_t i = 0; i < nr; i++) {
        for (size_t t = 0; t < rds[i].nto; t++) {
            rds[i].to[t].rv = LAPSE_ENOMEM;
            snprintf(rds[i].to[t].err, sizeof(rds[i].to[t].err), "out of memory");
        }
    }
}

/* Makes one fcall per distinct follower of rds and gives each its slice of
 * x->parts and x->more, sized for its parts (nparts is left 0 for
 * fill_calls to count again). Sets x->nf. */
static void group_by_follower(fcalls *x, const round *rds, size_t nr)
{
    size_t nf = 0;
    for (size_t i = 0; i < nr; i++) {
        for (size_t t = 0; t < rds[i].nto; t++) {
            size_t f = 0;
            while (f < nf && x->fc[f].id != rds[i].to[t].id) {
                f++;
            }
            if (f == nf) {
                x->fc[nf++] = (fcall){.id = rds[i].to[t].id, .client = rds[i].to[t].client};
            }
            x->fc[f].nparts++;
        }
    }
    size_t at = 0;
    for (size_t f = 0; f < nf; f++) {
        x->fc[f].parts = x->parts + at;
        x->fc[f].more = x->more + at;
        at += x->fc[f].nparts;
        x->fc[f].nparts = 0;
    }
    x->nf = nf;
}

/* Fills each follower's call with its rounds in round order: the first
 * round's request is the envelope, the others go in more[]; each part
 * notes the answer it fills. */
static void fill_calls(fcalls *x, round *rds, size_t nr)
{
    for (size_t i = 0; i < nr; i++) {
        for (size_t t = 0; t < rds[i].nto; t++) {
            size_t f = 0;
            while (x->fc[f].id != rds[i].to[t].id) {
                f++;
            }
            fcall *c = &x->fc[f];
            if (c->nparts == 0) {
                c->req = rds[i].s.req;
                c->env = rds[i].s.body;
                c->req.replicate_log = &c->env;
            } else {
                c->more[c->nparts - 1] = &rds[i].s.body;
            }
            c->parts[c->nparts++] = &rds[i].to[t];
        }
    }
    for (size_t f = 0; f < x->nf; f++) {
        x->fc[f].env.more = x->fc[f].more;
        x->fc[f].env.n_more = x->fc[f].nparts - 1;
        x->calls[f].client = x->fc[f].client;
        x->calls[f].req = &x->fc[f].req;
    }
}

/* Fills the answer of part k of c from how its call went (call->rv and
 * call->resp, borrowed). */
static void answer_part(const fcall *c, const rpc_multi_call *call, size_t k)
{
    const Lapse__ReplicateLogResponse *body = logship_reply(call->resp);
    answer *an = c->parts[k];
    const Lapse__ReplicateLogResponse *got = body == NULL           ? NULL
                                             : k == 0               ? body
                                             : k - 1 < body->n_more ? body->more[k - 1]
                                                                    : NULL;
    if (c->nparts == 1 || call->rv != 0) {
        /* A call of one part, or one that failed as a whole: the
         * call's outcome is the part's (ESTATE with the position). */
        an->rv = call->rv;
        snprintf(an->err, sizeof(an->err), "%s", call->err);
        an->applied = logship_applied_of(call->resp);
        an->diverged = logship_diverged_of(call->resp);
    } else if (got == NULL) {
        an->rv = LAPSE_EPROTO;
        snprintf(an->err, sizeof(an->err), "node %u answered %zu of %zu parts", (unsigned)c->id,
                 body != NULL ? body->n_more + 1 : 0, c->nparts);
    } else {
        an->rv = wire_status_from_pb(got->status);
        snprintf(an->err, sizeof(an->err), "%s", got->message != NULL ? got->message : "");
        an->applied = got->applied_seq;
        an->diverged = got->diverged;
    }
}

/* Sends every round's records to its followers, one call per follower
 * carrying all the rounds bound for it, and fills in each round's answers.
 * Returns the calls made. */
static size_t send_rounds(round *rds, size_t nr)
{
    size_t total = 0;
    for (size_t i = 0; i < nr; i++) {
        total += rds[i].nto;
    }
    if (total == 0) {
        return 0;
    }
    fcalls x = {.fc = calloc(total, sizeof(*x.fc)),
                .parts = calloc(total, sizeof(*x.parts)),
                .more = calloc(total, sizeof(*x.more)),
                .calls = calloc(total, sizeof(*x.calls))};
    if (x.fc == NULL || x.parts == NULL || x.more == NULL || x.calls == NULL) {
        answer_all_oom(rds, nr);
        fcalls_free(&x);
        return 0;
    }
    /* Each call's parts are contiguous in parts[] (and its more[] in
     * more[]), in round order. */
    group_by_follower(&x, rds, nr);
    fill_calls(&x, rds, nr);
    rpc_call_many(x.calls, x.nf, LOGSHIP_TIMEOUT_MS);
    for (size_t f = 0; f < x.nf; f++) {
        for (size_t k = 0; k < x.fc[f].nparts; k++) {
            answer_part(&x.fc[f], &x.calls[f], k);
        }
        rpc_response_free(x.calls[f].resp);
    }
    const size_t nf = x.nf;
    fcalls_free(&x);
    return nf;
}

/* Adds p to the partitions with queued records, at the end, unless it is
 * there. REQUIRES: ls->lock held. */
static void pending_add(logship *ls, part_state *p)
{
    if (p->pending) {
        return;
    }
    p->pending = 1;
    p->pend_next = NULL;
    *(ls->pend_tail != NULL ? &ls->pend_tail->pend_next : &ls->pend_head) = p;
    ls->pend_tail = p;
}

/* Group commit. The ship hook only queues a record (in seq order: it runs
 * under the stripe lock) and lists its partition as pending; whoever then
 * waits for a record of its own that is not on the wire, while fewer than
 * LOGSHIP_CALLS_IN_FLIGHT shipments are, takes the queues of every pending
 * partition with no round on the wire (each up to LOGSHIP_GROUP_RECORDS /
 * _BYTES: a round) and ships them as one call per follower (ship_rounds),
 * so the writes that queued while shipments were out, to any partition,
 * share the next one. */
static int hook_ship(void *arg, uint32_t table_id, uint32_t part, uint64_t seq, uint64_t prev_epoch,
                     const uint8_t *rec, size_t len, void **ticket, char *err, size_t errlen)
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
        pending_add(ls, p);
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

/* Takes the queue of every pending partition with no round on the wire
 * into rds (at most cand rounds, up to LOGSHIP_CALL_BYTES in all), in the
 * order they queued, marks them shipping and unlists the partitions left
 * with nothing queued. Returns the rounds taken. REQUIRES: ls->lock held. */
static size_t take_rounds(logship *ls, round *rds, size_t cand)
{
    size_t nr = 0, all_bytes = 0;
    part_state **link = &ls->pend_head;
    ls->pend_tail = NULL;
    while (*link != NULL) {
        part_state *p = *link;
        if (!p->shipping && p->q_head != NULL && nr < cand && all_bytes < LOGSHIP_CALL_BYTES) {
            round *rd = &rds[nr++];
            rd->p = p;
            rd->ob_trimmed = p->ob_trimmed;
            size_t bytes = 0;
            while (p->q_head != NULL && rd->n < LOGSHIP_GROUP_RECORDS &&
                   (rd->n == 0 || bytes + p->q_head->len <= LOGSHIP_GROUP_BYTES)) {
                rd->recs[rd->n++] = p->q_head;
                bytes += p->q_head->len;
                p->q_head = p->q_head->next;
            }
            all_bytes += bytes;
            p->shipping = 1;
        }
        if (p->q_head == NULL) {
            *link = p->pend_next; /* a round end puts it back when records queued meanwhile */
            p->pending = 0;
        } else {
            ls->pend_tail = p;
            link = &p->pend_next;
        }
    }
    return nr;
}

/* Marks every record of rds through with its round's outcome, lists again
 * the partitions that queued records meanwhile, and tells the shipper of
 * the rounds whose records every waited-for member now holds (with
 * ls->lock released for that). REQUIRES: ls->lock held. */
static void finish_rounds(logship *ls, round *rds, size_t nr)
{
    int tell = 0;
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
        if (rd->p->q_head != NULL) {
            pending_add(ls, rd->p);
        }
        rd->p->lag_gen += rd->rv != 0; /* the resync thread sends the records on */
        /* Every waited-for member holds the log up to the round's end: a
         * member applies in order, with no gap (logship_outbox.c). */
        rd->told = rd->rv == 0 && logship_confirmed_locked(rd->p, rd->p->done_seq);
        tell |= rd->told;
    }
    pthread_cond_broadcast(&ls->shipped);
    if (tell) {
        /* The shipper's lock is never held around a logship call, but no
         * callback runs under ls->lock all the same. */
        pthread_mutex_unlock(&ls->lock);
        for (size_t i = 0; i < nr; i++) {
            if (rds[i].told) {
                logship_tell_shipper(ls, rds[i].p->table_id, rds[i].p->part);
            }
        }
        pthread_mutex_lock(&ls->lock);
    }
}

/* Node-level group commit. Unless LOGSHIP_CALLS_IN_FLIGHT shipments are
 * on the wire, takes the queue of every partition that has records and no
 * round on the wire (in the order they queued, up to LOGSHIP_CALL_BYTES),
 * ships those rounds together, one call per follower, and marks their
 * records through (shipped, or failed with the round's error). Returns how
 * many rounds it shipped: 0 when it could not (the caller waits for
 * ls->shipped, which every shipment's end broadcasts). REQUIRES: ls->lock
 * held (released while the rounds are on the wire). */
static size_t ship_rounds(logship *ls)
{
    if (ls->calls_out >= LOGSHIP_CALLS_IN_FLIGHT) {
        return 0;
    }
    size_t cand = 0;
    for (const part_state *p = ls->pend_head; p != NULL; p = p->pend_next) {
        cand += !p->shipping && p->q_head != NULL;
    }
    round *rds = cand > 0 ? calloc(cand, sizeof(*rds)) : NULL;
    if (rds == NULL) {
        return 0; /* nothing to ship, or out of memory: try again after the next round */
    }
    size_t nr = take_rounds(ls, rds, cand);
    ls->calls_out++;
    pthread_mutex_unlock(&ls->lock);
    if (fault_switch_on(ls->ns, "slow-ship")) {
        /* Test fault: a shipment that leaves late (a slow link or CPU),
         * with its records' writes waiting on it while maps change. */
        clock_sleep_ms(SLOW_SHIP_MS);
    }
    for (size_t i = 0; i < nr; i++) {
        round_start(ls, &rds[i]);
    }
    const int64_t sent_us = clock_mono_us();
    size_t calls = send_rounds(rds, nr);
    if (calls > 0) {
        logship_time_round(ls, clock_mono_us() - sent_us);
    }
    for (size_t i = 0; i < nr; i++) {
        round_end(ls, &rds[i]);
    }
    atomic_fetch_add(&ls->rounds, nr);
    atomic_fetch_add(&ls->calls, calls);
    pthread_mutex_lock(&ls->lock);
    ls->calls_out--;
    finish_rounds(ls, rds, nr);
    free(rds);
    return nr;
}

/* Waits until every ticket's record is through, shipping the queued
 * rounds itself (of every partition, together) whenever it may: so a
 * batch's partitions, and concurrent writes to different partitions, go
 * out in one call per follower. Returns the first failure in ticket
 * order. */
static int hook_wait(void *arg, void *const *tickets, size_t n, int *rvs, char *err, size_t errlen)
{
    logship *ls = arg;
    pthread_mutex_lock(&ls->lock);
    for (;;) {
        int through = 1;
        for (size_t i = 0; i < n && through; i++) {
            through = ((const ship_entry *)tickets[i])->done;
        }
        if (through) {
            break;
        }
        /* A waiter whose own records are not on the wire ships (and takes
         * every other pending partition along) when the limit allows; else
         * it waits for the shipment on the wire to end. Nobody waits here
         * holding a stripe lock (store_commit_start), so a shipment that
         * does not carry its records holds up nothing it needs. */
        int mine = 0;
        for (size_t i = 0; i < n && !mine; i++) {
            const ship_entry *e = tickets[i];
            mine = !e->done && !e->owner->shipping;
        }
        if (!mine || ship_rounds(ls) == 0) {
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
        if (rvs != NULL) {
            rvs[i] = e->rv;
        }
        free(e);
    }
    return rv;
}

static void hook_settle(void *arg, uint32_t table_id, uint32_t part, uint64_t seq)
{
    logship *ls = arg;
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    while (p != NULL && p->done_seq < seq && (p->shipping || p->q_head != NULL)) {
        if (p->shipping || ship_rounds(ls) == 0) {
            pthread_cond_wait(&ls->shipped, &ls->lock);
        }
    }
    pthread_mutex_unlock(&ls->lock);
}

int logship_open(logship **out, node_server *ns)
{
    logship *ls = calloc(1, sizeof(*ls));
    if (ls == NULL) {
        return LAPSE_ENOMEM;
    }
    ls->ns = ns;
    if (rpc_loop_open_driven(&ls->ship_loop) != 0) {
        free(ls);
        return LAPSE_ENOMEM;
    }
    pthread_mutex_init(&ls->lock, NULL);
    clock_cond_init_mono(&ls->wake); /* resync_main waits on clock_mono_abstime */
    pthread_cond_init(&ls->shipped, NULL);
    store_repl_hook h = {.prepare = hook_prepare,
                         .logged = hook_logged,
                         .begin = hook_begin,
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
        rpc_client_close(ls->peers[i].ship);
    }
    while (ls->retired != NULL) {
        retired_client *r = ls->retired;
        ls->retired = r->next;
        rpc_client_close(r->client);
        free(r);
    }
    rpc_loop_close(ls->ship_loop); /* after every client on it */
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
