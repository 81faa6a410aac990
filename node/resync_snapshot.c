/*
 * resync_snapshot.c: a replica's copy dropped, and rebuilt from a snapshot
 * of the primary's while writes go on (resync_int.h; resync.c decides
 * when, docs/replication.md "Rebuilding from a snapshot").
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/replog.h"
#include "../partition/snapshot.h"
#include "fault_switch.h"
#include "logship_int.h"
#include "resync_int.h"

#define RESYNC_SNAPSHOT_REPORT_MS 5000 /* progress of a snapshot transfer, in the log */
#define RESYNC_ESTIMATE_ITEMS 1000     /* walked to size a snapshot for its ETA (store_estimate) */
#define RESYNC_SMALL_CALL_BYTES 512    /* a snapshot call under the small-snapshot-calls switch */
#define RESYNC_SNAPSHOT_IN_FLIGHT 2    /* a snapshot's calls on the wire at once */

/* Drops replica c's copy (why: the reason, for the log). */
int resync_reset_copy(logship *ls, rpc_client *c, uint32_t id, uint32_t table_id, uint32_t part,
                      uint64_t epoch, const char *why, char *err, size_t errlen)
{
    shipment s;
    shipment_init(&s, ls, table_id, part, epoch);
    s.body.reset = 1;
    Lapse__Response *resp = NULL;
    int rv = rpc_call(c, &s.req, LOGSHIP_TIMEOUT_MS, &resp, err, errlen);
    rpc_response_free(resp);
    shipment_fini(&s);
    if (rv == 0) {
        log_warn("table %u partition %u: node %u %s; its copy is dropped and rebuilt",
                 (unsigned)table_id, (unsigned)part, (unsigned)id, why);
    }
    return rv;
}

/* ---- the calls ---- */

/* A snapshot call under construction: entries copied out of the
 * snapshot's iterator. */
typedef struct snap_call {
    Lapse__SnapshotEntry *e;
    Lapse__SnapshotEntry **ptrs;
    size_t n, cap;
} snap_call;

static void snap_call_clear(snap_call *sc)
{
    for (size_t i = 0; i < sc->n; i++) {
        free(sc->e[i].key.data);
        free(sc->e[i].value.data);
    }
    sc->n = 0;
}

static int snap_call_add(void *arg, const snapshot_entry *se)
{
    snap_call *sc = arg;
    if (sc->n == sc->cap) {
        size_t cap = sc->cap ? sc->cap * 2 : 64;
        Lapse__SnapshotEntry *e = realloc(sc->e, cap * sizeof(*e));
        if (e == NULL) {
            return LAPSE_ENOMEM;
        }
        sc->e = e;
        Lapse__SnapshotEntry **p = realloc(sc->ptrs, cap * sizeof(*p));
        if (p == NULL) {
            return LAPSE_ENOMEM;
        }
        sc->ptrs = p;
        sc->cap = cap;
    }
    Lapse__SnapshotEntry *e = &sc->e[sc->n];
    lapse__snapshot_entry__init(e);
    e->family = se->family;
    e->key.data = malloc(se->klen ? se->klen : 1);
    e->value.data = malloc(se->vlen ? se->vlen : 1);
    if (e->key.data == NULL || e->value.data == NULL) {
        free(e->key.data);
        free(e->value.data);
        return LAPSE_ENOMEM;
    }
    memcpy(e->key.data, se->key, se->klen);
    memcpy(e->value.data, se->val, se->vlen);
    e->key.len = se->klen;
    e->value.len = se->vlen;
    sc->n++;
    return 0;
}

/* Notes how far the snapshot to follower id of (table_id, part) got, for
 * logship_lags (heartbeats, cluster-status); start_ms 0: it ended. */
static void note_copy(logship *ls, uint32_t table_id, uint32_t part, uint32_t id, uint64_t keys,
                      uint64_t bytes, uint64_t total, int64_t start_ms)
{
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    int slot = -1;
    for (int k = 0; p != NULL && k < PMAP_MAX_REPLICAS && slot < 0; k++) {
        slot = p->copy_id[k] == id ? k : -1;
    }
    for (int k = 0; p != NULL && k < PMAP_MAX_REPLICAS && slot < 0 && start_ms != 0; k++) {
        slot = p->copy_id[k] == 0 ? k : -1;
    }
    if (slot >= 0) {
        p->copy_id[slot] = start_ms != 0 ? id : 0;
        p->copy_keys[slot] = keys;
        p->copy_bytes[slot] = bytes;
        p->copy_total[slot] = total;
        p->copy_start_ms[slot] = start_ms;
    }
    pthread_mutex_unlock(&ls->lock);
}

/* A call of a snapshot on the wire: sent by a thread of its own, so that
 * the next call's entries are read from the store meanwhile, and the
 * replica installs two calls at once (their keys are distinct; the last
 * call, which sets the position, goes once every other is installed). */
typedef struct snap_send {
    rpc_client *c;
    shipment s;
    uint64_t bytes; /* of the entries it carries */
    pthread_t thread;
    int threaded; /* 0: the call was made on the caller's thread */
    int rv;
    char err[256];
} snap_send;

static void *snap_send_main(void *arg)
{
    snap_send *x = arg;
    Lapse__Response *resp = NULL;
    x->rv = rpc_call(x->c, &x->s.req, LOGSHIP_TIMEOUT_MS, &resp, x->err, sizeof(x->err));
    rpc_response_free(resp);
    return NULL;
}

/* Starts x's call on a thread, or makes it here when no thread can be
 * had. */
static void snap_send_start(snap_send *x)
{
    x->threaded = pthread_create(&x->thread, NULL, snap_send_main, x) == 0;
    if (!x->threaded) {
        snap_send_main(x);
    }
}

/* Waits for x's call and frees it. Returns rv, or x's outcome when rv is
 * 0 (err then gets its message). */
static int snap_send_end(snap_send *x, int rv, char *err, size_t errlen)
{
    if (x->threaded) {
        pthread_join(x->thread, NULL);
    }
    shipment_fini(&x->s);
    if (rv == 0 && (rv = x->rv) != 0) {
        snprintf(err, errlen, "%s", x->err);
    }
    return rv;
}

/* Between two calls of a snapshot to node id begun at start: waits as
 * --snapshot-rate-mb asks (no faster than the cap over the whole copy),
 * and logs the progress every RESYNC_SNAPSHOT_REPORT_MS (*reported: when
 * it last did). */
static void pace_snapshot(logship *ls, uint32_t table_id, uint32_t part, uint32_t id, int64_t start,
                          int64_t *reported, uint64_t entries, uint64_t sent)
{
    if (ls->ns->snapshot_rate_mb > 0) {
        int64_t due = start + (int64_t)(sent / 1000 / (uint64_t)ls->ns->snapshot_rate_mb);
        int64_t wait = due - clock_mono_now().ms;
        if (wait > 0) {
            clock_sleep_ms(wait);
        }
    }
    if (clock_mono_now().ms - *reported >= RESYNC_SNAPSHOT_REPORT_MS) {
        *reported = clock_mono_now().ms;
        log_info("table %u partition %u: snapshot to node %u: %" PRIu64 " keys read, %" PRIu64
                 " bytes sent so far",
                 (unsigned)table_id, (unsigned)part, (unsigned)id, entries, sent);
    }
}

/* ---- the transfer ---- */

enum { SNAP_SLOTS = RESYNC_SNAPSHOT_IN_FLIGHT + 1 }; /* call buffers of a transfer */

/* A snapshot transfer to one replica: what its phases share. */
typedef struct snap_xfer {
    logship *ls;
    rpc_client *c;
    uint32_t id, table_id, part;   /* the replica's node, and the partition */
    uint64_t epoch;                /* of the shipments */
    snapshot *sn;                  /* NULL until opened */
    uint64_t snap_epoch, snap_seq; /* the position the snapshot stands at */
    uint64_t entries, bytes;       /* read from the snapshot so far */
    uint64_t sent, calls;          /* answered by the replica so far */
    uint64_t total;                /* the partition's estimated bytes; 0: unknown */
    int64_t start, reported;       /* monotonic ms: the transfer began; progress last logged */
    /* A ring of call buffers: the nwire calls on the wire from the oldest,
     * at head, on, and the next call's entries after them. Calls end in
     * the order they start. */
    snap_call sc[SNAP_SLOTS];
    snap_send out[SNAP_SLOTS];
    int head, nwire;
} snap_xfer;

/* Opens the snapshot of xf's partition and drops the replica's copy (why:
 * the reason, for the log); xf->total gets the partition's estimated size.
 * Returns 0 or a LAPSE_E* code (err set). */
static int begin_transfer(snap_xfer *xf, const char *why, char *err, size_t errlen)
{
    logship *ls = xf->ls;
    /* A commit of a one-copy table that found it unlogged (by an older map
     * than this thread's, where the set had one copy) writes under the
     * stripe lock: once past the lock, every such commit is in the
     * snapshot, and every later one is logged. */
    replog_lock(ls->ns->st, xf->table_id, xf->part);
    replog_unlock(ls->ns->st, xf->table_id, xf->part);
    int rv = snapshot_open(&xf->sn, ls->ns->st, xf->table_id, xf->part, &xf->snap_epoch,
                           &xf->snap_seq, err, errlen);
    if (rv == 0) {
        rv = resync_reset_copy(ls, xf->c, xf->id, xf->table_id, xf->part, xf->epoch, why, err,
                               errlen);
    }
    store_size size = {0};
    char serr[128];
    if (rv == 0 && store_estimate(ls->ns->st, xf->table_id, xf->part, RESYNC_ESTIMATE_ITEMS, &size,
                                  serr, sizeof(serr)) != 0) {
        size.bytes = 0; /* unknown: progress without an ETA */
    }
    xf->total = size.bytes;
    return rv;
}

/* Waits for the oldest call on the wire to end, and counts it. Returns rv,
 * or that call's outcome when rv is 0 (err then gets its message).
 * REQUIRES: xf->nwire > 0. */
static int end_oldest(snap_xfer *xf, int rv, char *err, size_t errlen)
{
    snap_send *x = &xf->out[xf->head];
    rv = snap_send_end(x, rv, err, errlen);
    xf->sent += x->bytes;
    xf->calls++;
    xf->head = (xf->head + 1) % SNAP_SLOTS;
    xf->nwire--;
    return rv;
}

/* Starts the call carrying slot cur's entries (bytes of them; the last
 * call, which sets the position, when done). */
static void start_call(snap_xfer *xf, int cur, uint64_t bytes, int done)
{
    snap_call *sc = &xf->sc[cur];
    snap_send *x = &xf->out[cur];
    memset(x, 0, sizeof(*x));
    x->c = xf->c;
    x->bytes = bytes;
    shipment_init(&x->s, xf->ls, xf->table_id, xf->part, xf->epoch);
    x->s.body.snapshot = sc->ptrs;
    x->s.body.n_snapshot = sc->n;
    for (size_t i = 0; i < sc->n; i++) {
        sc->ptrs[i] = &sc->e[i];
    }
    x->s.body.snapshot_done = done;
    x->s.body.snapshot_epoch = xf->snap_epoch;
    x->s.body.snapshot_seq = xf->snap_seq;
    snap_send_start(x);
    xf->nwire++;
}

/* Sends the snapshot's entries, call_bytes a call, until the last call is
 * on the wire: each call's entries are read while up to
 * RESYNC_SNAPSHOT_IN_FLIGHT calls before are on the wire. Returns 0 or a
 * LAPSE_E* code (err set); calls may still be on the wire either way. */
static int send_calls(snap_xfer *xf, size_t call_bytes, char *err, size_t errlen)
{
    int rv = 0, done = 0;
    while (rv == 0 && !done) {
        int cur = (xf->head + xf->nwire) % SNAP_SLOTS;
        snap_call_clear(&xf->sc[cur]);
        uint64_t before = xf->bytes;
        rv = snapshot_next(xf->sn, call_bytes, snap_call_add, &xf->sc[cur], &done, err, errlen);
        snapshot_counts(xf->sn, &xf->entries, &xf->bytes);
        /* The oldest calls' answers: while as many as may be are on the
         * wire, and all before the last call. Then the cap and progress. */
        while (xf->nwire > 0 && (xf->nwire >= RESYNC_SNAPSHOT_IN_FLIGHT || done || rv != 0)) {
            rv = end_oldest(xf, rv, err, errlen);
            note_copy(xf->ls, xf->table_id, xf->part, xf->id, xf->entries, xf->sent, xf->total,
                      xf->start);
            if (rv == 0) {
                pace_snapshot(xf->ls, xf->table_id, xf->part, xf->id, xf->start, &xf->reported,
                              xf->entries, xf->sent);
            }
        }
        if (rv != 0) {
            break;
        }
        start_call(xf, cur, xf->bytes - before, done);
    }
    return rv;
}

/* Rebuilds replica c's copy from a snapshot of this one, on this thread: a reset, the
 * partition's keys call after call (writes go on; each call's entries are
 * read while up to RESYNC_SNAPSHOT_IN_FLIGHT calls before are on the
 * wire), then, once every call before is installed, the position they
 * stand at, which *applied gets. Progress goes to the log every
 * RESYNC_SNAPSHOT_REPORT_MS. */
static int send_snapshot_here(logship *ls, rpc_client *c, uint32_t id, uint32_t table_id,
                              uint32_t part, uint64_t epoch, const char *why, uint64_t *applied,
                              char *err, size_t errlen)
{
    snap_xfer xf = {.ls = ls,
                    .c = c,
                    .id = id,
                    .table_id = table_id,
                    .part = part,
                    .epoch = epoch,
                    .start = clock_mono_now().ms};
    xf.reported = xf.start;
    /* Test fault: many small calls, so a test's small partition takes the
     * pipelined path below as a big one does. */
    const size_t call_bytes = fault_switch_on(ls->ns, "small-snapshot-calls")
                                  ? RESYNC_SMALL_CALL_BYTES
                                  : LOGSHIP_CATCHUP_BYTES;
    int rv = begin_transfer(&xf, why, err, errlen);
    note_copy(ls, table_id, part, id, 0, 0, xf.total, xf.start);
    if (rv == 0) {
        rv = send_calls(&xf, call_bytes, err, errlen);
    }
    while (xf.nwire > 0) { /* the last call (done), or those out when one failed */
        rv = end_oldest(&xf, rv, err, errlen);
    }
    for (int k = 0; k < SNAP_SLOTS; k++) {
        snap_call_clear(&xf.sc[k]);
        free(xf.sc[k].e);
        free(xf.sc[k].ptrs);
    }
    snapshot_close(xf.sn);
    note_copy(ls, table_id, part, id, 0, 0, 0, 0);
    if (rv == 0) {
        *applied = xf.snap_seq;
        log_info("table %u partition %u: node %u rebuilt from a snapshot at record %" PRIu64
                 " (%" PRIu64 " keys, %" PRIu64 " bytes, %" PRId64 " ms, %" PRIu64 " calls)",
                 (unsigned)table_id, (unsigned)part, (unsigned)id, xf.snap_seq, xf.entries, xf.sent,
                 clock_mono_now().ms - xf.start, xf.calls);
    }
    return rv;
}

/* A snapshot sent on a thread of its own at a lower CPU priority. */
typedef struct nice_send {
    logship *ls;
    rpc_client *c;
    uint32_t id, table_id, part;
    uint64_t epoch;
    const char *why;
    uint64_t applied;
    int nice, rv;
    char err[512];
} nice_send;

static void *nice_send_main(void *arg)
{
    nice_send *x = arg;
    /* This thread alone (Linux: a thread's nice value is its own); the
     * call threads it starts inherit it. */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), x->nice) != 0) {
        log_warn("table %u partition %u: the snapshot for node %u is sent at the daemon's "
                 "priority: nice %d refused: %s",
                 (unsigned)x->table_id, (unsigned)x->part, (unsigned)x->id, x->nice,
                 strerror(errno));
    } else {
        log_info("table %u partition %u: the snapshot for node %u is sent at nice %d "
                 "(--snapshot-nice)",
                 (unsigned)x->table_id, (unsigned)x->part, (unsigned)x->id, x->nice);
    }
    x->rv = send_snapshot_here(x->ls, x->c, x->id, x->table_id, x->part, x->epoch, x->why,
                               &x->applied, x->err, sizeof(x->err));
    return NULL;
}

/* Rebuilds replica c's copy from a snapshot (send_snapshot_here): with
 * --snapshot-nice, on a thread of that nice value, so the foreground's
 * calls win the CPU while it reads and sends (docs/benchmarks.md, "Moves
 * at a lower priority"). The thread holds no lock the foreground waits
 * on for longer than begin_transfer's take-and-release of the stripe.
 * The node's other work on this thread (log catch-up, with the partition
 * held at the end) keeps the daemon's priority: a low-priority holder of
 * that lock would stall the writes behind it. */
int resync_send_snapshot(logship *ls, rpc_client *c, uint32_t id, uint32_t table_id, uint32_t part,
                         uint64_t epoch, const char *why, uint64_t *applied, char *err,
                         size_t errlen)
{
    const int nice = ls->ns->snapshot_nice;
    pthread_t t;
    nice_send x = {ls, c, id, table_id, part, epoch, why, 0, nice, 0, ""};
    if (nice <= 0 || pthread_create(&t, NULL, nice_send_main, &x) != 0) {
        return send_snapshot_here(ls, c, id, table_id, part, epoch, why, applied, err, errlen);
    }
    pthread_join(t, NULL);
    *applied = x.applied;
    if (x.rv != 0) {
        snprintf(err, errlen, "%s", x.err);
    }
    return x.rv;
}
