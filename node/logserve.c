/*
 * logserve.c: the replica's side of replica sets (logship.h): ReplicateLog
 * (apply the primary's records in order, answer a new primary's pull,
 * drop a diverged copy on its primary's word) and PartitionDigest. Every
 * call names the sender's epoch as primary; one older than the partition's
 * epoch in this node's map, or than one a primary announced here before,
 * is refused (the sender was deposed).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../common/token.h"
#include "../partition/apply.h"
#include "../partition/outbox.h"
#include "../partition/replog.h"
#include "../partition/snapshot.h"
#include "fault_switch.h"
#include "logship_int.h"

int logship_check_call(const logship_call *c, const void *body, const char *call)
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

/* Refuses a sender deposed by a newer epoch, and otherwise remembers its
 * epoch as the partition's fence. 0 or LAPSE_EPERM/ENOMEM with err. */
static int check_epoch(logship *ls, const Lapse__ReplicateLogRequest *r, char *err, size_t errlen)
{
    node_map *m = maps_acquire(ls->ns);
    const pmap_replicas *set = pmap_part(pmap_table_find_id(m->pm, r->table_id), r->partition);
    uint64_t map_epoch = set != NULL ? pmap_epoch(set) : 0;
    maps_release(m);
    int rv = 0;
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, r->table_id, r->partition);
    if (p == NULL) {
        rv = LAPSE_ENOMEM;
        snprintf(err, errlen, "out of memory");
    } else if (r->epoch == 0 || r->epoch < map_epoch || r->epoch < p->fence) {
        rv = LAPSE_EPERM;
        snprintf(err, errlen,
                 "node %u is no longer the primary of table %u partition %u: its epoch %" PRIu64
                 " is older than %" PRIu64,
                 (unsigned)r->source_node, (unsigned)r->table_id, (unsigned)r->partition, r->epoch,
                 p->fence > map_epoch ? p->fence : map_epoch);
    } else {
        p->fence = r->epoch;
    }
    pthread_mutex_unlock(&ls->lock);
    return rv;
}

/* Collects records for a pull reply, copied into the call's arena. */
typedef struct pulled {
    arena *a;
    Lapse__LogRecord **recs;
    size_t n, cap;
} pulled;

static int pull_one(void *arg, uint64_t seq, const uint8_t *rec, size_t len)
{
    pulled *p = arg;
    if (p->n == p->cap) {
        return 1; /* the array was sized for LOGSHIP_CATCHUP_RECORDS */
    }
    Lapse__LogRecord *r = arena_alloc(p->a, sizeof(*r));
    uint8_t *data = arena_memdup(p->a, rec, len ? len : 1);
    if (r == NULL || data == NULL) {
        return LAPSE_ENOMEM;
    }
    lapse__log_record__init(r);
    r->seq = seq;
    r->data.data = data;
    r->data.len = len;
    p->recs[p->n++] = r;
    return 0;
}

/* Writes a snapshot call's keys here and, on its last call, the position
 * they stand at (snapshot.h). */
static int install_snapshot(store *st, const Lapse__ReplicateLogRequest *r, char *err,
                            size_t errlen)
{
    snapshot_entry *e = r->n_snapshot > 0 ? calloc(r->n_snapshot, sizeof(*e)) : NULL;
    if (r->n_snapshot > 0 && e == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    for (size_t i = 0; i < r->n_snapshot; i++) {
        const Lapse__SnapshotEntry *se = r->snapshot[i];
        if (se == NULL) {
            free(e);
            snprintf(err, errlen, "snapshot entry %zu is missing", i);
            return LAPSE_EPROTO;
        }
        e[i] =
            (snapshot_entry){se->family, se->key.data, se->key.len, se->value.data, se->value.len};
    }
    int rv = r->n_snapshot > 0
                 ? snapshot_install(st, r->table_id, r->partition, e, r->n_snapshot, err, errlen)
                 : 0;
    free(e);
    if (rv == 0 && r->snapshot_done) {
        rv = snapshot_finish(st, r->table_id, r->partition, r->snapshot_epoch, r->snapshot_seq, err,
                             errlen);
        if (rv == 0) {
            log_info("table %u partition %u: this copy was rebuilt from primary node %u's "
                     "snapshot at record %" PRIu64,
                     (unsigned)r->table_id, (unsigned)r->partition, (unsigned)r->source_node,
                     r->snapshot_seq);
        }
    }
    return rv;
}

/* Trims this copy's outbox as far as its primary trimmed its own (every
 * destination acked those records), so replicas' outboxes do not grow for
 * ever, and records those acks here too: should this node become the
 * primary, its shipper starts where the destinations stand instead of at
 * a gap. Once per step of the primary's trim (at most one a second). */
static void trim_copy(logship *ls, store *st, const Lapse__ReplicateLogRequest *r)
{
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, r->table_id, r->partition);
    uint64_t trimmed = p != NULL ? p->copy_trimmed : UINT64_MAX;
    pthread_mutex_unlock(&ls->lock);
    if (r->outbox_trimmed <= trimmed) {
        return;
    }
    char err[256] = "";
    uint64_t through = trimmed;
    if (outbox_trim_copy(st, r->table_id, r->partition, trimmed, r->outbox_trimmed, &through, err,
                         sizeof(err)) != 0) {
        log_error("table %u partition %u: trimming this copy's outbox: %s", (unsigned)r->table_id,
                  (unsigned)r->partition, err);
        return;
    }
    if (through > trimmed) {
        node_map *m = maps_acquire(ls->ns);
        uint32_t dests[PMAP_MAX_DESTINATIONS];
        size_t n = pmap_outbox_destinations(pmap_table_find_id(m->pm, r->table_id), r->partition,
                                            dests, sizeof(dests) / sizeof(dests[0]));
        maps_release(m);
        for (size_t i = 0; i < n && i < sizeof(dests) / sizeof(dests[0]); i++) {
            if (outbox_ack(st, r->table_id, r->partition, dests[i], through, err, sizeof(err)) !=
                0) {
                log_error("table %u partition %u: recording node %u's ack in this copy: %s",
                          (unsigned)r->table_id, (unsigned)r->partition, (unsigned)dests[i], err);
            }
        }
    }
    pthread_mutex_lock(&ls->lock);
    if (through > p->copy_trimmed) {
        p->copy_trimmed = through;
    }
    pthread_mutex_unlock(&ls->lock);
}

/* 1 while the test fault switch that refuses ReplicateLog is on
 * (--debug-fault-dir). */
static int refusing(const node_server *ns)
{
    return fault_switch_on(ns, "refuse-replicate-log");
}

/* The end of one part of a ReplicateLog call, its outcome rv: where this
 * copy stands (the sender resends from there after ESTATE), the outbox
 * trim the part asks for, and a log line for what is not a plain gap.
 * run, when not NULL and loaded, is the position the part's apply left
 * stored (logship_apply_run): no read then, which saves one lookup per
 * call on the replicas' hot path. Returns rv. */
static int finish_part(const logship_call *c, const Lapse__ReplicateLogRequest *r,
                       Lapse__ReplicateLogResponse *out, int rv, uint64_t applied, int diverged,
                       const char *err, const replog_run *run)
{
    uint64_t epoch = 0;
    if (rv == 0 || (rv == LAPSE_ESTATE && !diverged)) {
        if (run != NULL && run->loaded) {
            epoch = run->epoch;
            applied = run->last;
        } else {
            char perr[256];
            replog_position(c->ns->st, r->table_id, r->partition, &epoch, &applied, perr,
                            sizeof(perr));
        }
    }
    if (rv == 0 && r->outbox_trimmed > 0) {
        trim_copy(c->ns->logship, c->ns->st, r);
    }
    out->applied_seq = applied;
    out->applied_epoch = epoch;
    out->diverged = diverged != 0;
    if (rv != 0 && (rv != LAPSE_ESTATE || diverged)) {
        log_warn("ReplicateLog from node %u, table %u partition %u: %s: %s",
                 (unsigned)r->source_node, (unsigned)r->table_id, (unsigned)r->partition,
                 lapse_strerror(rv), err);
    }
    return rv;
}

void logship_copy_dropped(logship *ls, uint32_t table_id, uint32_t part)
{
    logship_forget_confirmed(ls, table_id, part);
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    if (p != NULL) {
        p->copy_dropped = 1;
    }
    pthread_mutex_unlock(&ls->lock);
}

/* Whether a snapshot part of r must be refused: this copy was dropped
 * (copydrop.h) after the reset that began the snapshot, whose earlier
 * parts went with it. A reset clears the mark. */
static int snapshot_cut(logship *ls, const Lapse__ReplicateLogRequest *r, char *err, size_t errlen)
{
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, r->table_id, r->partition);
    int cut = 0;
    if (p != NULL && r->reset) {
        p->copy_dropped = 0;
    } else if (p != NULL && p->copy_dropped && (r->n_snapshot > 0 || r->snapshot_done)) {
        cut = 1;
        snprintf(err, errlen,
                 "this copy of table %u partition %u was dropped during the snapshot: start "
                 "again from a reset",
                 (unsigned)r->table_id, (unsigned)r->partition);
    }
    pthread_mutex_unlock(&ls->lock);
    return cut;
}

/* Handles one part of a ReplicateLog call (the request itself, or one of
 * its more[]) into out. 0, or the error with err (out still carries the
 * position with ESTATE: the sender resends from it). */
static int handle_part(const logship_call *c, const Lapse__ReplicateLogRequest *r,
                       Lapse__ReplicateLogResponse *out, char *err, size_t errlen)
{
    uint64_t applied = 0;
    int diverged = 0;
    replog_run run;
    replog_run_init(&run, r->table_id, r->partition); /* loaded only by an apply */
    int rv = check_epoch(c->ns->logship, r, err, errlen);
    if (rv == 0 && snapshot_cut(c->ns->logship, r, err, errlen)) {
        rv = LAPSE_ESTATE;
        diverged = 1; /* not a gap to resend from: the sender starts over */
    }
    if (rv == 0 && r->reset) {
        rv = replog_reset(c->ns->st, r->table_id, r->partition, err, errlen);
        logship_forget_confirmed(c->ns->logship, r->table_id, r->partition);
        if (rv == 0) {
            log_warn("table %u partition %u: this copy was dropped on primary node %u's word, "
                     "to be rebuilt from it",
                     (unsigned)r->table_id, (unsigned)r->partition, (unsigned)r->source_node);
        }
    }
    if (rv == 0 && (r->n_snapshot > 0 || r->snapshot_done)) {
        rv = install_snapshot(c->ns->st, r, err, errlen);
    } else if (rv == 0 && r->pull) {
        pulled p = {.a = c->a, .cap = LOGSHIP_CATCHUP_RECORDS};
        if ((p.recs = arena_alloc(c->a, p.cap * sizeof(*p.recs))) == NULL) {
            rv = LAPSE_ENOMEM;
        } else {
            rv = replog_read(c->ns->st, r->table_id, r->partition, r->pull_after, p.cap,
                             LOGSHIP_CATCHUP_BYTES, pull_one, &p, err, errlen);
            rv = rv == 1 ? 0 : rv;
            out->records = p.recs;
            out->n_records = p.n;
        }
    } else if (rv == 0 && !r->reset) {
        replog_lock(c->ns->st, r->table_id, r->partition);
        rv = logship_apply_run(c->ns->st, &run, r->prev_epoch, r->records, r->n_records, &applied,
                               &diverged, err, errlen);
        replog_unlock(c->ns->st, r->table_id, r->partition);
    }
    return finish_part(c, r, out, rv, applied, diverged, err, &run);
}

/* One part of a group-commit call while the call is handled. */
typedef struct part_job {
    const Lapse__ReplicateLogRequest *r;
    Lapse__ReplicateLogResponse *out;
    replog_run run;
    int rv, diverged;
    uint64_t applied;
    char err[512];
} part_job;

/* Applies the records of every part of jobs[0..n) whose rv is 0 in one
 * WriteBatch, under all their stripe locks (taken in one order, released
 * after the write): one write per call instead of one per record. A part
 * refused midway keeps the records before the refusal; a failed write
 * fails every part that had records in it. */
static void apply_parts(const logship_call *c, part_job *jobs, size_t n)
{
    store *st = c->ns->st;
    uint32_t *tids = calloc(n, sizeof(*tids)), *pids = calloc(n, sizeof(*pids));
    replog_run **runs = calloc(n, sizeof(*runs));
    db_batch *b = db_batch_new();
    size_t nl = 0;
    for (size_t i = 0; tids != NULL && pids != NULL && i < n; i++) {
        if (jobs[i].rv == 0) {
            tids[nl] = jobs[i].r->table_id;
            pids[nl++] = jobs[i].r->partition;
        }
    }
    if (tids == NULL || pids == NULL || runs == NULL || b == NULL ||
        replog_lock_many(st, tids, pids, nl) != 0) {
        for (size_t i = 0; i < n; i++) {
            if (jobs[i].rv == 0) {
                jobs[i].rv = LAPSE_ENOMEM;
                snprintf(jobs[i].err, sizeof(jobs[i].err), "out of memory");
            }
        }
        goto out;
    }
    size_t added = 0, nruns = 0;
    for (size_t i = 0; i < n; i++) {
        part_job *j = &jobs[i];
        if (j->rv != 0) {
            continue;
        }
        runs[nruns++] = &j->run;
        replog_run_init(&j->run, j->r->table_id, j->r->partition);
        j->rv = logship_apply_into(st, b, &j->run, j->r->prev_epoch, j->r->records, j->r->n_records,
                                   &j->applied, &j->diverged, j->err, sizeof(j->err));
        added += j->run.added;
    }
    char werr[256] = "";
    int wrv = added > 0 ? replog_write(st, b, runs, nruns, werr, sizeof(werr)) : 0;
    for (size_t i = 0; i < n; i++) {
        part_job *j = &jobs[i];
        if (j->run.added == 0) {
            continue;
        }
        if (wrv == 0) {
            j->applied = j->run.last;
        } else {
            j->run.loaded = 0; /* not written: the stored position is unknown here */
            j->rv = wrv;
            snprintf(j->err, sizeof(j->err), "%s", werr);
        }
    }
    replog_unlock_many(st, tids, pids, nl);
out:
    db_batch_free(b);
    free(runs);
    free(tids);
    free(pids);
}

/* Whether part i of jobs names the partition of an earlier part. */
static int repeats_partition(const part_job *jobs, size_t i)
{
    for (size_t k = 0; k < i; k++) {
        if (jobs[k].r != NULL && jobs[k].r->table_id == jobs[i].r->table_id &&
            jobs[k].r->partition == jobs[i].r->partition) {
            return 1;
        }
    }
    return 0;
}

/* The parts of a group-commit call (the request and its more[]), each
 * answered with its own status in out and out->more; their records are
 * written together (apply_parts). The call succeeds. */
static void handle_parts(const logship_call *c, const Lapse__ReplicateLogRequest *r,
                         Lapse__ReplicateLogResponse *out)
{
    const size_t n = r->n_more + 1;
    Lapse__ReplicateLogResponse *parts = arena_alloc(c->a, r->n_more * sizeof(*parts));
    Lapse__ReplicateLogResponse **more = arena_alloc(c->a, r->n_more * sizeof(*more));
    part_job *jobs = calloc(n, sizeof(*jobs));
    if (parts == NULL || more == NULL || jobs == NULL) {
        free(jobs);
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        part_job *j = &jobs[i];
        j->r = i == 0 ? r : r->more[i - 1];
        j->out = i == 0 ? out : &parts[i - 1];
        if (i > 0) {
            lapse__replicate_log_response__init(j->out);
            more[i - 1] = j->out;
        }
        if (j->r == NULL || j->r->pull || j->r->reset || j->r->n_snapshot > 0 ||
            j->r->snapshot_done || (i > 0 && j->r->n_more > 0)) {
            j->rv = LAPSE_EINVAL;
            snprintf(j->err, sizeof(j->err),
                     "part %zu of a group-commit call carries more than records", i);
        } else if (repeats_partition(jobs, i)) {
            /* One batch holds each partition's records once: a sender never
             * has two rounds of a partition in one call. */
            j->rv = LAPSE_EINVAL;
            snprintf(j->err, sizeof(j->err),
                     "part %zu of a group-commit call repeats table %u partition %u", i,
                     (unsigned)j->r->table_id, (unsigned)j->r->partition);
        } else {
            j->rv = check_epoch(c->ns->logship, j->r, j->err, sizeof(j->err));
        }
    }
    apply_parts(c, jobs, n);
    for (size_t i = 0; i < n; i++) {
        part_job *j = &jobs[i];
        int rv = j->r == NULL ? j->rv
                              : finish_part(c, j->r, j->out, j->rv, j->applied, j->diverged, j->err,
                                            &j->run);
        j->out->status = (Lapse__Status)rv;
        if (rv != 0 && (j->out->message =
                            arena_strdup(c->a, j->err[0] ? j->err : lapse_strerror(rv))) == NULL) {
            j->out->message = (char *)"";
        }
    }
    out->more = more;
    out->n_more = r->n_more;
    free(jobs);
}

int logship_on_conn_thread(logship *ls, const Lapse__ReplicateLogRequest *r)
{
    return r != NULL && !r->pull && !r->reset && r->n_snapshot == 0 && !r->snapshot_done &&
           atomic_load(&ls->calls_under_stripe) == 0;
}

void logship_handle(const logship_call *c)
{
    const Lapse__ReplicateLogRequest *r = c->req->replicate_log;
    if (logship_check_call(c, r, "ReplicateLog") != 0) {
        return;
    }
    if (refusing(c->ns)) {
        rpc_set_error(c->resp, c->a, LAPSE_EUNAVAILABLE, "ReplicateLog refused (test fault)");
        return;
    }
    Lapse__ReplicateLogResponse *out = arena_alloc(c->a, sizeof(*out));
    if (out == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__replicate_log_response__init(out);
    c->resp->body_case = LAPSE__RESPONSE__BODY_REPLICATE_LOG;
    c->resp->replicate_log = out;
    const int64_t start_us = clock_mono_us();
    char err[512] = "";
    int rv = 0;
    if (r->n_more > 0) {
        handle_parts(c, r, out); /* each part answers for itself: the call succeeds */
    } else {
        rv = handle_part(c, r, out, err, sizeof(err));
    }
    if (r->n_more > 0 || r->n_records > 0) {
        logship_time_apply(c->ns->logship, clock_mono_us() - start_us);
    }
    /* The position travels with ESTATE too: the sender resends from it. */
    if (rv != 0) {
        rpc_set_error(c->resp, c->a, rv, "%s", err[0] ? err : lapse_strerror(rv));
    }
}

/* A base partition's digest into out: its items, its log's position and
 * first record, its outbox's range. 0 or the first error with err. */
static int partition_digest(store *st, uint32_t table_id, uint32_t part,
                            Lapse__PartitionDigestResponse *out, char *err, size_t errlen)
{
    int rv = replog_items_digest(st, table_id, part, &out->items, &out->digest, err, errlen);
    if (rv == 0) {
        rv = replog_position(st, table_id, part, &out->epoch, &out->seq, err, errlen);
    }
    if (rv == 0) {
        rv = replog_first(st, table_id, part, &out->log_first, err, errlen);
    }
    if (rv == 0) {
        rv = outbox_first_seq(st, table_id, part, &out->outbox_first, err, errlen);
    }
    if (rv == 0) {
        rv = outbox_last_seq(st, table_id, part, &out->outbox_last, err, errlen);
    }
    return rv;
}

void logship_digest(const logship_call *c)
{
    const Lapse__PartitionDigestRequest *r = c->req->partition_digest;
    if (logship_check_call(c, r, "PartitionDigest") != 0) {
        return;
    }
    Lapse__PartitionDigestResponse *out = arena_alloc(c->a, sizeof(*out));
    if (out == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__partition_digest_response__init(out);
    char err[512] = "";
    /* index_id: a copy of a GSI partition, its entries only; refused, as
     * its queries are, when the copy misses records its sources trimmed
     * (apply.h): its entries are not the index's. */
    int missing = 0;
    int rv = r->index_id != 0
                 ? apply_missing(c->ns->st, r->table_id, -1, &missing, err, sizeof(err))
                 : partition_digest(c->ns->st, r->table_id, r->partition, out, err, sizeof(err));
    if (rv == 0 && missing) {
        rv = LAPSE_EUNAVAILABLE;
        snprintf(err, sizeof(err),
                 "this node's copy of partition %u of index %u of table %u misses records "
                 "trimmed before it applied them",
                 (unsigned)r->partition, (unsigned)r->index_id, (unsigned)r->table_id);
    } else if (rv == 0 && r->index_id != 0) {
        rv = replog_gsi_digest(c->ns->st, r->table_id, r->index_id, r->partition, &out->items,
                               &out->digest, err, sizeof(err));
    }
    if (rv != 0) {
        rpc_set_error(c->resp, c->a, rv, "%s", err);
        return;
    }
    c->resp->body_case = LAPSE__RESPONSE__BODY_PARTITION_DIGEST;
    c->resp->partition_digest = out;
}
