/*
 * resync.c: a primary brings its replicas outside the in-sync set back
 * (docs/replication.md, "Failover"). Every LOGSHIP_RESYNC_PERIOD_MS it
 * looks at each partition it is the primary of, and for each member that
 * is UP but not in sync:
 *   1. asks where it stands; a member holding records this log has not (a
 *      deposed primary's unacknowledged suffix), one behind the first
 *      record this log still holds (trimmed, replog.h), or one with no
 *      record at all, is told to drop its copy, which is then rebuilt:
 *      from the log when it still starts at record 1, else from a
 *      snapshot of this copy (snapshot.h), shipped call after call while
 *      writes go on;
 *   2. sends it the log while writes go on, until it is at most
 *      LOGSHIP_RESYNC_TAIL records behind;
 *   3. holds the partition's writes (its stripe lock), sends the rest, and
 *      asks the coordinator to add it to the in-sync set; from the answer
 *      on, writes wait for it too (logship_int.h, "joining"). Since no
 *      write happened between its last record and the join, it has every
 *      acknowledged write when the map says it is in sync.
 * And after a failed ship (logship_int.h, "lag_gen"), or once it became
 * the primary (a new epoch, or a restart that forgot its failed ships), it
 * sends the in-sync members the records they may lack, so they end equal
 * to this copy even when no write follows.
 */
#include <errno.h>
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
#include "fault_switch.h"
#include "logship_int.h"
#include "resync_int.h"
#include "registry.h"

#define RESYNC_FAR_ROUNDS 256 /* catch-up calls per member per pass, writes going on */
#define RESYNC_NEAR_ROUNDS 4  /* with the partition held */
#define RESYNC_JOIN_TIMEOUT_MS 2000
#define RESYNC_JOIN_RETRY_MS 1000  /* a join with no answer is asked again after */
#define RESYNC_WARN_EVERY_MS 10000 /* a member that cannot be resynced, in the log */
#define RESYNC_HOLD_MAX_MS 10000   /* a pass held by the hold-after-join switch, at most */

/* Where replica c stands: its last record's seq and epoch. */
static int position_of(logship *ls, rpc_client *c, uint32_t table_id, uint32_t part, uint64_t epoch,
                       uint64_t *seq, uint64_t *rec_epoch, char *err, size_t errlen)
{
    shipment s;
    shipment_init(&s, ls, table_id, part, epoch);
    Lapse__Response *resp = NULL;
    int rv = rpc_call(c, &s.req, LOGSHIP_TIMEOUT_MS, &resp, err, errlen);
    const Lapse__ReplicateLogResponse *got = logship_reply(resp);
    if (rv == 0 && got == NULL) {
        rv = LAPSE_EPROTO;
        snprintf(err, errlen, "no ReplicateLog reply");
    }
    if (rv == 0) {
        *seq = got->applied_seq;
        *rec_epoch = got->applied_epoch;
    }
    rpc_response_free(resp);
    shipment_fini(&s);
    return rv;
}

/* Counts id as joining (table_id, part) at the set's count changes
 * (logship_int.h): writes wait for id from now on. unknown: the ask has
 * no answer yet (or was refused), so join_again asks again after
 * RESYNC_JOIN_RETRY_MS. */
static void note_join(logship *ls, uint32_t table_id, uint32_t part, uint64_t changes, uint32_t id,
                      int unknown)
{
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    for (size_t j = 0; p != NULL && j < PMAP_MAX_REPLICAS; j++) {
        if (p->joining[j] == 0 || p->joining[j] == id) {
            p->joining[j] = id;
            p->join_changes[j] = changes;
            p->join_unknown[j] = (uint8_t)unknown;
            break;
        }
    }
    if (p != NULL && unknown) {
        p->join_retry_ms = clock_mono_now().ms + RESYNC_JOIN_RETRY_MS;
    }
    pthread_mutex_unlock(&ls->lock);
}

/* Asks the coordinator to put id in the in-sync set of (table_id, part),
 * which the asker's map shows at changes; whatever the answer, counts id
 * as joining at that count (note_join): a join lands only at the count it
 * was asked at, so writes wait for id until a map at another count says
 * whether it did. An ask with no yes is asked again (join_again) until such
 * a map comes.
 * REQUIRES: id already counted as joining (note_join under the stripe lock,
 * so that no write came between the last record and the count); the ask
 * itself holds no lock, so writes to the partition go on meanwhile. */
static void join(logship *ls, uint32_t table_id, uint32_t part, uint64_t epoch, uint64_t changes,
                 uint32_t id)
{
    Lapse__Request req;
    Lapse__ReplicaJoinRequest body;
    lapse__request__init(&req);
    lapse__replica_join_request__init(&body);
    body.table_id = table_id;
    body.partition = part;
    body.epoch = epoch;
    body.primary_node = ls->ns->id;
    body.node = id;
    body.set_changes = changes;
    req.body_case = LAPSE__REQUEST__BODY_REPLICA_JOIN;
    req.replica_join = &body;
    Lapse__Response *resp = NULL;
    char err[256] = "";
    int rv = rpc_call(ls->ns->coord, &req, RESYNC_JOIN_TIMEOUT_MS, &resp, err, sizeof(err));
    int unknown = 0;
    const int yes = rv == 0 && resp->body_case == LAPSE__RESPONSE__BODY_REPLICA_JOIN;
    const uint64_t mine = yes ? maps_version(ls->ns) : 0; /* the map this node holds now */
    if (yes && resp->replica_join->pmap_version < mine) {
        /* An older map than this node's says yes: a coordinator that led
         * once and answers from its last map. The map settles it, or the
         * ask goes again. */
        unknown = 1;
        log_warn("table %u partition %u: node %u's join was answered from map version %" PRIu64
                 ", older than this node's %" PRIu64 "; asked again in %d ms",
                 (unsigned)table_id, (unsigned)part, (unsigned)id, resp->replica_join->pmap_version,
                 mine, RESYNC_JOIN_RETRY_MS);
    } else if (yes) {
        log_info("table %u partition %u: node %u is in sync again (map version %" PRIu64 ")",
                 (unsigned)table_id, (unsigned)part, (unsigned)id,
                 resp->replica_join->pmap_version);
    } else if (rv == LAPSE_EWRONGNODE || rv == LAPSE_EINVAL || rv == LAPSE_ENOTFOUND ||
               rv == LAPSE_ESTATE) {
        /* Asked again all the same: a refusal because the set moved on
         * goes with a map at another count, which settles it, and one
         * because the commit failed (a leader change) may pass next time. */
        unknown = 1;
        log_info("table %u partition %u: the coordinator refused node %u's join: %s",
                 (unsigned)table_id, (unsigned)part, (unsigned)id, err);
    } else {
        unknown = 1;
        log_warn("table %u partition %u: node %u's join has no answer (%s: %s); writes wait for "
                 "it until the map says, and it is asked again in %d ms",
                 (unsigned)table_id, (unsigned)part, (unsigned)id, lapse_strerror(rv), err,
                 RESYNC_JOIN_RETRY_MS);
    }
    rpc_response_free(resp);
    note_join(ls, table_id, part, changes, id, unknown);
}

/* Settles the joins of (table_id, part) that r (this pass's map) answers:
 * a member no longer in the set, or a set at another count of changes,
 * says whether each landed, and its slot is freed. Asks again the joins
 * with no answer that no map settled yet: writes have waited for those
 * members since the first ask, so no hold is needed. */
static void join_again(logship *ls, const pmap_replicas *r, uint32_t table_id, uint32_t part)
{
    uint32_t ids[PMAP_MAX_REPLICAS];
    uint64_t counts[PMAP_MAX_REPLICAS];
    size_t n = 0;
    int64_t now = clock_mono_now().ms;
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    int retry = p != NULL && now >= p->join_retry_ms;
    for (size_t j = 0; p != NULL && j < PMAP_MAX_REPLICAS; j++) {
        if (p->joining[j] == 0) {
            continue;
        }
        int i = pmap_replicas_index(r, p->joining[j]);
        if (i <= 0 || p->join_changes[j] != r->changes || pmap_in_sync(r, (uint32_t)i)) {
            p->joining[j] = 0; /* settled by the map */
            p->join_unknown[j] = 0;
        } else if (p->join_unknown[j] && retry) {
            ids[n] = p->joining[j];
            counts[n++] = p->join_changes[j];
        }
    }
    if (n > 0) {
        p->join_retry_ms = now + RESYNC_JOIN_RETRY_MS;
    }
    pthread_mutex_unlock(&ls->lock);
    for (size_t i = 0; i < n; i++) {
        join(ls, table_id, part, pmap_epoch(r), counts[i], ids[i]);
    }
}

/* Warns about (table_id, part): what failed and why, at most once per
 * RESYNC_WARN_EVERY_MS per partition (a pass runs every 200 ms). */
static void warn_every(logship *ls, uint32_t table_id, uint32_t part, const char *what,
                       const char *err)
{
    int64_t now = clock_mono_now().ms;
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    int say = p != NULL &&
              (p->resync_warned_ms == 0 || now - p->resync_warned_ms >= RESYNC_WARN_EVERY_MS);
    if (say) {
        p->resync_warned_ms = now;
    }
    pthread_mutex_unlock(&ls->lock);
    if (say) {
        log_warn("table %u partition %u: %s: %s (said at most every %d s)", (unsigned)table_id,
                 (unsigned)part, what, err, RESYNC_WARN_EVERY_MS / 1000);
    }
}

/* Warns that member id of (table_id, part) cannot be resynced. */
static void warn_resync(logship *ls, uint32_t table_id, uint32_t part, uint32_t id, const char *err)
{
    char what[64];
    snprintf(what, sizeof(what), "cannot resync node %u", (unsigned)id);
    warn_every(ls, table_id, part, what, err);
}

/* Sends replica c this log after *applied, call after call (at most
 * rounds), until it is at most tail records behind; *my_seq gets this
 * log's last seq as of the last look. */
static int send_until(logship *ls, rpc_client *c, uint32_t id, uint32_t table_id, uint32_t part,
                      uint64_t epoch, uint64_t tail, int rounds, uint64_t *applied,
                      uint64_t *my_seq, char *err, size_t errlen)
{
    uint64_t my_epoch;
    int diverged = 0;
    for (int round = 0; round <= rounds; round++) {
        int rv = replog_position(ls->ns->st, table_id, part, &my_epoch, my_seq, err, errlen);
        if (rv != 0 || *my_seq <= *applied + tail || round == rounds) {
            return rv;
        }
        if ((rv = logship_send_after(ls, c, id, table_id, part, epoch, applied, &diverged, err,
                                     errlen)) != 0) {
            return rv;
        }
    }
    return 0;
}

/* Whether member id of r, a set of a one-copy table being moved, was not
 * rebuilt from a snapshot by this process since the set last changed:
 * such a table's log is written only while it has a second copy, so only
 * a snapshot brings a new copy up. */
static int single_unrebuilt(logship *ls, const pmap_replicas *r, uint32_t table_id, uint32_t part,
                            uint32_t id)
{
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    int rebuilt =
        p != NULL && p->single_rebuilt_id == id && p->single_rebuilt_changes == r->changes;
    pthread_mutex_unlock(&ls->lock);
    return !rebuilt;
}

/* Notes that member id of r was rebuilt from a snapshot (single_unrebuilt). */
static void note_single_rebuilt(logship *ls, const pmap_replicas *r, uint32_t table_id,
                                uint32_t part, uint32_t id)
{
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    if (p != NULL) {
        p->single_rebuilt_id = id;
        p->single_rebuilt_changes = r->changes;
    }
    pthread_mutex_unlock(&ls->lock);
}

/* Test fault (the hold-after-join switch): after a member's join, the pass
 * stays here while the switch is on (RESYNC_HOLD_MAX_MS at most, and not
 * past logship_stop), so writes that wait for the member come, and their
 * rounds end, before the partition's send_lag: which members that counts
 * the log confirmed with is then under test (docs/chaos.md). */
static void hold_after_join(logship *ls, uint32_t table_id, uint32_t part, uint32_t id)
{
    for (int waited = 0; waited < RESYNC_HOLD_MAX_MS; waited += 50) {
        pthread_mutex_lock(&ls->lock);
        int stop = ls->stop;
        pthread_mutex_unlock(&ls->lock);
        if (stop || !fault_switch_on(ls->ns, "hold-after-join")) {
            return;
        }
        if (waited == 0) {
            log_warn("test fault hold-after-join: table %u partition %u: the resync pass holds "
                     "after node %u's join",
                     (unsigned)table_id, (unsigned)part, (unsigned)id);
        }
        clock_sleep_ms(50);
    }
}

/* One member's resync (resync_one): what its phases share. */
typedef struct member_sync {
    logship *ls;
    const node_map *m;
    const pmap_replicas *r;
    int one_copy;                /* r is a set of a one-copy table (being moved) */
    uint32_t table_id, part, id; /* the partition, and the member brought back */
    rpc_client *c;               /* to member id */
    uint64_t epoch;              /* r's */
    uint64_t applied;            /* the last record member id holds */
    uint64_t my_seq;             /* where this log ends */
    char err[512];
} member_sync;

/* Learns where member id and this log stand: ms->applied, ms->my_seq, the
 * epoch of the member's last record (*their_epoch) and the first record
 * this log still holds (*first). Returns 0 or a LAPSE_E* code (ms->err
 * set). */
static int learn_positions(member_sync *ms, uint64_t *their_epoch, uint64_t *first)
{
    store *st = ms->ls->ns->st;
    uint64_t my_epoch = 0;
    int rv = position_of(ms->ls, ms->c, ms->table_id, ms->part, ms->epoch, &ms->applied,
                         their_epoch, ms->err, sizeof(ms->err));
    if (rv == 0) {
        logship_heard(ms->ls, ms->table_id, ms->part, &ms->id, 1, ms->applied);
    }
    if (rv == 0 && (rv = replog_position(st, ms->table_id, ms->part, &my_epoch, &ms->my_seq,
                                         ms->err, sizeof(ms->err))) == 0) {
        rv = replog_first(st, ms->table_id, ms->part, first, ms->err, sizeof(ms->err));
    }
    return rv;
}

/* Why member id's copy is to be rebuilt rather than brought up from this
 * log, into *why (NULL: the log will do). Returns 0 or a LAPSE_E* code
 * (ms->err set); *why is set either way. */
static int rebuild_reason(member_sync *ms, uint64_t their_epoch, uint64_t first, const char **why)
{
    store *st = ms->ls->ns->st;
    uint64_t mine = 0;
    int rv = 0;
    /* The log brings it up when it holds record applied (or applied is
     * where the log ends) and every record after it. */
    int erv = ms->applied <= ms->my_seq
                  ? replog_record_epoch(st, ms->table_id, ms->part, ms->applied, &mine, ms->err,
                                        sizeof(ms->err))
                  : LAPSE_ENOTFOUND;
    *why = NULL;
    if (ms->applied > ms->my_seq || (erv == 0 && mine != their_epoch)) {
        *why = "held records this primary's log has not (a deposed primary's unacknowledged "
               "writes)";
    } else if (erv == LAPSE_ENOTFOUND || (ms->applied < ms->my_seq && ms->applied + 1 < first)) {
        *why = "is behind the first record this log still holds";
    } else if (erv != 0) {
        rv = erv;
    } else if (ms->applied == 0 && ms->my_seq > 0) {
        *why = "has no record (a new or wiped copy, or a rebuild cut short)";
    }
    /* A one-copy table's log lacks the writes made while it had one
     * copy: a copy it did not rebuild is rebuilt, never from the log. This
     * holds even when the record's epoch could not be read (rv): a rebuild
     * from a snapshot needs no record, so resync_one rebuilds, and its
     * outcome is the one that counts. */
    if (*why == NULL && ms->one_copy &&
        single_unrebuilt(ms->ls, ms->r, ms->table_id, ms->part, ms->id)) {
        *why = "is a new copy of a one-copy table's partition";
    }
    return rv;
}

/* Rebuilds member id's copy (why: the reason, for the log): from a
 * snapshot when this log lacks records (first > 1) or the table keeps one
 * copy, else by dropping it, to be filled from the log. Returns 0 or a
 * LAPSE_E* code (ms->err set). */
static int rebuild_copy(member_sync *ms, const char *why, uint64_t first)
{
    if (first > 1 || ms->one_copy) {
        int rv = resync_send_snapshot(ms->ls, ms->c, ms->id, ms->table_id, ms->part, ms->epoch, why,
                                      &ms->applied, ms->err, sizeof(ms->err));
        if (rv == 0 && ms->one_copy) {
            note_single_rebuilt(ms->ls, ms->r, ms->table_id, ms->part, ms->id);
        }
        return rv;
    }
    int rv = resync_reset_copy(ms->ls, ms->c, ms->id, ms->table_id, ms->part, ms->epoch, why,
                               ms->err, sizeof(ms->err));
    ms->applied = 0;
    return rv;
}

/* Under this log's lock (writes wait): reconciles the set, sends member id
 * the last records, and joins it when it has every one. */
static void catch_up_and_join(member_sync *ms)
{
    store *st = ms->ls->ns->st;
    replog_lock(st, ms->table_id, ms->part);
    atomic_fetch_add(&ms->ls->calls_under_stripe, 1); /* logship_on_conn_thread */
    int rv = logship_reconcile(ms->ls, ms->m, ms->r, ms->table_id, ms->part, NULL, ms->err,
                               sizeof(ms->err));
    if (rv == 0) {
        rv = send_until(ms->ls, ms->c, ms->id, ms->table_id, ms->part, ms->epoch, 0,
                        RESYNC_NEAR_ROUNDS, &ms->applied, &ms->my_seq, ms->err, sizeof(ms->err));
    }
    logship_heard(ms->ls, ms->table_id, ms->part, &ms->id, 1, ms->applied);
    int joins = rv == 0 && ms->applied == ms->my_seq;
    if (joins) {
        /* writes wait for it from here */
        note_join(ms->ls, ms->table_id, ms->part, ms->r->changes, ms->id, 1);
    } else if (rv != 0) {
        warn_resync(ms->ls, ms->table_id, ms->part, ms->id, ms->err);
    }
    atomic_fetch_sub(&ms->ls->calls_under_stripe, 1);
    replog_unlock(st, ms->table_id, ms->part);
    if (joins) {
        join(ms->ls, ms->table_id, ms->part, ms->epoch, ms->r->changes, ms->id);
        hold_after_join(ms->ls, ms->table_id, ms->part, ms->id);
    }
}

/* Brings member id of r back (steps 1-3 above); one_copy: r is a set of
 * a one-copy table (being moved). */
static void resync_one(logship *ls, const node_map *m, const pmap_replicas *r, int one_copy,
                       uint32_t table_id, uint32_t part, uint32_t id)
{
    member_sync ms = {.ls = ls,
                      .m = m,
                      .r = r,
                      .one_copy = one_copy,
                      .table_id = table_id,
                      .part = part,
                      .id = id};
    const pmap_node *pn = pmap_node_find(m->pm, id);
    ms.c = pn != NULL && pn->state == PMAP_NODE_UP ? logship_peer_client(ls, pn->id, pn->address)
                                                   : NULL;
    if (ms.c == NULL || !rpc_client_connected(ms.c, LOGSHIP_CONNECT_WAIT_MS)) {
        return;
    }
    /* A one-copy table's copy that leaves (the old primary, handed over
     * from) is removed next, not rebuilt: one copy is all it keeps. */
    if (one_copy && (r->leaving == id || pmap_node_leaving(m->pm, id))) {
        return;
    }
    ms.epoch = pmap_epoch(r);
    uint64_t their_epoch = 0, first = 0;
    const char *why = NULL;
    int rv = learn_positions(&ms, &their_epoch, &first);
    if (rv == 0) {
        rv = rebuild_reason(&ms, their_epoch, first, &why);
        if (why != NULL) {
            rv = rebuild_copy(&ms, why, first);
        }
    }
    if (rv == 0) {
        rv = send_until(ls, ms.c, id, table_id, part, ms.epoch, LOGSHIP_RESYNC_TAIL,
                        RESYNC_FAR_ROUNDS, &ms.applied, &ms.my_seq, ms.err, sizeof(ms.err));
        logship_heard(ls, table_id, part, &id, 1, ms.applied);
    }
    if (rv != 0 || ms.my_seq > ms.applied + LOGSHIP_RESYNC_TAIL) {
        if (rv != 0) {
            warn_resync(ls, table_id, part, id, ms.err);
        }
        return; /* the next pass goes on */
    }
    catch_up_and_join(&ms);
}

/* Sends the required members of (table_id, part), which this node leads
 * at epoch, this log's records they lack, once a ship failed since the
 * last time (lag_gen). Writes go on meanwhile: a replica applies in order
 * and acknowledges a resend without effect. */
static void send_lag(logship *ls, uint64_t epoch, uint32_t table_id, uint32_t part)
{
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    uint64_t gen = p != NULL ? p->lag_gen : 0;
    int due = p != NULL && p->lag_gen != p->lag_done;
    pthread_mutex_unlock(&ls->lock);
    if (!due) {
        return;
    }
    /* Whoever holds the log past this point holds it up to here: confirmed
     * below when every waited-for member does (logship_outbox.c). */
    uint64_t start_epoch = 0, start_seq = 0;
    char perr[256];
    if (replog_position(ls->ns->st, table_id, part, &start_epoch, &start_seq, perr, sizeof(perr)) !=
        0) {
        return;
    }
    /* The members to wait for are read now, after the position, not taken
     * from the start of the pass: its resync_one may have made a member
     * join since, and the writes since wait for that member, their rounds
     * possibly still on the way to it. Confirmed without it, the shipper
     * would send the destinations an outbox record whose write that member
     * lacks; should this node die then, the member takes over and gives its
     * next write the same outbox seq, which the destinations skip as
     * applied: that write's stream record lost, and one of a write no copy
     * kept in its place (docs/chaos.md, primary_churn_test). A member
     * counts as joining from before its join is asked (note_join), and
     * only this thread asks, so none starts to count between this look and
     * the confirmation. */
    node_map *m = maps_acquire(ls->ns);
    const pmap_replicas *r = logship_set_of(m, table_id, part, NULL, perr, sizeof(perr));
    if (r == NULL || r->ids[0] != ls->ns->id || pmap_epoch(r) != epoch) {
        maps_release(m);
        return; /* not this node's to confirm any more; still due */
    }
    uint32_t bits = logship_required(ls, m, r, table_id, part, NULL);
    int all = 1;
    for (uint32_t i = 1; i < r->n; i++) {
        if (!(bits >> i & 1u)) {
            continue;
        }
        const pmap_node *pn = pmap_node_find(m->pm, r->ids[i]);
        rpc_client *c = pn != NULL && pn->state == PMAP_NODE_UP
                            ? logship_peer_client(ls, pn->id, pn->address)
                            : NULL;
        uint64_t applied = 0, their_epoch = 0, my_seq = 0;
        char err[512] = "";
        int rv = c == NULL || !rpc_client_connected(c, LOGSHIP_CONNECT_WAIT_MS)
                     ? LAPSE_EUNAVAILABLE
                     : position_of(ls, c, table_id, part, pmap_epoch(r), &applied, &their_epoch,
                                   err, sizeof(err));
        if (rv == 0) {
            rv = send_until(ls, c, r->ids[i], table_id, part, pmap_epoch(r), 0, RESYNC_NEAR_ROUNDS,
                            &applied, &my_seq, err, sizeof(err));
            logship_heard(ls, table_id, part, &r->ids[i], 1, applied);
        }
        all &= rv == 0 && applied >= my_seq;
    }
    maps_release(m);
    if (all) {
        pthread_mutex_lock(&ls->lock);
        p->lag_done = gen; /* a ship failed since: lag_gen moved on, due again */
        int tell = logship_confirmed_locked(p, start_seq);
        pthread_mutex_unlock(&ls->lock);
        if (tell) {
            logship_tell_shipper(ls, table_id, part);
        }
    }
}

/* Reconciles a partition this node leads and has not written to in its
 * epoch yet (logship_reconcile, which a write would do first): a restarted
 * or new primary must also send its in-sync members what they lack when
 * no write comes (logship.c). A failure is retried on the next pass. */
static void reconcile(logship *ls, const node_map *m, const pmap_replicas *r, uint32_t table_id,
                      uint32_t part)
{
    char err[512] = "";
    replog_lock(ls->ns->st, table_id, part);
    int rv = logship_reconcile(ls, m, r, table_id, part, NULL, err, sizeof(err));
    replog_unlock(ls->ns->st, table_id, part);
    if (rv != 0) {
        warn_every(ls, table_id, part, "cannot take over as the primary", err);
    }
}

/* Whether logship_stop asked the thread to end. */
static int stopping(logship *ls)
{
    pthread_mutex_lock(&ls->lock);
    int stop = ls->stop;
    pthread_mutex_unlock(&ls->lock);
    return stop;
}

/* One look at every partition this node leads. It ends early when the
 * node is stopping: a node promoted while it shuts down (its peers gone
 * first) would otherwise wait on each stopped peer of each partition in
 * turn, seconds in all, before node_close could go on. */
static void pass(logship *ls)
{
    node_map *m = maps_acquire(ls->ns);
    if (registry_may_lead(ls->ns, m->pm, NULL, 0) != 0) {
        maps_release(m); /* no lease: not a primary now (registry.h) */
        return;
    }
    for (size_t t = 0; t < m->pm->ntables; t++) {
        const pmap_table *tb = &m->pm->tables[t];
        if (!pmap_logged(tb, PMAP_ANY_PART, ls->ns->id)) {
            continue; /* one copy everywhere (a one-copy set being moved has two) */
        }
        for (uint32_t p = 0; p < tb->schema.partitions; p++) {
            const pmap_replicas *r = &tb->parts[p];
            if (r->n < 2 || r->ids[0] != ls->ns->id) {
                continue;
            }
            if (stopping(ls)) {
                maps_release(m);
                return;
            }
            int reconciled = 0;
            uint32_t bits = logship_required(ls, m, r, tb->schema.id, p, &reconciled);
            if (!reconciled) {
                reconcile(ls, m, r, tb->schema.id, p);
            }
            join_again(ls, r, tb->schema.id, p);
            for (uint32_t i = 1; i < r->n; i++) {
                if (!(bits >> i & 1u)) {
                    resync_one(ls, m, r, schema_replication(&tb->schema) < 2, tb->schema.id, p,
                               r->ids[i]);
                }
            }
            send_lag(ls, pmap_epoch(r), tb->schema.id, p);
        }
    }
    maps_release(m);
}

static void *resync_main(void *arg)
{
    logship *ls = arg;
    pthread_mutex_lock(&ls->lock);
    while (!ls->stop) {
        struct timespec until = clock_mono_abstime(LOGSHIP_RESYNC_PERIOD_MS);
        while (!ls->stop && pthread_cond_timedwait(&ls->wake, &ls->lock, &until) != ETIMEDOUT) {
        }
        if (ls->stop) {
            break;
        }
        pthread_mutex_unlock(&ls->lock);
        pass(ls);
        pthread_mutex_lock(&ls->lock);
    }
    pthread_mutex_unlock(&ls->lock);
    return NULL;
}

int logship_start(logship *ls)
{
    ls->stop = 0;
    if (pthread_create(&ls->thread, NULL, resync_main, ls) != 0) {
        return LAPSE_ENOMEM;
    }
    ls->running = 1;
    return 0;
}

void logship_stop(logship *ls)
{
    if (!ls->running) {
        return;
    }
    pthread_mutex_lock(&ls->lock);
    ls->stop = 1;
    pthread_cond_broadcast(&ls->wake);
    pthread_mutex_unlock(&ls->lock);
    pthread_join(ls->thread, NULL);
    ls->running = 0;
}
