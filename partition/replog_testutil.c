/* replog_testutil.c: the primary/replica pair of replog_test and
 * replog_commit_test (replog_testutil.h). */
#include "replog_testutil.h"

#include "../common/clock.h"
#include "expiry.h"
#include "outbox.h"

pair g_pair;

int hook_begin(void *arg, uint32_t table_id, uint32_t part, uint64_t *epoch, int *took_in,
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

int resend_one(void *arg, uint64_t seq, const uint8_t *rec, size_t len)
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
int resend_from(pair *p, uint32_t table_id, uint32_t part, uint64_t applied, char *err,
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
int hook_ship(void *arg, uint32_t table_id, uint32_t part, uint64_t seq, uint64_t prev_epoch,
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

int pair_setup(void **state)
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

int pair_teardown(void **state)
{
    store_close(g_pair.replica);
    testdir_remove(g_pair.rdir);
    return teardown(state);
}

table_schema replicated(void)
{
    table_schema t = plain;
    t.replication = 3;
    t.ttl.enabled = 1;
    snprintf(t.ttl.attribute, sizeof(t.ttl.attribute), "Exp");
    return t;
}

/* Both stores hold the same items and log position in every partition. */
void assert_same(pair *p, const table_schema *t)
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

uint64_t total_items(store *st, const table_schema *t)
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

item *row(int pk, const char *v, int64_t exp_s)
{
    char k[32], e[32];
    snprintf(k, sizeof k, "%d", pk);
    snprintf(e, sizeof e, "%lld", (long long)exp_s);
    return exp_s > 0 ? itm(3, "Pk", ATTR_N, k, "V", ATTR_S, v, "Exp", ATTR_N, e)
                     : itm(2, "Pk", ATTR_N, k, "V", ATTR_S, v);
}

/* One TTL sweep of every partition of t; returns the items it deleted. */
size_t sweep_all(fixture *f, const table_schema *t)
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

/* The partition of item Pk = n. */
uint32_t part_of(int n, uint32_t partitions)
{
    char k[32];
    snprintf(k, sizeof k, "%d", n);
    attr_value v = val(ATTR_N, k);
    uint32_t part = 0;
    assert_int_equal(hash_partition(&v, partitions, &part), 0);
    item_value_fini(&v);
    return part;
}

int log_take(void *arg, uint64_t s, const uint8_t *rec, size_t len)
{
    (void)s;
    grab *gr = arg;
    assert_true(len <= sizeof(gr->rec));
    memcpy(gr->rec, rec, len);
    gr->len = len;
    return 0;
}

int log_take_all(void *arg, uint64_t s, const uint8_t *rec, size_t len)
{
    grabs *gs = arg;
    assert_true(gs->n < 8);
    log_take(&gs->g[gs->n++], s, rec, len);
    return 0;
}

/* Puts Pk = pk on the primary only (every ship fails): its record is in
 * the primary's log for the test to hand to the replica. */
void put_primary_only(pair *p, const table_schema *t, int pk)
{
    item *it = row(pk, "solo", clock_wall_now().ms / 1000 + 3600); /* item and expiry entry */
    p->fail_ships = 1;
    assert_code(store_put(p->f->st, t, it, NULL, NULL, p->f->err, sizeof p->f->err),
                LAPSE_EUNAVAILABLE, p->f);
    item_free(it);
}
