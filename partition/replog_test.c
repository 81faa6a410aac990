/*
 * replog_test: the replication log between two real stores in temp dirs, a
 * primary and a replica, with a ship hook that applies each record on the
 * replica in-process (as the node's hook does over the network): every
 * kind of write (put, conditional put, delete, update, batch, TTL sweep,
 * backfill) leaves the two with equal item digests and log positions; a
 * gap, an older epoch and a malformed record are refused; a failed ship
 * leaves the write on the primary only, and the next ship catches the
 * replica up from the log; a node that is not the primary writes nothing;
 * a copy holding a record the new primary's log has not (a deposed
 * primary's unacknowledged suffix) is found diverged, dropped with
 * replog_reset and rebuilt from the log. With a small retain both copies
 * keep only the log's tail; a copy rebuilt from a snapshot taken while
 * writes go on, then given the log from the snapshot's position, equals
 * the primary key for key; entries of another partition are refused.
 */
#include "store_test_util.h"

#include "../common/clock.h"
#include "store_int.h"
#include "../common/change.h"
#include "expiry.h"
#include "outbox.h"
#include "replog.h"
#include "request.h"
#include "snapshot.h"

typedef struct pair {
    fixture *f;
    store *replica;
    char rdir[512];
    uint64_t epoch;    /* the primary's epoch (0: not primary) */
    int fail_ships;    /* ships to fail before reaching the replica */
    int ships;         /* ship calls */
    int caught_up;     /* records resent by catch-ups */
    int diverged;      /* ships the replica answered with diverged */
    int waits;         /* records waited for (hook_wait) */
    int waited_locked; /* of them, waited for with their partition's stripe held */
} pair;

static pair g_pair;

static int hook_begin(void *arg, uint32_t table_id, uint32_t part, uint64_t *epoch, int *took_in,
                      char *err, size_t errlen)
{
    (void)table_id;
    (void)part;
    (void)took_in;
    *epoch = ((pair *)arg)->epoch;
    if (*epoch == 0) {
        snprintf(err, errlen, "not the primary");
        return LAPSE_EWRONGNODE;
    }
    return 0;
}

typedef struct resend {
    pair *p;
    uint32_t table_id, part;
    uint64_t prev_epoch; /* of the record before the next one */
} resend;

static int resend_one(void *arg, uint64_t seq, const uint8_t *rec, size_t len)
{
    resend *r = arg;
    uint64_t applied = 0;
    char err[256];
    int diverged = 0;
    int rv = replog_apply(r->p->replica, r->table_id, r->part, seq, r->prev_epoch, rec, len,
                          &applied, &diverged, err, sizeof err);
    r->p->caught_up += rv == 0;
    r->prev_epoch = buf_get_u64be(rec);
    return rv;
}

/* Resends the primary's log after applied to the replica. */
static int resend_from(pair *p, uint32_t table_id, uint32_t part, uint64_t applied, char *err,
                       size_t errlen)
{
    resend r = {p, table_id, part, 0};
    int rv = replog_record_epoch(p->f->st, table_id, part, applied, &r.prev_epoch, err, errlen);
    return rv != 0 ? rv
                   : replog_read(p->f->st, table_id, part, applied, SIZE_MAX, 0, resend_one, &r,
                                 err, errlen);
}

/* As the node's hook: send; on a gap, resend the log from where the replica
 * stands, then the record again. */
static int hook_ship(void *arg, uint32_t table_id, uint32_t part, uint64_t seq, uint64_t prev_epoch,
                     const uint8_t *rec, size_t len, void **ticket, char *err, size_t errlen)
{
    (void)ticket; /* shipped there and then */
    pair *p = arg;
    p->ships++;
    if (p->fail_ships > 0) {
        p->fail_ships--;
        snprintf(err, errlen, "replica unreachable (injected)");
        return LAPSE_EUNAVAILABLE;
    }
    uint64_t applied = 0;
    int diverged = 0;
    int rv = replog_apply(p->replica, table_id, part, seq, prev_epoch, rec, len, &applied,
                          &diverged, err, errlen);
    p->diverged += diverged;
    if (rv == LAPSE_ESTATE && !diverged) {
        rv = resend_from(p, table_id, part, applied, err, errlen);
    }
    return rv;
}

/* A record queued by hook_ship_later, shipped when waited for. */
typedef struct queued {
    uint32_t table_id, part;
    uint64_t seq, prev_epoch;
    size_t len;
    uint8_t rec[];
} queued;

/* As the node's group commit: queue the record, ship it in wait. */
static int hook_ship_later(void *arg, uint32_t table_id, uint32_t part, uint64_t seq,
                           uint64_t prev_epoch, const uint8_t *rec, size_t len, void **ticket,
                           char *err, size_t errlen)
{
    (void)arg;
    queued *q = malloc(sizeof(*q) + len);
    if (q == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    *q = (queued){
        .table_id = table_id, .part = part, .seq = seq, .prev_epoch = prev_epoch, .len = len};
    memcpy(q->rec, rec, len);
    *ticket = q;
    return 0;
}

/* Ships each queued record, noting whether its partition's stripe lock is
 * held meanwhile (by this thread: the tests are single-threaded, so a
 * failed trylock can only mean the caller waits under it). */
static int hook_wait(void *arg, void *const *tickets, size_t n, char *err, size_t errlen)
{
    pair *p = arg;
    int rv = 0;
    for (size_t i = 0; i < n; i++) {
        queued *q = tickets[i];
        pthread_mutex_t *mu = store_stripe(p->f->st, q->table_id, q->part);
        if (pthread_mutex_trylock(mu) == 0) {
            pthread_mutex_unlock(mu);
        } else {
            p->waited_locked++;
        }
        p->waits++;
        void *none = NULL;
        if (rv == 0) {
            rv = hook_ship(arg, q->table_id, q->part, q->seq, q->prev_epoch, q->rec, q->len, &none,
                           err, errlen);
        }
        free(q);
    }
    return rv;
}

static int pair_setup(void **state)
{
    if (setup(state) != 0) {
        return -1;
    }
    pair *p = &g_pair;
    memset(p, 0, sizeof(*p));
    p->f = *state;
    p->epoch = 3;
    if (testdir_make(p->rdir, sizeof(p->rdir), "replog_replica") != 0 ||
        store_open(&p->replica, p->rdir, p->f->err, sizeof(p->f->err)) != 0) {
        return -1;
    }
    store_repl_hook h = {.begin = hook_begin, .ship = hook_ship, .arg = p};
    store_set_repl_hook(p->f->st, &h);
    return 0;
}

/* Every entry of a snapshot of (table_id, part) in st, in order, with the
 * position it stands at; installs them into dst (non-NULL) chunk by chunk
 * of at most chunk bytes on the way. */
typedef struct entries {
    uint32_t fam[4096];
    buf k[4096], v[4096];
    size_t n, chunk_start;
} entries;

static int collect(void *arg, const snapshot_entry *e)
{
    entries *es = arg;
    assert_true(es->n < 4096);
    es->fam[es->n] = e->family;
    buf_init(&es->k[es->n]);
    buf_init(&es->v[es->n]);
    assert_int_equal(buf_append(&es->k[es->n], e->key, e->klen), 0);
    assert_int_equal(buf_append(&es->v[es->n], e->val, e->vlen), 0);
    es->n++;
    return 0;
}

static void entries_fini(entries *es)
{
    for (size_t i = 0; i < es->n; i++) {
        buf_fini(&es->k[i]);
        buf_fini(&es->v[i]);
    }
    es->n = 0;
}

static snapshot_entry entry_at(const entries *es, size_t i)
{
    return (snapshot_entry){es->fam[i], es->k[i].data, es->k[i].len, es->v[i].data, es->v[i].len};
}

static void read_snapshot(fixture *f, store *st, uint32_t table_id, uint32_t part, size_t chunk,
                          store *dst, entries *es, uint64_t *epoch, uint64_t *seq)
{
    snapshot *sn = NULL;
    assert_ok(snapshot_open(&sn, st, table_id, part, epoch, seq, f->err, sizeof f->err), f);
    int done = 0, calls = 0;
    while (!done) {
        es->chunk_start = es->n;
        assert_ok(snapshot_next(sn, chunk, collect, es, &done, f->err, sizeof f->err), f);
        calls++;
        size_t n = es->n - es->chunk_start;
        snapshot_entry e[4096];
        for (size_t i = 0; i < n; i++) {
            e[i] = entry_at(es, es->chunk_start + i);
        }
        if (dst != NULL && n > 0) {
            assert_ok(snapshot_install(dst, table_id, part, e, n, f->err, sizeof f->err), f);
        }
    }
    assert_true(chunk > 4096 || calls > 1 || es->n < 8); /* small chunks: several */
    uint64_t ne, nb;
    snapshot_counts(sn, &ne, &nb);
    assert_int_equal(ne, es->n);
    snapshot_close(sn);
}

/* Fails unless the two lists are entry for entry equal. */
static void assert_entries_equal(const entries *a, const entries *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        assert_int_equal(a->fam[i], b->fam[i]);
        assert_int_equal(a->k[i].len, b->k[i].len);
        assert_memory_equal(a->k[i].data, b->k[i].data, a->k[i].len);
        assert_int_equal(a->v[i].len, b->v[i].len);
        if (a->v[i].len > 0) {
            assert_memory_equal(a->v[i].data, b->v[i].data, a->v[i].len);
        }
    }
}

static int pair_teardown(void **state)
{
    store_close(g_pair.replica);
    testdir_remove(g_pair.rdir);
    return teardown(state);
}

static table_schema replicated(void)
{
    table_schema t = plain;
    t.replication = 3;
    t.ttl.enabled = 1;
    snprintf(t.ttl.attribute, sizeof(t.ttl.attribute), "Exp");
    return t;
}

/* Both stores hold the same items and log position in every partition. */
static void assert_same(pair *p, const table_schema *t)
{
    fixture *f = p->f;
    for (uint32_t part = 0; part < t->partitions; part++) {
        uint64_t c1, d1, c2, d2, e1, s1, e2, s2;
        assert_ok(replog_items_digest(f->st, t->id, part, &c1, &d1, f->err, sizeof f->err), f);
        assert_ok(replog_items_digest(p->replica, t->id, part, &c2, &d2, f->err, sizeof f->err), f);
        assert_int_equal(c1, c2);
        assert_true(d1 == d2);
        assert_ok(replog_position(f->st, t->id, part, &e1, &s1, f->err, sizeof f->err), f);
        assert_ok(replog_position(p->replica, t->id, part, &e2, &s2, f->err, sizeof f->err), f);
        assert_int_equal(s1, s2);
        assert_int_equal(e1, e2);
    }
}

static uint64_t total_items(store *st, const table_schema *t)
{
    uint64_t n = 0;
    char err[256];
    for (uint32_t part = 0; part < t->partitions; part++) {
        uint64_t c, d;
        assert_int_equal(replog_items_digest(st, t->id, part, &c, &d, err, sizeof err), 0);
        n += c;
    }
    return n;
}

static item *row(int pk, const char *v, int64_t exp_s)
{
    char k[32], e[32];
    snprintf(k, sizeof k, "%d", pk);
    snprintf(e, sizeof e, "%lld", (long long)exp_s);
    return exp_s > 0 ? itm(3, "Pk", ATTR_N, k, "V", ATTR_S, v, "Exp", ATTR_N, e)
                     : itm(2, "Pk", ATTR_N, k, "V", ATTR_S, v);
}

/* One TTL sweep of every partition of t; returns the items it deleted. */
static size_t sweep_all(fixture *f, const table_schema *t)
{
    size_t deleted = 0;
    for (uint32_t part = 0; part < t->partitions; part++) {
        expiry_sweep_result res;
        memset(&res, 0, sizeof res);
        assert_ok(expiry_sweep(f->st, t, part, clock_wall_now(), 100, &res, f->err, sizeof f->err),
                  f);
        deleted += res.deleted;
    }
    return deleted;
}

static void test_every_write_kind_reaches_the_replica(void **state)
{
    (void)state;
    pair *p = &g_pair;
    fixture *f = p->f;
    table_schema t = replicated();
    const int64_t now_s = clock_wall_now().ms / 1000;
    for (int i = 0; i < 40; i++) {
        put(f, &t, row(i, "a", i % 4 == 0 ? now_s - 10 : now_s + 3600));
    }
    assert_int_equal(p->ships, 40);
    assert_same(p, &t);

    /* A conditional put that fails writes and ships nothing. */
    item *it = row(1, "b", 0);
    store_cond c = {.kind = STORE_COND_NOT_EXISTS, .attr = "Pk"};
    assert_code(store_put(f->st, &t, it, &c, NULL, f->err, sizeof f->err), LAPSE_ECONDITION, f);
    item_free(it);
    assert_int_equal(p->ships, 40);

    item *k = itm(1, "Pk", ATTR_N, "2");
    assert_ok(store_delete(f->st, &t, k, NULL, NULL, f->err, sizeof f->err), f);
    item_free(k);
    k = itm(1, "Pk", ATTR_N, "3");
    attr_value nv = val(ATTR_S, "updated");
    store_update_action act = {.name = "V", .value = &nv};
    item *out = NULL;
    assert_ok(store_update(f->st, &t, k, &act, 1, NULL, &out, f->err, sizeof f->err), f);
    item_free(out);
    item_free(k);
    item_value_fini(&nv);
    item *puts[10];
    store_write w[10];
    for (int i = 0; i < 10; i++) {
        puts[i] = row(100 + i, "batch", 0);
        w[i] = (store_write){.put = puts[i]};
    }
    assert_ok(store_batch_write(f->st, &t, w, 10, f->err, sizeof f->err), f);
    for (int i = 0; i < 10; i++) {
        item_free(puts[i]);
    }
    assert_same(p, &t);
    assert_int_equal(total_items(p->replica, &t), 49);

    /* The TTL sweep's deletes replicate like any write: the 10 due items
     * (Pk 0, 4, ..., 36) go from both. */
    size_t deleted = sweep_all(f, &t);
    assert_int_equal(deleted, 10);
    assert_same(p, &t);
    assert_int_equal(total_items(p->replica, &t), 39);
}

/* The partition of item Pk = n. */
static uint32_t part_of(int n, uint32_t partitions)
{
    char k[32];
    snprintf(k, sizeof k, "%d", n);
    attr_value v = val(ATTR_N, k);
    uint32_t part = 0;
    assert_int_equal(hash_partition(&v, partitions, &part), 0);
    item_value_fini(&v);
    return part;
}

/* One record taken from the log. */
typedef struct grab {
    uint8_t rec[4096];
    size_t len;
} grab;

static int take(void *arg, uint64_t s, const uint8_t *rec, size_t len)
{
    (void)s;
    grab *gr = arg;
    assert_true(len <= sizeof(gr->rec));
    memcpy(gr->rec, rec, len);
    gr->len = len;
    return 0;
}

static void test_replica_refuses_gaps_old_epochs_and_garbage(void **state)
{
    (void)state;
    pair *p = &g_pair;
    fixture *f = p->f;
    table_schema t = replicated();
    put(f, &t, row(7, "x", 0));
    const uint32_t part = part_of(7, t.partitions);
    uint64_t e, seq, applied = 0;
    assert_ok(replog_position(f->st, t.id, part, &e, &seq, f->err, sizeof f->err), f);
    assert_int_equal(seq, 1);
    assert_int_equal(e, 3);

    /* Take record 1 from the log and replay it at the wrong places. */
    grab gr = {.len = 0};
    assert_ok(replog_read(f->st, t.id, part, 0, 1, 0, take, &gr, f->err, sizeof f->err), f);
    assert_true(gr.len > 8);
    /* A repeat is acknowledged without effect. */
    int dv = 0;
    assert_ok(replog_apply(p->replica, t.id, part, 1, 0, gr.rec, gr.len, &applied, &dv, f->err,
                           sizeof f->err),
              f);
    assert_int_equal(applied, 1);
    /* A gap. */
    assert_code(replog_apply(p->replica, t.id, part, 3, 3, gr.rec, gr.len, &applied, &dv, f->err,
                             sizeof f->err),
                LAPSE_ESTATE, f);
    assert_int_equal(applied, 1);
    assert_int_equal(dv, 0);
    /* An older epoch (a deposed primary's record 2). */
    uint8_t old[4096];
    memcpy(old, gr.rec, gr.len);
    old[7] = 2;
    assert_code(replog_apply(p->replica, t.id, part, 2, 3, old, gr.len, &applied, &dv, f->err,
                             sizeof f->err),
                LAPSE_EPERM, f);
    /* Garbage: too short, and ops that do not parse. Nothing applied. */
    assert_code(
        replog_apply(p->replica, t.id, part, 2, 3, old, 5, &applied, &dv, f->err, sizeof f->err),
        LAPSE_ECORRUPT, f);
    memcpy(old, gr.rec, gr.len);
    old[8] = 'Z';
    assert_code(replog_apply(p->replica, t.id, part, 2, 3, old, gr.len, &applied, &dv, f->err,
                             sizeof f->err),
                LAPSE_ECORRUPT, f);
    assert_ok(replog_position(p->replica, t.id, part, &e, &seq, f->err, sizeof f->err), f);
    assert_int_equal(seq, 1);
    assert_same(p, &t);
}

/* Records taken from a log, in order. */
typedef struct grabs {
    grab g[8];
    size_t n;
} grabs;

static int take_all(void *arg, uint64_t s, const uint8_t *rec, size_t len)
{
    grabs *gs = arg;
    assert_true(gs->n < 8);
    take(&gs->g[gs->n++], s, rec, len);
    return 0;
}

/* Puts Pk = pk on the primary only (every ship fails): its record is in
 * the primary's log for the test to hand to the replica. */
static void put_primary_only(pair *p, const table_schema *t, int pk)
{
    item *it = row(pk, "solo", clock_wall_now().ms / 1000 + 3600); /* item and expiry entry */
    p->fail_ships = 1;
    assert_code(store_put(p->f->st, t, it, NULL, NULL, p->f->err, sizeof p->f->err),
                LAPSE_EUNAVAILABLE, p->f);
    item_free(it);
}

/* A follower applies the records of several partitions in one batch (a
 * group-commit call's parts, replog_apply_into): each partition's run is
 * checked on its own (a gap in one does not stop the other), a malformed
 * record leaves the batch as it was, and one write lands every record
 * accepted, with each partition's position. */
static void test_runs_of_several_partitions_share_a_batch(void **state)
{
    (void)state;
    pair *p = &g_pair;
    fixture *f = p->f;
    table_schema t = replicated();
    int a_keys[3], b_keys[2], na = 0, nb = 0;
    const uint32_t pa = part_of(0, t.partitions);
    uint32_t pb = pa;
    for (int k = 0; na < 3 || nb < 2; k++) {
        uint32_t pk = part_of(k, t.partitions);
        if (pk == pa && na < 3) {
            a_keys[na++] = k;
        } else if (pk != pa && (nb == 0 || pk == pb) && nb < 2) {
            pb = pk;
            b_keys[nb++] = k;
        }
    }
    for (int i = 0; i < 3; i++) {
        put_primary_only(p, &t, a_keys[i]);
    }
    for (int i = 0; i < 2; i++) {
        put_primary_only(p, &t, b_keys[i]);
    }
    grabs ga = {.n = 0}, gb = {.n = 0};
    assert_ok(replog_read(f->st, t.id, pa, 0, 8, 0, take_all, &ga, f->err, sizeof f->err), f);
    assert_ok(replog_read(f->st, t.id, pb, 0, 8, 0, take_all, &gb, f->err, sizeof f->err), f);
    assert_int_equal(ga.n, 3);
    assert_int_equal(gb.n, 2);

    const uint32_t tids[2] = {t.id, t.id}, pids[2] = {pa, pb};
    assert_int_equal(replog_lock_many(p->replica, tids, pids, 2), 0);
    db_batch *b = db_batch_new();
    assert_non_null(b);
    replog_run ra, rb;
    replog_run_init(&ra, t.id, pa);
    replog_run_init(&rb, t.id, pb);
    uint64_t applied = 0;
    int dv = 0;
    for (size_t i = 0; i < 3; i++) {
        assert_ok(replog_apply_into(p->replica, b, &ra, i + 1, i == 0 ? 0 : 3, ga.g[i].rec,
                                    ga.g[i].len, &applied, &dv, f->err, sizeof f->err),
                  f);
    }
    assert_ok(replog_apply_into(p->replica, b, &rb, 1, 0, gb.g[0].rec, gb.g[0].len, &applied, &dv,
                                f->err, sizeof f->err),
              f);
    const size_t ops = db_batch_count(b);
    /* Partition b's record 3 leaves a gap: refused, a's run goes on. */
    assert_code(replog_apply_into(p->replica, b, &rb, 3, 3, gb.g[1].rec, gb.g[1].len, &applied, &dv,
                                  f->err, sizeof f->err),
                LAPSE_ESTATE, f);
    assert_int_equal(applied, 1);
    /* A record cut short in its last op adds nothing, not even the ops
     * before the cut. */
    assert_code(replog_apply_into(p->replica, b, &ra, 4, 3, ga.g[2].rec, ga.g[2].len - 1, &applied,
                                  &dv, f->err, sizeof f->err),
                LAPSE_ECORRUPT, f);
    assert_int_equal(db_batch_count(b), ops);
    assert_int_equal(ra.added, 3);
    assert_int_equal(rb.added, 1);
    replog_run *runs[2] = {&ra, &rb};
    assert_ok(replog_write(p->replica, b, runs, 2, f->err, sizeof f->err), f);
    replog_unlock_many(p->replica, tids, pids, 2);
    db_batch_free(b);

    uint64_t e, seq;
    assert_ok(replog_position(p->replica, t.id, pa, &e, &seq, f->err, sizeof f->err), f);
    assert_int_equal(seq, 3);
    assert_ok(replog_position(p->replica, t.id, pb, &e, &seq, f->err, sizeof f->err), f);
    assert_int_equal(seq, 1);
    assert_int_equal(total_items(p->replica, &t), 4);
    /* The rest of b's log by the usual path: the copies end equal. */
    assert_ok(replog_apply(p->replica, t.id, pb, 2, 3, gb.g[1].rec, gb.g[1].len, &applied, &dv,
                           f->err, sizeof f->err),
              f);
    assert_same(p, &t);
}

static void test_failed_ship_then_catch_up(void **state)
{
    (void)state;
    pair *p = &g_pair;
    fixture *f = p->f;
    table_schema t = replicated();
    t.partitions = 1; /* every write in one partition, one log */
    put(f, &t, row(1, "a", 0));
    p->fail_ships = 2;
    item *it = row(2, "b", 0);
    assert_code(store_put(f->st, &t, it, NULL, NULL, f->err, sizeof f->err), LAPSE_EUNAVAILABLE, f);
    item_free(it);
    it = row(3, "c", 0);
    assert_code(store_put(f->st, &t, it, NULL, NULL, f->err, sizeof f->err), LAPSE_EUNAVAILABLE, f);
    item_free(it);
    /* Written on the primary, not on the replica: not acknowledged. */
    assert_int_equal(total_items(f->st, &t), 3);
    assert_int_equal(total_items(p->replica, &t), 1);
    /* The next write's record meets a gap; the hook resends 2 and 3 and 4. */
    put(f, &t, row(4, "d", 0));
    assert_int_equal(p->caught_up, 3);
    assert_same(p, &t);
    assert_int_equal(total_items(p->replica, &t), 4);
}

/* The replica holds record 2 of epoch 3 that the primary, now at epoch 4,
 * never had (it was a deposed primary's last, unacknowledged write): the
 * primary's record 2 of epoch 4 and any record after it find the copy
 * diverged; replog_reset drops it and the log rebuilds it. */
static void test_diverged_copy_is_reset_and_rebuilt(void **state)
{
    (void)state;
    pair *p = &g_pair;
    fixture *f = p->f;
    table_schema t = replicated();
    t.partitions = 1;
    put(f, &t, row(1, "a", 0));
    grab gr = {.len = 0};
    assert_ok(replog_read(f->st, t.id, 0, 0, 1, 0, take, &gr, f->err, sizeof f->err), f);
    uint64_t applied = 0;
    int dv = 0;
    /* The deposed primary's record 2 (record 1's ops again, epoch 3). */
    assert_ok(replog_apply(p->replica, t.id, 0, 2, 3, gr.rec, gr.len, &applied, &dv, f->err,
                           sizeof f->err),
              f);
    assert_int_equal(applied, 2);
    /* A record after it whose predecessor is of another epoch. */
    uint8_t e4[4096];
    memcpy(e4, gr.rec, gr.len);
    e4[7] = 4;
    assert_code(
        replog_apply(p->replica, t.id, 0, 3, 4, e4, gr.len, &applied, &dv, f->err, sizeof f->err),
        LAPSE_ESTATE, f);
    assert_int_equal(dv, 1);
    assert_non_null(strstr(f->err, "diverged"));
    /* The new primary's own record 2, of epoch 4. */
    p->epoch = 4;
    item *it = row(2, "b", 0);
    assert_code(store_put(f->st, &t, it, NULL, NULL, f->err, sizeof f->err), LAPSE_ESTATE, f);
    item_free(it);
    assert_int_equal(p->diverged, 1);
    /* Dropped and rebuilt from the whole log: the same items and position. */
    assert_ok(replog_reset(p->replica, t.id, 0, f->err, sizeof f->err), f);
    assert_int_equal(total_items(p->replica, &t), 0);
    uint64_t e, seq;
    assert_ok(replog_position(p->replica, t.id, 0, &e, &seq, f->err, sizeof f->err), f);
    assert_int_equal(seq, 0);
    assert_ok(resend_from(p, t.id, 0, 0, f->err, sizeof f->err), f);
    assert_same(p, &t);
    put(f, &t, row(3, "c", 0));
    assert_same(p, &t);
    assert_int_equal(total_items(p->replica, &t), 3);
}

/* With a retain of 8 records, both copies keep only the log's tail
 * (trimmed at every third record past the eighth) and stay equal; a
 * resent record that was trimmed is acknowledged without effect. */
static void test_log_is_trimmed_on_both_copies(void **state)
{
    (void)state;
    pair *p = &g_pair;
    fixture *f = p->f;
    store_set_replog_retain(f->st, 8);
    store_set_replog_retain(p->replica, 8);
    table_schema t = replicated();
    t.partitions = 1;
    for (int i = 0; i < 40; i++) {
        put(f, &t, row(i, "a", 0));
    }
    assert_same(p, &t);
    uint64_t first = 0;
    assert_ok(replog_first(f->st, t.id, 0, &first, f->err, sizeof f->err), f);
    assert_int_equal(first, 32); /* the last trim, at 39, dropped 1..31 */
    assert_ok(replog_first(p->replica, t.id, 0, &first, f->err, sizeof f->err), f);
    assert_int_equal(first, 32);
    grab gr = {.len = 0};
    assert_ok(replog_read(f->st, t.id, 0, 39, 1, 0, take, &gr, f->err, sizeof f->err), f);
    uint64_t epoch = 0, applied = 0;
    int dv = 0;
    assert_code(replog_record_epoch(f->st, t.id, 0, 5, &epoch, f->err, sizeof f->err),
                LAPSE_ENOTFOUND, f);
    assert_ok(replog_record_epoch(f->st, t.id, 0, 40, &epoch, f->err, sizeof f->err), f);
    assert_int_equal(epoch, 3);
    assert_ok(replog_apply(p->replica, t.id, 0, 5, 3, gr.rec, gr.len, &applied, &dv, f->err,
                           sizeof f->err),
              f);
    assert_int_equal(applied, 40);
    assert_int_equal(dv, 0);
    /* retain 0 keeps everything from then on */
    store_set_replog_retain(f->st, 0);
    for (int i = 40; i < 60; i++) {
        put(f, &t, row(i, "a", 0));
    }
    assert_ok(replog_first(f->st, t.id, 0, &first, f->err, sizeof f->err), f);
    assert_int_equal(first, 32);
    assert_same(p, &t);
}

/* A copy rebuilt from a snapshot taken while writes go on holds exactly
 * the primary's keys (items, expiry index, outbox counters, ...) as of the
 * snapshot's position, then takes the log from there and equals the
 * primary, key for key. The log alone could not rebuild it (trimmed). An
 * entry of another partition or family is refused. */
static void test_snapshot_rebuilds_a_copy(void **state)
{
    (void)state;
    pair *p = &g_pair;
    fixture *f = p->f;
    store_set_replog_retain(f->st, 8);
    store_set_replog_retain(p->replica, 8);
    table_schema t = replicated();
    t.partitions = 2;
    const int64_t now_s = clock_wall_now().ms / 1000;
    for (int i = 0; i < 60; i++) {
        put(f, &t, row(i, i % 2 ? "odd" : "even", i % 3 == 0 ? now_s + 3600 : 0));
    }
    char dir[512];
    store *fresh = NULL;
    assert_int_equal(testdir_make(dir, sizeof dir, "replog_fresh"), 0);
    assert_ok(store_open(&fresh, dir, f->err, sizeof f->err), f);
    for (uint32_t part = 0; part < t.partitions; part++) {
        uint64_t first = 0;
        assert_ok(replog_first(f->st, t.id, part, &first, f->err, sizeof f->err), f);
        assert_true(first > 1);
        entries *es = calloc(1, sizeof(*es));
        uint64_t se = 0, sseq = 0;
        snapshot *sn = NULL;
        /* The snapshot's moment: writes after it are not in it. */
        assert_ok(snapshot_open(&sn, f->st, t.id, part, &se, &sseq, f->err, sizeof f->err), f);
        snapshot_close(sn);
        read_snapshot(f, f->st, t.id, part, 64, NULL, es, &se, &sseq);
        entries_fini(es);
        uint64_t before = sseq;
        read_snapshot(f, f->st, t.id, part, 64, fresh, es, &se, &sseq);
        assert_int_equal(sseq, before);
        for (int i = 100; i < 108; i++) { /* fewer than retain: the log still has them */
            if (part_of(i, t.partitions) == part) {
                put(f, &t, row(i, "late", now_s + 60));
            }
        }
        assert_ok(snapshot_finish(fresh, t.id, part, se, sseq, f->err, sizeof f->err), f);
        uint64_t e2, s2;
        assert_ok(replog_position(fresh, t.id, part, &e2, &s2, f->err, sizeof f->err), f);
        assert_int_equal(s2, sseq);
        assert_int_equal(e2, se);
        /* The log from the snapshot's position on. */
        resend r = {.p = &(pair){.replica = fresh}, .table_id = t.id, .part = part};
        assert_ok(
            replog_record_epoch(fresh, t.id, part, sseq, &r.prev_epoch, f->err, sizeof f->err), f);
        assert_ok(replog_read(f->st, t.id, part, sseq, SIZE_MAX, 0, resend_one, &r, f->err,
                              sizeof f->err),
                  f);
        entries *want = calloc(1, sizeof(*want)), *got = calloc(1, sizeof(*got));
        read_snapshot(f, f->st, t.id, part, 1 << 20, NULL, want, &se, &sseq);
        read_snapshot(f, fresh, t.id, part, 1 << 20, NULL, got, &e2, &s2);
        assert_true(want->n > 20);
        assert_entries_equal(got, want);
        assert_int_equal(s2, sseq);
        /* A copy that holds its log takes no snapshot (it was not reset). */
        snapshot_entry bad = entry_at(want, 0);
        assert_code(snapshot_install(fresh, t.id, part, &bad, 1, f->err, sizeof f->err),
                    LAPSE_ESTATE, f);
        assert_code(snapshot_finish(fresh, t.id, part, 1, 1, f->err, sizeof f->err), LAPSE_ESTATE,
                    f);
        /* Entries that are not this partition's are refused, none written. */
        bad.family = 6; /* the GSI family */
        assert_code(snapshot_install(fresh, t.id, part, &bad, 1, f->err, sizeof f->err),
                    LAPSE_EINVAL, f);
        bad = entry_at(want, 0);
        assert_code(snapshot_install(fresh, t.id, part ^ 1, &bad, 1, f->err, sizeof f->err),
                    LAPSE_EINVAL, f);
        entries_fini(es);
        entries_fini(want);
        entries_fini(got);
        free(es);
        free(want);
        free(got);
    }
    uint64_t c1 = total_items(f->st, &t), c2 = total_items(fresh, &t);
    assert_int_equal(c1, c2);
    store_close(fresh);
    testdir_remove(dir);
}

/* Every commit waits for its replicas with its partition unlocked: the
 * node's followers apply a record under their own stripe lock, so a sweep
 * or backfill step waiting under its lock could wait on a node that waits
 * for it (two nodes sweeping partitions of one stripe). Writes, batches,
 * TTL sweeps and backfill steps all queue their record and wait after
 * unlocking; the replica ends equal. */
static void test_commits_wait_for_replicas_unlocked(void **state)
{
    (void)state;
    pair *p = &g_pair;
    fixture *f = p->f;
    store_repl_hook h = {.begin = hook_begin, .ship = hook_ship_later, .wait = hook_wait, .arg = p};
    store_set_repl_hook(f->st, &h);
    table_schema t = replicated();
    const int64_t now_s = clock_wall_now().ms / 1000;
    for (int i = 0; i < 20; i++) {
        put(f, &t, row(i, "a", i % 2 == 0 ? now_s - 10 : now_s + 3600));
    }
    item *puts[4];
    store_write w[4];
    for (int i = 0; i < 4; i++) {
        puts[i] = row(100 + i, "batch", now_s - 5);
        w[i] = (store_write){.put = puts[i]};
    }
    assert_ok(store_batch_write(f->st, &t, w, 4, f->err, sizeof f->err), f);
    for (int i = 0; i < 4; i++) {
        item_free(puts[i]);
    }
    const int writes = p->waits;
    assert_true(writes >= 21);
    size_t deleted = sweep_all(f, &t);
    assert_int_equal(deleted, 14);
    const int sweeps = p->waits - writes;
    assert_true(sweeps > 0);
    t.ttl.config_version = 7; /* a new config: every partition is indexed again */
    for (uint32_t part = 0; part < t.partitions; part++) {
        uint64_t scanned = 0;
        int done = 0;
        assert_ok(expiry_backfill_step(f->st, &t, part, clock_wall_now(), 1000, &scanned, NULL,
                                       &done, f->err, sizeof f->err),
                  f);
        assert_true(done);
    }
    assert_int_equal(p->waits - writes - sweeps, (int)t.partitions);
    assert_int_equal(p->waited_locked, 0);
    assert_same(p, &t);
    assert_int_equal(total_items(p->replica, &t), 10);
}

/* The replica of the pair as a new primary (epoch 4) that takes in the
 * records the old one (the fixture's store) holds beyond its log, the way
 * the node's reconcile does: in prepare (before a write reads), or, with
 * no prepare, in begin. Its ships go back to the old primary's store. */
typedef struct takeover {
    pair *p;
    int reconciled, use_prepare;
    size_t taken;
} takeover;

typedef struct takein {
    store *st;
    uint32_t table_id, part;
    uint64_t prev_epoch;
    size_t n;
} takein;

static int take_one(void *arg, uint64_t seq, const uint8_t *rec, size_t len)
{
    takein *ti = arg;
    uint64_t applied = 0;
    int diverged = 0;
    char err[256];
    int rv = replog_apply_locked(ti->st, ti->table_id, ti->part, seq, ti->prev_epoch, rec, len,
                                 &applied, &diverged, err, sizeof err);
    ti->prev_epoch = buf_get_u64be(rec);
    ti->n += rv == 0;
    return rv;
}

/* Takes in the old primary's records past the new one's log, once.
 * REQUIRES: the new primary's stripe lock (the hooks' caller holds it). */
static int take_in(takeover *to, uint32_t table_id, uint32_t part, char *err, size_t errlen)
{
    if (to->reconciled) {
        return 0;
    }
    uint64_t e = 0, seq = 0;
    int rv = replog_position(to->p->replica, table_id, part, &e, &seq, err, errlen);
    takein ti = {to->p->replica, table_id, part, e, 0};
    if (rv == 0) {
        rv =
            replog_read(to->p->f->st, table_id, part, seq, SIZE_MAX, 0, take_one, &ti, err, errlen);
    }
    to->reconciled = rv == 0;
    to->taken += ti.n;
    return rv;
}

static int takeover_prepare(void *arg, uint32_t table_id, uint32_t part, char *err, size_t errlen)
{
    takeover *to = arg;
    return to->use_prepare ? take_in(to, table_id, part, err, errlen) : 0;
}

static int takeover_begin(void *arg, uint32_t table_id, uint32_t part, uint64_t *epoch,
                          int *took_in, char *err, size_t errlen)
{
    takeover *to = arg;
    const size_t before = to->taken;
    *epoch = 4;
    int rv = take_in(to, table_id, part, err, errlen);
    *took_in = to->taken > before;
    return rv;
}

static int takeover_ship(void *arg, uint32_t table_id, uint32_t part, uint64_t seq,
                         uint64_t prev_epoch, const uint8_t *rec, size_t len, void **ticket,
                         char *err, size_t errlen)
{
    (void)ticket;
    takeover *to = arg;
    uint64_t applied = 0;
    int diverged = 0;
    return replog_apply(to->p->f->st, table_id, part, seq, prev_epoch, rec, len, &applied,
                        &diverged, err, errlen);
}

/* The old primary deletes an item and its record reaches no replica (the
 * write is not acknowledged); a new primary is then made of the replica.
 * Its first write must take that record in before it reads: else the
 * write's outbox record takes the delete's number, and the stream and the
 * GSIs never see the REMOVE (chaos invariants 4 and 5, seen with the
 * oneway-cut fault). With prepare, the write commits after the delete
 * (outbox 1..4); with no prepare, begin takes the record in too late and
 * the write is refused, nothing written, and its retry commits. */
static void takeover_case(int use_prepare)
{
    pair *p = &g_pair;
    fixture *f = p->f;
    table_schema t = replicated();
    t.stream.enabled = 1; /* an outbox */
    int keys[3], n = 0;
    const uint32_t part = part_of(0, t.partitions);
    for (int k = 0; n < 3; k++) {
        if (part_of(k, t.partitions) == part) {
            keys[n++] = k;
        }
    }
    put(f, &t, row(keys[0], "a", 0));
    put(f, &t, row(keys[1], "b", 0));
    char k0s[16];
    snprintf(k0s, sizeof k0s, "%d", keys[0]);
    item *k0 = itm(1, "Pk", ATTR_N, k0s);
    p->fail_ships = 1;
    assert_code(store_delete(f->st, &t, k0, NULL, NULL, f->err, sizeof f->err), LAPSE_EUNAVAILABLE,
                f);
    item_free(k0);
    uint64_t last = 0;
    assert_ok(outbox_last_seq(f->st, t.id, part, &last, f->err, sizeof f->err), f);
    assert_int_equal(last, 3); /* INSERT, INSERT, REMOVE */
    assert_ok(outbox_last_seq(p->replica, t.id, part, &last, f->err, sizeof f->err), f);
    assert_int_equal(last, 2);

    takeover to = {.p = p, .use_prepare = use_prepare};
    store_repl_hook h = {
        .prepare = takeover_prepare, .begin = takeover_begin, .ship = takeover_ship, .arg = &to};
    store_set_repl_hook(p->replica, &h);
    item *c = row(keys[2], "c", 0);
    if (!use_prepare) {
        assert_code(store_put(p->replica, &t, c, NULL, NULL, f->err, sizeof f->err),
                    LAPSE_EUNAVAILABLE, f);
        assert_non_null(strstr(f->err, "took in records"));
        assert_ok(outbox_last_seq(p->replica, t.id, part, &last, f->err, sizeof f->err), f);
        assert_int_equal(last, 3); /* the delete, taken in; nothing of the put */
    }
    assert_ok(store_put(p->replica, &t, c, NULL, NULL, f->err, sizeof f->err), f);
    item_free(c);
    assert_int_equal(to.taken, 1);
    assert_ok(outbox_last_seq(p->replica, t.id, part, &last, f->err, sizeof f->err), f);
    assert_int_equal(last, 4);
    change_list out;
    change_list_init(&out);
    assert_ok(outbox_read(p->replica, t.id, part, 0, 10, 0, &out, f->err, sizeof f->err), f);
    assert_int_equal(out.n, 4);
    change_record r3;
    assert_int_equal(change_decode(out.v[2].data, out.v[2].len, &r3), 0);
    assert_int_equal(r3.event, CHANGE_REMOVE); /* the delete's record kept its number */
    assert_int_equal(r3.seq, 3);
    change_list_fini(&out);
    assert_same(p, &t);
}

static void test_new_primary_takes_in_before_it_reads(void **state)
{
    (void)state;
    takeover_case(1);
}

static void test_records_taken_in_late_refuse_the_write(void **state)
{
    (void)state;
    takeover_case(0);
}

static void test_not_primary_writes_nothing(void **state)
{
    (void)state;
    pair *p = &g_pair;
    fixture *f = p->f;
    table_schema t = replicated();
    p->epoch = 0;
    item *it = row(1, "a", 0);
    assert_code(store_put(f->st, &t, it, NULL, NULL, f->err, sizeof f->err), LAPSE_EWRONGNODE, f);
    item_free(it);
    assert_int_equal(total_items(f->st, &t), 0);
    assert_int_equal(p->ships, 0);
    /* A table of one copy needs no primary epoch and logs nothing. */
    table_schema one = plain;
    put(f, &one, row(1, "a", 0));
    uint64_t e, seq;
    assert_ok(
        replog_position(f->st, one.id, part_of(1, one.partitions), &e, &seq, f->err, sizeof f->err),
        f);
    assert_int_equal(seq, 0);
    assert_int_equal(p->ships, 0);
}

/* The V attribute of item Pk = pk in st ("" when absent). */
static void assert_v(store *st, const table_schema *t, int pk, const char *v)
{
    char k[32], err[256];
    snprintf(k, sizeof k, "%d", pk);
    item *key = itm(1, "Pk", ATTR_N, k);
    item *got = NULL;
    assert_int_equal(store_get(st, t, key, &got, err, sizeof err), 0);
    if (v[0] == '\0') {
        assert_null(got);
    } else {
        assert_non_null(got);
        assert_attr(got, "V", ATTR_S, v);
    }
    item_free(got);
    item_free(key);
}

/* Retried writes (request.h): an attempt of a call that was done answers
 * done and changes nothing, whatever its condition now says, on the
 * primary and on the replica that a failover would promote (the record
 * came with the write); an update's retry answers the item the call made;
 * a retry of a write whose ship failed returns once the replica has it. */
static void test_retried_write_takes_effect_once(void **state)
{
    (void)state;
    pair *p = &g_pair;
    fixture *f = p->f;
    table_schema t = replicated();
    t.partitions = 1;
    const uint8_t ra[REQUEST_ID_BYTES] = {1}, rb[REQUEST_ID_BYTES] = {2},
                  ru[REQUEST_ID_BYTES] = {3}, rd[REQUEST_ID_BYTES] = {4},
                  re[REQUEST_ID_BYTES] = {5};
    store_cond absent = {.kind = STORE_COND_NOT_EXISTS, .attr = "Pk"};
    store_cond exists = {.kind = STORE_COND_EXISTS, .attr = "Pk"};
    item *a = row(1, "a", 0);
    assert_ok(store_put_once(f->st, &t, a, &absent, ra, f->err, sizeof f->err), f);
    put(f, &t, row(1, "b", 0)); /* someone else's write comes between */
    assert_ok(store_put_once(f->st, &t, a, &absent, ra, f->err, sizeof f->err), f);
    assert_code(store_put_once(f->st, &t, a, &absent, rb, f->err, sizeof f->err), LAPSE_ECONDITION,
                f); /* another call: its condition counts */
    assert_v(f->st, &t, 1, "b");
    /* The replica, promoted, knows the call too. */
    assert_ok(store_put_once(p->replica, &t, a, &absent, ra, f->err, sizeof f->err), f);
    assert_v(p->replica, &t, 1, "b");
    item_free(a);

    item *k = itm(1, "Pk", ATTR_N, "1");
    attr_value nv = val(ATTR_S, "u1");
    store_update_action act = {.name = "V", .value = &nv};
    item *out = NULL;
    assert_ok(store_update_once(f->st, &t, k, &act, 1, &exists, ru, &out, f->err, sizeof f->err),
              f);
    item_free(out);
    put(f, &t, row(1, "c", 0));
    out = NULL;
    assert_ok(store_update_once(f->st, &t, k, &act, 1, &exists, ru, &out, f->err, sizeof f->err),
              f);
    assert_non_null(out);
    assert_attr(out, "V", ATTR_S, "u1"); /* the call's answer, not a new update */
    item_free(out);
    assert_v(f->st, &t, 1, "c");
    item_value_fini(&nv);

    assert_ok(store_delete_once(f->st, &t, k, &exists, rd, f->err, sizeof f->err), f);
    assert_ok(store_delete_once(f->st, &t, k, &exists, rd, f->err, sizeof f->err), f);
    assert_code(store_delete_once(f->st, &t, k, &exists, ra, f->err, sizeof f->err), LAPSE_EINVAL,
                f); /* ra was a put's */
    item_free(k);
    assert_v(f->st, &t, 1, "");

    /* The first attempt's ship fails: written here only. Its retry does
     * not write again but returns once the replica has the first. */
    p->fail_ships = 1;
    item *e = row(2, "e", 0);
    assert_code(store_put_once(f->st, &t, e, &absent, re, f->err, sizeof f->err),
                LAPSE_EUNAVAILABLE, f);
    assert_v(p->replica, &t, 2, "");
    assert_ok(store_put_once(f->st, &t, e, &absent, re, f->err, sizeof f->err), f);
    item_free(e);
    assert_v(p->replica, &t, 2, "e");
    assert_same(p, &t);
}

/* A retried batch write applies each of its writes once (request.h), per
 * partition, however the retry groups them: a retry does not overwrite a
 * write made since, a retry with writes the first attempt lacked applies
 * just those, the replica a failover would promote knows the call, and a
 * retry of a batch whose ship failed returns once the replica has it. */
static void test_retried_batch_write_takes_effect_once(void **state)
{
    (void)state;
    pair *p = &g_pair;
    fixture *f = p->f;
    table_schema t = replicated();
    t.partitions = 2;
    const uint8_t rb[REQUEST_ID_BYTES] = {7}, rp[REQUEST_ID_BYTES] = {8},
                  rf[REQUEST_ID_BYTES] = {9};
    item *a = row(1, "a", 0), *b = row(2, "b", 0), *c = row(3, "c", 0), *d = row(4, "d", 0);
    store_write first[] = {{.put = a}, {.put = b}};
    assert_ok(store_batch_write_once(f->st, &t, first, 2, rb, f->err, sizeof f->err), f);
    put(f, &t, row(1, "x", 0)); /* someone else's write comes between */
    assert_ok(store_batch_write_once(f->st, &t, first, 2, rb, f->err, sizeof f->err), f);
    assert_v(f->st, &t, 1, "x");
    assert_v(f->st, &t, 2, "b");
    /* Regrouped: b again (applied) with c (never sent before). */
    put(f, &t, row(2, "y", 0));
    store_write second[] = {{.put = b}, {.put = c}};
    assert_ok(store_batch_write_once(f->st, &t, second, 2, rb, f->err, sizeof f->err), f);
    assert_v(f->st, &t, 2, "y");
    assert_v(f->st, &t, 3, "c");
    /* Without the id, every attempt applies (the old behaviour). */
    assert_ok(store_batch_write(f->st, &t, first, 1, f->err, sizeof f->err), f);
    assert_v(f->st, &t, 1, "a");
    put(f, &t, row(1, "x", 0));
    /* The replica, promoted, knows the call too. */
    assert_ok(store_batch_write_once(p->replica, &t, first, 2, rb, f->err, sizeof f->err), f);
    assert_v(p->replica, &t, 1, "x");
    assert_v(p->replica, &t, 2, "y");
    /* An id is for one kind of write (records are per partition: the
     * same item's). */
    assert_ok(store_put_once(f->st, &t, d, NULL, rp, f->err, sizeof f->err), f);
    store_write fourth[] = {{.put = d}};
    assert_code(store_batch_write_once(f->st, &t, fourth, 1, rp, f->err, sizeof f->err),
                LAPSE_EINVAL, f);
    assert_code(store_put_once(f->st, &t, a, NULL, rb, f->err, sizeof f->err), LAPSE_EINVAL, f);
    assert_v(f->st, &t, 1, "x");
    /* The first attempt's ship fails: written here only. Its retry writes
     * nothing again but returns once the replica has the first. */
    item *e = row(5, "e", 0);
    store_write third[] = {{.put = e}};
    p->fail_ships = 1;
    assert_code(store_batch_write_once(f->st, &t, third, 1, rf, f->err, sizeof f->err),
                LAPSE_EUNAVAILABLE, f);
    assert_v(p->replica, &t, 5, "");
    assert_ok(store_batch_write_once(f->st, &t, third, 1, rf, f->err, sizeof f->err), f);
    assert_v(p->replica, &t, 5, "e");
    item_free(a);
    item_free(b);
    item_free(c);
    item_free(d);
    item_free(e);
    assert_same(p, &t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_write_kind_reaches_the_replica, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_retried_batch_write_takes_effect_once, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_replica_refuses_gaps_old_epochs_and_garbage,
                                        pair_setup, pair_teardown),
        cmocka_unit_test_setup_teardown(test_failed_ship_then_catch_up, pair_setup, pair_teardown),
        cmocka_unit_test_setup_teardown(test_runs_of_several_partitions_share_a_batch, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_log_is_trimmed_on_both_copies, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_rebuilds_a_copy, pair_setup, pair_teardown),
        cmocka_unit_test_setup_teardown(test_retried_write_takes_effect_once, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_not_primary_writes_nothing, pair_setup, pair_teardown),
        cmocka_unit_test_setup_teardown(test_new_primary_takes_in_before_it_reads, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_records_taken_in_late_refuse_the_write, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_commits_wait_for_replicas_unlocked, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_diverged_copy_is_reset_and_rebuilt, pair_setup,
                                        pair_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
