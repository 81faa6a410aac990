/*
 * replicate.c: applying outbox batches on this node (contract in
 * replicate.h), for the Replicate call (replserve.c) and for this node's
 * own shipper alike.
 */
#include "replicate.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../common/change.h"
#include "newcopy.h"
#include "repllock.h"
#include "streams.h"

/* Commit-to-apply lag buckets: a record normally applies within
 * milliseconds; the top ones catch a destination that was down. */
static const double lag_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                    0.5,   1,      2.5,   5,    10,    30,   60,  300};

/* ------------------------------------------------------------------------ */
/* The filter                                                                */
/* ------------------------------------------------------------------------ */

static int owns_gsi(void *arg, uint32_t gsi, uint32_t gsi_part)
{
    const replicate_filter_arg *fa = arg;
    return pmap_replicas_index(pmap_gsi_part(fa->t, gsi, gsi_part), fa->node_id) >= 0;
}

void replicate_filter(const pmap_table *t, uint32_t src_part, uint32_t node_id,
                      replicate_filter_arg *arg, apply_filter *f)
{
    arg->t = t;
    arg->node_id = node_id;
    f->owns_gsi = t->schema.ngsi > 0 ? owns_gsi : NULL;
    f->arg = arg;
    f->host_stream = pmap_replicas_index(pmap_stream_shard(t, src_part), node_id) >= 0;
}

/* ------------------------------------------------------------------------ */
/* Applying                                                                  */
/* ------------------------------------------------------------------------ */

/* Counts what records (prev, applied] of the batch did here (invariant 2):
 * the lag of each, and each stream record stored. Returns 1 when a stream
 * record was stored. */
static int count_applied(node_server *ns, const apply_filter *f, uint64_t prev, uint64_t applied,
                         const void *const *recs, const size_t *lens, size_t n)
{
    static const char *events[] = {"", "INSERT", "MODIFY", "REMOVE"};
    const int64_t now_ms = clock_wall_now().ms;
    uint64_t stored_by[4][2] = {{0}}; /* [event][principal is lapse.ttl] */
    int stored = 0;
    for (size_t i = 0; i < n; i++) {
        change_record r;
        if (change_decode_head(recs[i], lens[i], &r) != 0 || r.seq <= prev || r.seq > applied) {
            continue; /* apply_batch checked every record: only skipped ones remain */
        }
        double lag_s = now_ms > r.commit_ms ? (double)(now_ms - r.commit_ms) / 1000.0 : 0;
        metrics_histogram_observe(
            ns->metrics, "lapse_replication_lag_seconds",
            "Commit of a change on its source node to its apply here" METRICS_SINCE_START,
            lag_bounds, sizeof(lag_bounds) / sizeof(lag_bounds[0]), NULL, lag_s);
        if (f->host_stream && r.stream_seq != 0 && r.event >= CHANGE_INSERT &&
            r.event <= CHANGE_REMOVE) {
            stored_by[r.event][r.principal == CHANGE_TTL]++;
            stored = 1;
        }
    }
    /* One counter update per series and batch, not per record. */
    for (int ev = CHANGE_INSERT; stored && ev <= CHANGE_REMOVE; ev++) {
        for (int ttl = 0; ttl < 2; ttl++) {
            if (stored_by[ev][ttl] == 0) {
                continue;
            }
            char labels[96];
            metrics_labels(labels, sizeof(labels), "event", events[ev], "principal",
                           ttl ? "lapse.ttl" : "user", NULL);
            metrics_counter_add(
                ns->metrics, "lapse_stream_records_total",
                "Stream records stored in the shards this node hosts" METRICS_SINCE_START, labels,
                (double)stored_by[ev][ttl]);
        }
    }
    return stored;
}

void replicate_pause(node_server *ns, uint32_t table_id, uint32_t src_part, int on)
{
    pthread_mutex_t *mu = repllock_of(ns, table_id, src_part);
    pthread_mutex_lock(mu);
    atomic_store(&ns->repl_paused, on ? (uint64_t)table_id << 32 | src_part : 0);
    pthread_mutex_unlock(mu);
}

/* Answers a batch of none (after_seq, after_seq]: the source asks where this
 * copy stands (it restarted since). Sets *applied_out (when not NULL) to the
 * last seq applied here. Returns 0, or LAPSE_ESTATE when that is below
 * after_seq, as for a gap. */
static int answer_position(node_server *ns, const pmap_table *t, uint32_t src_part,
                           uint64_t src_version, uint64_t after_seq, uint64_t *applied_out,
                           char *err, size_t errlen)
{
    uint64_t prev = 0;
    int rv = apply_applied_seq(ns->st, t->schema.id, src_part, &prev, err, errlen);
    if (applied_out != NULL) {
        *applied_out = prev;
    }
    if (rv == 0 && prev < after_seq) {
        snprintf(err, errlen,
                 "table %u partition %u is applied here only up to %" PRIu64
                 ": resend from %" PRIu64,
                 (unsigned)t->schema.id, (unsigned)src_part, prev, prev + 1);
        rv = LAPSE_ESTATE;
    }
    if (rv == 0) {
        newcopy_reached(ns, t->schema.id, src_part, src_version);
    }
    return rv;
}

/* Refuses a batch this node cannot take now: one filtered by a map older
 * than this node's newest copies, or one for a partition whose GSI copies
 * are being filled. Returns 0, or LAPSE_EUNAVAILABLE (the source resends).
 * REQUIRES: the partition's repllock held. */
static int refuse_batch_now(node_server *ns, const pmap_table *t, uint64_t map_version,
                            uint32_t src_part, uint64_t src_version, char *err, size_t errlen)
{
    /* The batch was filtered twice: by its sender, for the copies its map
     * says this node holds (it leaves out records they do not need), and
     * here by map_version's. The older counts. */
    uint64_t filtered_at =
        src_version != 0 && src_version < map_version ? src_version : map_version;
    if (newcopy_added_after(ns, t->schema.id, filtered_at)) {
        /* A newer map gave this node new copies of the table, and their
         * missing mark may be written: a batch filtered by an older map
         * would skip them past the mark. */
        snprintf(err, errlen,
                 "table %u: this node's copies changed after map version %" PRIu64 "; resend",
                 (unsigned)t->schema.id, filtered_at);
        return LAPSE_EUNAVAILABLE;
    }
    if (t->schema.id != 0 &&
        atomic_load(&ns->repl_paused) == ((uint64_t)t->schema.id << 32 | src_part)) {
        snprintf(err, errlen,
                 "table %u partition %u: this node's GSI copies are being filled from its items; "
                 "resend later",
                 (unsigned)t->schema.id, (unsigned)src_part);
        return LAPSE_EUNAVAILABLE;
    }
    return 0;
}

/* Notes the records (prev, first_kept) the source trimmed before they were
 * applied here, when there are any, and says so in the log: an error
 * (was this node's data lost?) unless the table waits on sources for
 * copies new here (newcopy_waiting). Returns 0 or a
 * LAPSE_E* code. REQUIRES: the partition's repllock held. */
static int note_trimmed(node_server *ns, const pmap_table *t, uint32_t src_part, uint64_t after_seq,
                        uint64_t first_kept, uint64_t prev, char *err, size_t errlen)
{
    int noted = 0, rv = 0;
    if (first_kept > after_seq + 1) {
        rv = apply_note_missing(ns->st, t->schema.id, src_part, first_kept, &noted, err, errlen);
    }
    if (noted && newcopy_waiting(ns, t->schema.id)) {
        /* The expected case of a copy a move added here: the source's new
         * lane to this node finds its old records trimmed. */
        log_info("table \"%s\": copies new here: records %" PRIu64 "..%" PRIu64 " of partition %u "
                 "were trimmed at the source before this node was its destination; they are "
                 "filled (the stream shard from another copy, the GSIs from the partition's "
                 "items) before the copies are read",
                 t->schema.name, prev + 1, first_kept - 1, (unsigned)src_part);
    } else if (noted) {
        log_error("table \"%s\": this node's copies of its GSI partitions and of stream shard %u "
                  "miss records %" PRIu64 "..%" PRIu64 " of partition %u, trimmed at the source "
                  "before they were applied here (was this node's data lost?): they answer no "
                  "read until filled again (the shard from another copy, the GSIs from the "
                  "partition's items); the other copies do",
                  t->schema.name, (unsigned)src_part, prev + 1, first_kept - 1, (unsigned)src_part);
    }
    return rv;
}

int replicate_apply(node_server *ns, const pmap_table *t, uint64_t map_version, uint32_t src_part,
                    uint64_t src_version, uint64_t after_seq, uint64_t to_seq, uint64_t first_kept,
                    const void *const *recs, const size_t *lens, size_t n, uint64_t *applied_out,
                    char *err, size_t errlen)
{
    replicate_filter_arg fa;
    apply_filter f;
    uint64_t prev = 0, applied = 0;
    if (applied_out != NULL) {
        *applied_out = 0;
    }
    if (to_seq == after_seq && n == 0) {
        return answer_position(ns, t, src_part, src_version, after_seq, applied_out, err, errlen);
    }
    if (after_seq == UINT64_MAX || to_seq <= after_seq) {
        snprintf(err, errlen, "empty batch: to_seq %" PRIu64 " is not above from_seq %" PRIu64,
                 to_seq, after_seq);
        return LAPSE_EINVAL;
    }
    replicate_filter(t, src_part, ns->id, &fa, &f);
    pthread_mutex_t *mu = repllock_of(ns, t->schema.id, src_part);
    pthread_mutex_lock(mu);
    int rv = refuse_batch_now(ns, t, map_version, src_part, src_version, err, errlen);
    if (rv != 0) {
        pthread_mutex_unlock(mu);
        return rv;
    }
    rv = apply_applied_seq(ns->st, t->schema.id, src_part, &prev, err, errlen);
    if (rv == 0) {
        rv = note_trimmed(ns, t, src_part, after_seq, first_kept, prev, err, errlen);
    }
    if (rv == 0) {
        rv = apply_batch(ns->st, &t->schema, src_part, after_seq + 1, to_seq, recs, lens, n, &f,
                         &applied, err, errlen);
    } else {
        applied = prev;
    }
    int stored = 0;
    if (rv == 0 && applied > prev) {
        stored = count_applied(ns, &f, prev, applied, recs, lens, n);
    }
    pthread_mutex_unlock(mu);
    if (stored) {
        streams_notify(ns->streams);
    }
    if (rv == 0) {
        /* After first_kept was noted: nothing the source trimmed is left
         * to learn from it. */
        newcopy_reached(ns, t->schema.id, src_part, src_version);
    }
    if (applied_out != NULL) {
        *applied_out = applied;
    }
    return rv;
}
