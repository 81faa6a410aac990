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
#include "replog_testutil.h"

#include "../common/clock.h"
#include "expiry.h"
#include "request.h"
#include "snapshot.h"

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
    assert_ok(replog_read(f->st, t.id, part, 0, 1, 0, log_take, &gr, f->err, sizeof f->err), f);
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
    assert_ok(replog_read(f->st, t.id, 0, 0, 1, 0, log_take, &gr, f->err, sizeof f->err), f);
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
    assert_ok(replog_read(f->st, t.id, 0, 39, 1, 0, log_take, &gr, f->err, sizeof f->err), f);
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

/* A call's entries go in in writes of at most SNAPSHOT_WRITE_BYTES: a
 * call of 24 entries of 64 KiB (six writes) installs every one, key for
 * key; a call whose last entry is another partition's writes none of the
 * ones before it. */
static void test_big_snapshot_call_is_written_in_parts(void **state)
{
    (void)state;
    pair *p = &g_pair;
    fixture *f = p->f;
    table_schema t = replicated();
    t.partitions = 2;
    put(f, &t, row(1, "a", 0));
    const uint32_t part = part_of(1, t.partitions);
    entries *one = calloc(1, sizeof(*one)), *got = calloc(1, sizeof(*got));
    uint64_t se = 0, sseq = 0;
    read_snapshot(f, f->st, t.id, part, 1 << 20, NULL, one, &se, &sseq);
    assert_true(one->n >= 1);
    enum { N = 24, VBYTES = 64 * 1024 };
    static uint8_t keys[N][512], val[VBYTES];
    memset(val, 'v', sizeof(val));
    snapshot_entry e[N + 1];
    const snapshot_entry base = entry_at(one, 0); /* an item: its key, with a suffix, is too */
    assert_true(base.klen + 1 <= sizeof(keys[0]));
    for (int i = 0; i < N; i++) {
        memcpy(keys[i], base.key, base.klen);
        keys[i][base.klen] = (uint8_t)i; /* in key order */
        e[i] = (snapshot_entry){base.family, keys[i], base.klen + 1, val, sizeof(val)};
    }
    assert_true((size_t)N * VBYTES > 4 * SNAPSHOT_WRITE_BYTES);
    char dir[512];
    store *fresh = NULL;
    assert_int_equal(testdir_make(dir, sizeof dir, "replog_parts"), 0);
    assert_ok(store_open(&fresh, dir, f->err, sizeof f->err), f);
    /* Refused whole: the last entry is not a key of the partition. */
    e[N] = e[0];
    e[N].family = 6; /* the GSI family */
    assert_code(snapshot_install(fresh, t.id, part, e, N + 1, f->err, sizeof f->err), LAPSE_EINVAL,
                f);
    read_snapshot(f, fresh, t.id, part, 1 << 20, NULL, got, &se, &sseq);
    assert_int_equal(got->n, 0);
    /* Taken whole, over several writes. */
    assert_ok(snapshot_install(fresh, t.id, part, e, N, f->err, sizeof f->err), f);
    read_snapshot(f, fresh, t.id, part, 1 << 24, NULL, got, &se, &sseq);
    assert_int_equal(got->n, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(got->k[i].len, e[i].klen);
        assert_memory_equal(got->k[i].data, e[i].key, e[i].klen);
        assert_int_equal(got->v[i].len, VBYTES);
        assert_memory_equal(got->v[i].data, val, VBYTES);
    }
    entries_fini(one);
    entries_fini(got);
    free(one);
    free(got);
    store_close(fresh);
    testdir_remove(dir);
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
        cmocka_unit_test_setup_teardown(test_log_is_trimmed_on_both_copies, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_rebuilds_a_copy, pair_setup, pair_teardown),
        cmocka_unit_test_setup_teardown(test_big_snapshot_call_is_written_in_parts, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_retried_write_takes_effect_once, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_not_primary_writes_nothing, pair_setup, pair_teardown),
        cmocka_unit_test_setup_teardown(test_diverged_copy_is_reset_and_rebuilt, pair_setup,
                                        pair_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
