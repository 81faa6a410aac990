/*
 * shipper_round.c: one round of the outbox shipper to one destination
 * (shipper.h; state in shipper_int.h): read one batch per dirty lane, send
 * them at once (or apply them here when the destination is this node),
 * take the acks into the lanes, settle lanes and destination. The store
 * learns the acks later, from the acks thread (shipper_acks.c): a round writes
 * nothing, so it never waits behind the big WriteBatches of TTL sweeps and
 * applies in RocksDB's write queue.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/apply.h"
#include "../partition/outbox.h"
#include "../placement/derived.h"
#include "logship.h"
#include "maps.h"
#include "replicate.h"
#include "shipper_int.h"

/* ======================================================================== */
/* One round to one destination                                             */
/* ======================================================================== */

/* Reads the lane's records (j->after, limit] into j->recs, at most
 * SHIPPER_BATCH_RECORDS and SHIPPER_BATCH_BYTES of them. 0, or an error
 * with its text in err. */
static int read_batch(shipper *s, job *j, uint64_t limit, char *err, size_t errlen)
{
    size_t max = limit - j->after < SHIPPER_BATCH_RECORDS ? (size_t)(limit - j->after)
                                                          : SHIPPER_BATCH_RECORDS;
    int rv = outbox_read(s->st, j->table_id, j->part, j->after, max, SHIPPER_BATCH_BYTES, &j->recs,
                         err, errlen);
    while (rv == 0 && j->recs.n > 0 && j->recs.v[j->recs.n - 1].seq > limit) {
        j->recs.n--; /* past a trimmed stretch: max counted from after */
        j->recs.bytes -= j->recs.v[j->recs.n].len;
        free(j->recs.v[j->recs.n].data);
    }
    return rv;
}

/* Sets j->first_kept and warns when records (after, first_kept) are gone:
 * trimmed before this destination acked them. It is told so (it notes that
 * its copies miss them), also when every record up to limit is gone (a
 * batch of none). Not a warning when a move gave the destination copies
 * of t that are joining: its lane is new, and they are filled elsewhere. */
static void note_trimmed(const pmap_table *t, job *j, uint64_t limit, uint32_t dest_id)
{
    j->first_kept = j->recs.n == 0                    ? limit + 1
                    : j->recs.v[0].seq > j->after + 1 ? j->recs.v[0].seq
                                                      : 0;
    if (j->first_kept != 0 && pmap_derived_joining(t, dest_id, NULL)) {
        log_info("outbox of table \"%s\" partition %u: records %" PRIu64 "..%" PRIu64
                 " were trimmed before node %u was a destination (copies a move gave it, "
                 "filled from elsewhere)",
                 t->schema.name, j->part, j->after + 1, j->first_kept - 1, dest_id);
    } else if (j->first_kept != 0) {
        log_warn("outbox of table \"%s\" partition %u: records %" PRIu64 "..%" PRIu64
                 " were trimmed before node %u acked them (its data was lost, or it came later): "
                 "its copies miss them for good",
                 t->schema.name, j->part, j->after + 1, j->first_kept - 1, dest_id);
    }
}

/* Points j->wanted at the records of j->recs that dest_id's copies keep
 * (replicate_filter). 0, or LAPSE_ENOMEM with j->to reset to 0 (nothing
 * sent). */
static int pick_wanted(const pmap_table *t, uint32_t dest_id, job *j)
{
    replicate_filter_arg fa;
    apply_filter f;
    replicate_filter(t, j->part, dest_id, &fa, &f);
    if ((j->wanted = calloc(j->recs.n ? j->recs.n : 1, sizeof(*j->wanted))) == NULL) {
        j->to = 0;
        return LAPSE_ENOMEM;
    }
    for (size_t i = 0; i < j->recs.n; i++) {
        int wanted = 0;
        int wrv = apply_record_wanted(&t->schema, j->recs.v[i].data, j->recs.v[i].len, &f, &wanted);
        if (wrv != 0) {
            /* A damaged record cannot be judged: it is sent, the
             * destination refuses the batch (ECORRUPT) and the lane stalls
             * with errors logged, rather than losing a change silently. */
            log_error("outbox of table \"%s\" partition %u: record %" PRIu64 ": %s", t->schema.name,
                      j->part, j->recs.v[i].seq, lapse_strerror(wrv));
            wanted = 1;
        }
        if (wanted) {
            j->wanted[j->nwanted].data = j->recs.v[i].data;
            j->wanted[j->nwanted].len = j->recs.v[i].len;
            j->nwanted++;
        }
    }
    return 0;
}

/* Fills j's Replicate request (its records borrowed from j->wanted) under
 * map version pm->version. */
static void build_request(shipper *s, const pmap *pm, job *j)
{
    lapse__replicate_request__init(&j->body);
    j->body.table_id = j->table_id;
    j->body.source_partition = j->part;
    j->body.from_seq = j->after;
    j->body.to_seq = j->to;
    j->body.records = j->wanted;
    j->body.n_records = j->nwanted;
    j->body.first_kept = j->first_kept;
    j->body.source_node = s->self;
    lapse__request__init(&j->req);
    j->req.body_case = LAPSE__REQUEST__BODY_REPLICATE;
    j->req.replicate = &j->body;
    j->req.pmap_version = pm->version;
    if (s->ns->cluster_token_len > 0) {
        j->req.admin_token = s->ns->cluster_token; /* the receiver checks it (replicate.c) */
    }
}

/* Reads the lane's next batch into j (pm: the map the caller holds). Returns 0 (j->to
 * is 0 when there is nothing to send) or an error logged here. */
static int prepare(shipper *s, const pmap *pm, uint32_t dest_id, job *j, size_t *bytes)
{
    char err[256] = "";
    uint64_t last = 0;
    const pmap_table *t = pmap_table_find_id(pm, j->table_id);
    if (t == NULL) {
        return 0; /* dropped meanwhile: the next rebuild forgets the lane */
    }
    int rv = outbox_last_seq(s->st, j->table_id, j->part, &last, err, sizeof(err));
    if (rv != 0) {
        goto out;
    }
    /* Of a replicated partition, only what every in-sync copy holds
     * (logship.h, "The outbox on a replicated partition"); never past the
     * last record: a one-copy table's limit is UINT64_MAX, and a batch that
     * finds every record up to the limit trimmed (a new destination copy)
     * moves the lane to the limit: to UINT64_MAX, the lane shipped nothing
     * more (its acks refused as past the last record) and the copy lost
     * every later record. */
    uint64_t limit =
        last > j->after ? logship_outbox_limit(s->ns->logship, &t->schema, j->part, last) : 0;
    limit = limit < last ? limit : last;
    if (limit <= j->after) {
        if (j->check && j->after > 0 && dest_id != s->self) {
            /* The destination restarted since it acked: an empty batch
             * (after, after] asks where it stands (it may have lost its
             * data), so a lane with nothing new learns it too. */
            j->to = j->after;
            build_request(s, pm, j);
        }
        return 0;
    }
    if ((rv = read_batch(s, j, limit, err, sizeof(err))) != 0) {
        goto out;
    }
    note_trimmed(t, j, limit, dest_id);
    j->to = j->recs.n == 0 ? limit : j->recs.v[j->recs.n - 1].seq;
    *bytes += j->recs.bytes;
    if (dest_id == s->self) {
        return 0; /* applied in place with the whole batch */
    }
    if ((rv = pick_wanted(t, dest_id, j)) != 0) {
        return rv;
    }
    build_request(s, pm, j);
    return 0;
out:
    log_error("outbox of table id %u partition %u: %s: %s", j->table_id, j->part,
              lapse_strerror(rv), err);
    return rv;
}

/* Applies this node's own batches in place (pm: the map the caller holds). */
static void apply_local(shipper *s, const pmap *pm, job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        job *j = &jobs[i];
        const pmap_table *t = j->to != 0 ? pmap_table_find_id(pm, j->table_id) : NULL;
        if (t == NULL) {
            continue;
        }
        const void **recs = calloc(j->recs.n, sizeof(*recs));
        size_t *lens = calloc(j->recs.n, sizeof(*lens));
        if (recs == NULL || lens == NULL) {
            j->rv = LAPSE_ENOMEM;
            snprintf(j->err, sizeof(j->err), "out of memory");
        } else {
            for (size_t k = 0; k < j->recs.n; k++) {
                recs[k] = j->recs.v[k].data;
                lens[k] = j->recs.v[k].len;
            }
            j->rv = replicate_apply(s->ns, t, pm->version, j->part, pm->version, j->after, j->to,
                                    j->first_kept, recs, lens, j->recs.n, &j->applied, j->err,
                                    sizeof(j->err));
            j->reached = 1;
        }
        free(recs);
        free(lens);
    }
}

/* Sends the prepared batches to a remote destination in one round. */
static void send_remote(job *jobs, size_t n, rpc_client *client, int timeout_ms)
{
    rpc_multi_call *calls = calloc(n ? n : 1, sizeof(*calls));
    size_t *at = calloc(n ? n : 1, sizeof(*at));
    size_t m = 0;
    if (calls == NULL || at == NULL) {
        for (size_t i = 0; i < n; i++) {
            jobs[i].rv = LAPSE_ENOMEM;
        }
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].to != 0) {
            calls[m].client = client;
            calls[m].req = &jobs[i].req;
            at[m++] = i;
        }
    }
    if (m > 0) {
        rpc_call_many(calls, m, timeout_ms);
    }
    for (size_t k = 0; k < m; k++) {
        job *j = &jobs[at[k]];
        Lapse__Response *r = calls[k].resp;
        j->rv = calls[k].rv;
        j->reached = r != NULL;
        snprintf(j->err, sizeof(j->err), "%.255s", calls[k].err);
        if (r != NULL && r->body_case == LAPSE__RESPONSE__BODY_REPLICATE && r->replicate != NULL) {
            j->applied = r->replicate->applied_seq;
        } else if (r != NULL && (j->rv == 0 || j->rv == LAPSE_ESTATE)) {
            j->rv = LAPSE_EPROTO;
            snprintf(j->err, sizeof(j->err), "Replicate answered without applied_seq");
        }
        rpc_response_free(r);
    }
out:
    free(calls);
    free(at);
}

static void count_batch(shipper *s, const char *result)
{
    char labels[48];
    metrics_labels(labels, sizeof(labels), "result", result, NULL);
    metrics_counter_add(s->ns->metrics, "lapse_replication_batches_total",
                        "Outbox batches shipped by this node, by outcome" METRICS_SINCE_START,
                        labels, 1);
}

/* --debug-repl-kill-after-batches N (tests): the process dies by SIGKILL
 * once N batches were applied by other nodes, before their acks are
 * recorded, so the restarted node resends batches its destination already
 * has. */
static void fault_point(shipper *s, uint32_t dest_id, const job *jobs, size_t n)
{
    int64_t limit = s->ns->debug_repl_kill_after_batches;
    if (limit <= 0 || dest_id == s->self) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < n; i++) {
        s->batches_ok += jobs[i].to != 0 && jobs[i].rv == 0 && jobs[i].reached;
    }
    int die = s->batches_ok >= limit;
    pthread_mutex_unlock(&s->lock);
    if (die) {
        log_warn("test fault point: %lld batches applied by other nodes, dying before their acks "
                 "are recorded",
                 (long long)limit);
        raise(SIGKILL);
    }
}

/* Folds the outcomes into the lanes and the destination. REQUIRES: lock
 * held. */
static void settle(shipper *s, size_t di, job *jobs, size_t n)
{
    dest *d = &s->dests[di];
    const int64_t now = clock_mono_now().ms;
    size_t sent = 0, reached = 0;
    const char *first_err = "";
    for (size_t i = 0; i < n; i++) {
        job *j = &jobs[i];
        lane *l = shipper_lane(shipper_source(s, j->table_id, j->part), d->id);
        if (j->to == 0) {
            continue;
        }
        sent++;
        reached += j->reached;
        if (j->rv == 0 || j->rv == LAPSE_ESTATE) {
            count_batch(s, j->rv == 0 ? "ok" : "resend");
        } else {
            count_batch(s, j->reached ? "error" : "unavailable");
            if (first_err[0] == 0) {
                first_err = j->err;
            }
        }
        if (l == NULL) {
            continue; /* the map moved on */
        }
        shipper_mark_dirty(s, l); /* more may wait: the next round checks cheaply */
        if (j->rv == 0 || j->rv == LAPSE_ESTATE) {
            l->check = 0; /* it said where it stands */
        }
        if (j->rv == 0) {
            /* Never past the batch: the acks thread stores this ack, and the
             * store refuses one beyond the last record. */
            uint64_t applied = j->applied < j->to ? j->applied : j->to;
            if (!l->acked_known || applied > l->acked) {
                l->acked = applied;
            }
            l->acked_known = 1;
            if (l->failing) {
                log_info("replication of table id %u partition %u to node %u recovered",
                         j->table_id, j->part, d->id);
            }
            l->failing = 0;
            l->backoff_ms = 0;
            l->retry_at_ms = 0;
        } else if (j->rv == LAPSE_ESTATE) {
            if (j->applied < l->acked) {
                log_warn("node %u has applied table id %u partition %u only up to %" PRIu64
                         ", below its ack %" PRIu64 ": resending from there",
                         d->id, j->table_id, j->part, j->applied, l->acked);
            }
            l->acked = j->applied;
            l->acked_known = 1;
        } else if (j->reached) {
            if (!l->failing) {
                log_warn("replication of table id %u partition %u to node %u: %s: %s "
                         "(retrying with backoff)",
                         j->table_id, j->part, d->id, lapse_strerror(j->rv), j->err);
            }
            l->failing = 1;
            l->backoff_ms = shipper_next_backoff(l->backoff_ms);
            l->retry_at_ms = now + l->backoff_ms;
        }
    }
    if (sent > 0 && reached == 0) {
        if (!d->down) {
            log_warn("replication to node %u (%s) failed: %s; retrying with backoff up to %d ms, "
                     "the outbox keeps the records",
                     d->id, d->client_url, first_err, SHIPPER_BACKOFF_MAX_MS);
        }
        d->down = 1;
        d->backoff_ms = shipper_next_backoff(d->backoff_ms);
        d->retry_at_ms = now + d->backoff_ms;
    } else if (reached > 0) {
        if (d->down) {
            log_info("replication to node %u (%s) resumed", d->id, d->client_url);
        }
        d->down = 0;
        d->backoff_ms = 0;
        d->retry_at_ms = 0;
    }
}

/* Collects up to SHIPPER_ROUND_LANES ready dirty lanes of destination di
 * into jobs, clearing their dirty flags. The scan starts where the last one
 * stopped, so busy partitions cannot starve the others of a destination
 * with more lanes than a round takes. REQUIRES: lock held. */
size_t shipper_collect_jobs(shipper *s, size_t di, job *jobs, int64_t now)
{
    dest *d = &s->dests[di];
    size_t n = 0;
    int left = 0; /* dirty lanes not collected */
    int64_t earliest = INT64_MAX;
    for (size_t k = 0; k < s->nsources; k++) {
        size_t i = (d->lane_cursor + k) % s->nsources;
        lane *l = shipper_lane(&s->sources[i], d->id);
        if (l == NULL || !l->dirty) {
            continue;
        }
        if (l->retry_at_ms > now || n == SHIPPER_ROUND_LANES) {
            left = 1;
            if (l->retry_at_ms > now && l->retry_at_ms < earliest) {
                earliest = l->retry_at_ms;
            }
            continue;
        }
        l->dirty = 0;
        job *j = &jobs[n++];
        memset(j, 0, sizeof(*j));
        j->table_id = s->sources[i].table_id;
        j->part = s->sources[i].part;
        j->after = l->acked;
        j->check = l->check;
        j->read_ack = !l->acked_known;
        change_list_init(&j->recs);
        if (n == SHIPPER_ROUND_LANES) {
            d->lane_cursor = i + 1;
        }
    }
    d->has_dirty = left;
    if (n == 0 && left && earliest > d->retry_at_ms) {
        d->retry_at_ms = earliest; /* every dirty lane is backing off */
    }
    return n;
}

/*
 * One round to destination di, claimed by the caller: reads one batch per
 * collected lane (at most SHIPPER_BATCH_RECORDS records / _BYTES each, and
 * SHIPPER_ROUND_BYTES over the round: lanes past it are marked dirty again),
 * sends them all at once (or applies them here), takes the acks into the
 * lanes and settles them. Budget: one RPC round of at most
 * SHIPPER_CALL_TIMEOUT_MS (SHIPPER_PROBE_TIMEOUT_MS to a down destination).
 * Enters and leaves with the lock held; drops it for the store and RPCs.
 */
void shipper_round(shipper *s, size_t di, job *jobs, size_t n)
{
    dest *d = &s->dests[di];
    const uint32_t dest_id = d->id;
    const int down = d->down;
    rpc_client *client = NULL;
    if (dest_id != s->self && (d->client == NULL || strcmp(d->client_url, d->url) != 0)) {
        /* Claimed by us: nobody else uses the old client (invariant 4). */
        rpc_client_close(d->client);
        d->client = NULL;
        char err[256] = "";
        if (rpc_client_open(&d->client, d->url, err, sizeof(err)) != 0) {
            log_error("replication to node %u: %s", dest_id, err);
            d->client = NULL;
        }
        snprintf(d->client_url, sizeof(d->client_url), "%s", d->url);
    }
    client = d->client;
    pthread_mutex_unlock(&s->lock);

    node_map *m = maps_acquire(s->ns);
    size_t bytes = 0, used = 0;
    for (size_t i = 0; i < n; i++, used++) {
        job *j = &jobs[i];
        char err[256] = "";
        if (bytes >= SHIPPER_ROUND_BYTES) {
            break; /* the rest go back to dirty below */
        }
        if (j->read_ack) {
            if (outbox_acked(s->st, j->table_id, j->part, dest_id, &j->after, err, sizeof(err)) !=
                0) {
                log_error("outbox of table id %u partition %u: reading node %u's ack: %s",
                          j->table_id, j->part, dest_id, err);
                continue;
            }
            j->ack_read = 1;
        }
        (void)prepare(s, m->pm, dest_id, j, &bytes);
    }
    if (dest_id == s->self) {
        apply_local(s, m->pm, jobs, used);
        maps_release(m);
    } else {
        maps_release(m); /* no map reference across the network */
        if (client != NULL) {
            send_remote(jobs, used, client,
                        down ? SHIPPER_PROBE_TIMEOUT_MS : SHIPPER_CALL_TIMEOUT_MS);
        } else {
            for (size_t i = 0; i < used; i++) {
                jobs[i].rv = LAPSE_EUNAVAILABLE;
                snprintf(jobs[i].err, sizeof(jobs[i].err), "no RPC client for node %u", dest_id);
            }
        }
    }
    fault_point(s, dest_id, jobs, used);

    pthread_mutex_lock(&s->lock);
    for (size_t i = used; i < n; i++) {
        lane *l = shipper_lane(shipper_source(s, jobs[i].table_id, jobs[i].part), dest_id);
        if (l != NULL) {
            shipper_mark_dirty(s, l);
        }
    }
    for (size_t i = 0; i < used; i++) {
        /* A lane whose ack was just read is known now even without a batch. */
        lane *l = shipper_lane(shipper_source(s, jobs[i].table_id, jobs[i].part), dest_id);
        if (l != NULL && jobs[i].ack_read && jobs[i].after > l->persisted) {
            l->persisted = jobs[i].after; /* stored already */
        }
        if (l != NULL && !l->acked_known && jobs[i].ack_read && jobs[i].to == 0) {
            l->acked = jobs[i].after;
            l->acked_known = 1;
        }
    }
    settle(s, di, jobs, used);
    for (size_t i = 0; i < n; i++) {
        change_list_fini(&jobs[i].recs);
        free(jobs[i].wanted);
    }
}
