/*
 * replog_commit_test: how a replicated commit meets its replicas, on the
 * primary/replica pair of replog_testutil.h:
 *  - every commit (write, batch, TTL sweep, backfill step) waits for its
 *    replicas with its partition's stripe lock released;
 *  - a follower applies the records of several partitions in one batch, each
 *    partition's run checked on its own, a malformed record adding nothing;
 *  - a new primary takes in its replicas' extra records before a write reads
 *    (prepare), or, taking them in at commit, refuses the write: a write
 *    never takes the outbox number of a record taken in.
 */
#include "replog_testutil.h"

#include <pthread.h>

#include "../common/change.h"
#include "../common/clock.h"
#include "expiry.h"
#include "outbox.h"
#include "store_int.h"

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
static int hook_wait(void *arg, void *const *tickets, size_t n, int *rvs, char *err, size_t errlen)
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
        if (rvs != NULL) {
            rvs[i] = rv;
        }
        free(q);
    }
    return rv;
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
    assert_ok(replog_read(f->st, t.id, pa, 0, 8, 0, log_take_all, &ga, f->err, sizeof f->err), f);
    assert_ok(replog_read(f->st, t.id, pb, 0, 8, 0, log_take_all, &gb, f->err, sizeof f->err), f);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_runs_of_several_partitions_share_a_batch, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_new_primary_takes_in_before_it_reads, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_records_taken_in_late_refuse_the_write, pair_setup,
                                        pair_teardown),
        cmocka_unit_test_setup_teardown(test_commits_wait_for_replicas_unlocked, pair_setup,
                                        pair_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
