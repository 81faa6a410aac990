/*
 * store_batch.c: store_batch_write (see store.h): up to STORE_BATCH_MAX puts
 * and deletes of one table, validated and encoded first, then grouped by
 * partition; each partition's group is one WriteBatch under that
 * partition's stripe lock, carrying the writes the group's item changes
 * derive (expiry index, LSI entries, outbox records: store_derived.c).
 */
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "itemkey.h"
#include "request.h"
#include "store_int.h"
#include "../common/ttl.h"

static int oom(char *err, size_t errlen)
{
    return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
}

/* One validated write: its key and (for puts) value live in shared bufs. */
typedef struct batch_entry {
    uint32_t part;
    uint32_t idx; /* position in the request: later writes to a key win */
    size_t koff, klen;
    size_t voff, vlen;  /* vlen == SIZE_MAX: a delete */
    const uint8_t *key; /* keys.data + koff, set once keys stops growing */
    uint64_t digest;    /* request_write_digest, with a request id */
} batch_entry;

/* By partition, then key, then position: a partition's group is contiguous
 * and so are the writes to one key, in request order. */
static int entry_cmp(const void *a, const void *b)
{
    const batch_entry *x = a, *y = b;
    if (x->part != y->part) {
        return x->part < y->part ? -1 : 1;
    }
    int c = itemkey_cmp(x->key, x->klen, y->key, y->klen);
    if (c != 0) {
        return c;
    }
    return x->idx < y->idx ? -1 : (x->idx > y->idx ? 1 : 0);
}

static int same_key(const batch_entry *x, const batch_entry *y)
{
    return x->klen == y->klen && memcmp(x->key, y->key, x->klen) == 0;
}

/* Scratch for the derived writes of one partition group: the distinct keys'
 * current values, read with one MultiGet. */
typedef struct group_scratch {
    const void **kp;
    size_t *kl;
    buf *vals;
    int *found;
    size_t cap;
    buf ekey;
} group_scratch;

/* Sizes g for groups of up to n writes. 0 or LAPSE_ENOMEM (g is then
 * still for group_scratch_fini). */
static int group_scratch_alloc(group_scratch *g, size_t n)
{
    g->kp = calloc(n, sizeof(*g->kp));
    g->kl = calloc(n, sizeof(*g->kl));
    g->vals = calloc(n, sizeof(*g->vals));
    g->found = calloc(n, sizeof(*g->found));
    if (g->kp == NULL || g->kl == NULL || g->vals == NULL || g->found == NULL) {
        return LAPSE_ENOMEM;
    }
    for (; g->cap < n; g->cap++) {
        buf_init(&g->vals[g->cap]);
    }
    return 0;
}

/* Frees what g holds; accepts a zeroed or half-allocated g. */
static void group_scratch_fini(group_scratch *g)
{
    for (size_t i = 0; i < g->cap; i++) {
        buf_fini(&g->vals[i]);
    }
    free(g->kp);
    free(g->kl);
    free(g->vals);
    free(g->found);
    buf_fini(&g->ekey);
}

/* Adds to b the derived writes of the writes e[0..n) (one partition,
 * sorted by entry_cmp): for each distinct key, from its stored item to its
 * last write (the earlier writes to a key never become visible): the expiry
 * index change when the table's TTL is on, and through d (NULL: none) the
 * LSI changes and one outbox record. Reads the stored items with one
 * MultiGet. REQUIRES: the partition's stripe lock is held. */
static int group_derive(store *st, const table_schema *t, const store_write *writes,
                        const buf *vals, const batch_entry *e, size_t n, clock_wall now,
                        group_scratch *g, store_derived *d, db_batch *b, int64_t *min_due_ms,
                        char *err, size_t errlen)
{
    int rv;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || !same_key(&e[i - 1], &e[i])) {
            g->kp[m] = e[i].key;
            g->kl[m] = e[i].klen;
            m++;
        }
    }
    if ((rv = db_multi_get(st->db, CF_ITEMS, m, g->kp, g->kl, g->vals, g->found, err, errlen)) !=
        0) {
        return rv;
    }
    size_t r = 0;
    for (size_t i = 0; i < n; r++) {
        size_t j = i + 1;
        while (j < n && same_key(&e[i], &e[j])) {
            j++;
        }
        expiry_entry o = {0, 0};
        if (t->ttl.enabled && g->found[r]) {
            /* Only the stored item's entry is needed: read its TTL value in
             * place (ttl_eval_encoded) instead of decoding it. A value that
             * does not decode: its entry cannot be named (see
             * read_for_write); the sweep removes the leftover as stale. */
            ttl_verdict v = TTL_MISSING;
            int64_t due_ms = 0;
            rv = ttl_eval_encoded(&t->ttl, g->vals[r].data, g->vals[r].len, now, &v, &due_ms);
            if (rv == LAPSE_ENOMEM) {
                return oom(err, errlen);
            }
            if (rv == 0 && v == TTL_ELIGIBLE) {
                o.has = 1;
                o.due_s = due_ms / 1000; /* as store_derived_expiry_due_s */
            }
        }
        const batch_entry *last = &e[j - 1];
        const int del = last->vlen == SIZE_MAX;
        if (t->ttl.enabled) {
            /* a delete (put NULL): no entry */
            expiry_entry nw = store_derived_expiry_entry(t, writes[last->idx].put, now);
            if (store_derived_expiry_change(st, b, e[i].key, e[i].klen, o, nw, &g->ekey,
                                            min_due_ms) != 0) {
                return oom(err, errlen);
            }
        }
        if (d != NULL && (rv = store_derived_change(
                              d, b, e[i].key, e[i].klen, g->found[r] ? g->vals[r].data : NULL,
                              g->vals[r].len, del ? NULL : vals->data + last->voff,
                              del ? 0 : last->vlen, STORE_SAME_UNKNOWN, NULL, err, errlen)) != 0) {
            return rv;
        }
        i = j;
    }
    return 0;
}

/* The request record of one partition group (request.h), with rid. */
typedef struct group_once {
    const uint8_t *rid; /* NULL: none, every write applies */
    buf key, val, scratch, digests;
    int found;
    request_outcome seen;
} group_once;

/* With a request id, reads the group e[0..n)'s record and moves the writes
 * an earlier attempt applied (their digests are in it) to the end of the
 * group, keeping the order of the rest; *apply receives how many are left
 * at the front. g->digests receives the record's digests and those of the
 * writes to apply. REQUIRES: the partition's stripe lock. */
static int group_once_check(store *st, const table_schema *t, uint32_t part, group_once *g,
                            batch_entry *e, size_t n, size_t *apply, char *err, size_t errlen)
{
    *apply = n;
    if (g->rid == NULL) {
        return 0;
    }
    int rv = store_request_find(st, t, part, g->rid, REQUEST_BATCH, &g->key, &g->val, &g->found,
                                &g->seen, err, errlen);
    if (rv != 0) {
        return rv;
    }
    buf_clear(&g->digests);
    if (g->found && buf_append(&g->digests, g->seen.item, g->seen.item_len) != 0) {
        return oom(err, errlen);
    }
    /* A stable partition: entries to apply keep their order at the front. */
    size_t m = 0;
    for (size_t x = 0; x < n; x++) {
        if (g->found && request_batch_has(&g->seen, e[x].digest)) {
            continue;
        }
        if (buf_append_u64be(&g->digests, e[x].digest) != 0) {
            return oom(err, errlen);
        }
        batch_entry keep = e[x];
        memmove(&e[m + 1], &e[m], (x - m) * sizeof(*e));
        e[m++] = keep;
    }
    *apply = m;
    return 0;
}

/*
 * The batch's first phase, encode: validates writes[0..n) and encodes each
 * key into keys and each put's item into vals, filling e[0..n) (with the
 * digests of a call with request id rid), then sorts e by entry_cmp so each
 * partition's group is contiguous. Nothing is written. 0, or an error with
 * err naming the write.
 */
static int encode_writes(const table_schema *t, const store_write *writes, size_t n,
                         const uint8_t *rid, batch_entry *e, buf *keys, buf *vals, char *err,
                         size_t errlen)
{
    int rv = 0;
    buf k;
    buf_init(&k);
    for (size_t i = 0; i < n; i++) {
        const store_write *w = &writes[i];
        const item *it = w->put != NULL ? w->put : w->delete_key;
        if ((w->put == NULL) == (w->delete_key == NULL)) {
            rv = errf(LAPSE_EINVAL, err, errlen, "write %zu must be exactly one put or delete", i);
            goto out;
        }
        char why[256];
        if ((rv = schema_check_item(t, it, w->put == NULL, why, sizeof(why))) != 0) {
            errf(rv, err, errlen, "write %zu: %s", i, why);
            goto out;
        }
        if ((rv = itemkey_of_item(&k, t, it, &e[i].part)) != 0 ||
            (rv = buf_append(keys, k.data, k.len)) != 0) {
            errf(rv, err, errlen, "write %zu: cannot encode the key (%s)", i, lapse_strerror(rv));
            goto out;
        }
        e[i].idx = (uint32_t)i;
        e[i].koff = keys->len - k.len;
        e[i].klen = k.len;
        e[i].vlen = SIZE_MAX;
        if (w->put != NULL) {
            e[i].voff = vals->len;
            if ((rv = item_encode(w->put, vals)) != 0) {
                errf(rv, err, errlen, "write %zu: cannot encode the item", i);
                goto out;
            }
            e[i].vlen = vals->len - e[i].voff;
        }
    }
    for (size_t i = 0; i < n; i++) {
        e[i].key = keys->data + e[i].koff;
        if (rid != NULL) {
            e[i].digest = request_write_digest(
                e[i].key, e[i].klen, e[i].vlen == SIZE_MAX ? NULL : vals->data + e[i].voff,
                e[i].vlen == SIZE_MAX ? 0 : e[i].vlen);
        }
    }
    qsort(e, n, sizeof(*e), entry_cmp);
out:
    buf_fini(&k);
    return rv;
}

/*
 * The batch's second phase, once per partition: commits the group e[0..n)
 * of one partition (sorted by entry_cmp) in one WriteBatch under that
 * partition's stripe lock: the writes an earlier attempt did not apply
 * (group_once_check), the group's request record, and their derived
 * writes (group_derive), through store_commit. A group an earlier attempt
 * applied whole only confirms its record (store_request_confirm). Sets
 * *pended when *pend is to be finished (store_commit_finish_many, with no
 * lock held). 0, or an error with err: the group wrote nothing, or wrote
 * here while its replicas may lack it; earlier groups stay applied.
 */
static int commit_group(store *st, const table_schema *t, const store_write *writes,
                        const buf *vals, batch_entry *e, size_t n, clock_wall now, group_once *once,
                        group_scratch *g, db_batch *b, store_pending *pend, int *pended, char *err,
                        size_t errlen)
{
    const int ttl = t->ttl.enabled, derive = store_derived_wanted(t);
    const uint32_t part = e[0].part;
    int64_t min_due_ms = STORE_NO_DUE;
    size_t m = 0;
    int written = 0;
    store_derived d;
    memset(&d, 0, sizeof(d));
    *pended = 0;
    pthread_mutex_t *mu = store_stripe(st, t->id, part);
    pthread_mutex_lock(mu);
    int rv = store_repl_prepare(st, t, part, err, errlen);
    if (rv != 0) {
        pthread_mutex_unlock(mu);
        return rv;
    }
    rv = group_once_check(st, t, part, once, e, n, &m, err, errlen);
    if (rv == 0 && m == 0) {
        /* Every write of the group was applied by an earlier attempt:
         * this call returns once those are on every in-sync replica. */
        rv = store_request_confirm(st, t, part, &once->key, &once->val, pend, err, errlen);
        *pended = rv == 0;
        pthread_mutex_unlock(mu);
        return rv;
    }
    db_batch_clear(b);
    store_commit_prepare(st, b, t);
    for (size_t x = 0; rv == 0 && x < m; x++) {
        if (e[x].vlen == SIZE_MAX) {
            db_batch_delete(b, st->db, CF_ITEMS, e[x].key, e[x].klen);
        } else {
            db_batch_put(b, st->db, CF_ITEMS, e[x].key, e[x].klen, vals->data + e[x].voff,
                         e[x].vlen);
        }
    }
    if (rv == 0 && once->rid != NULL &&
        request_remember(b, st->db, CF_REQUESTS, &once->key, REQUEST_BATCH, once->digests.data,
                         once->digests.len, &once->scratch) != 0) {
        rv = oom(err, errlen);
    }
    if (rv == 0 && derive) {
        store_derived_begin(&d, st, t, part);
    }
    if (rv == 0 && (ttl || derive)) {
        rv = group_derive(st, t, writes, vals, e, m, now, g, derive ? &d : NULL, b, &min_due_ms,
                          err, errlen);
    }
    if (rv == 0) {
        rv = store_commit(st, b, t, part, derive ? &d : NULL, &written, pend, err, errlen);
        *pended = rv == 0;
    }
    for (size_t x = 0; written && ttl && x < m; x++) {
        if (keyset_remove(&st->undeletable, e[x].key, e[x].klen)) {
            store_sweep_cursor_note(st, t->id, part, NULL, 0);
        }
    }
    pthread_mutex_unlock(mu);
    store_derived_end(&d);
    if (rv == 0 || written) {
        store_derived_notify(st, t->id, part, min_due_ms);
    }
    return rv;
}

/*
 * A batch in three phases: encode and validate every write before anything
 * is applied (encode_writes), commit each partition's group under its own
 * lock (commit_group), then wait for the groups' replicas together
 * (store_commit_finish_many).
 */
static int batch_write(store *st, const table_schema *t, const store_write *writes, size_t n,
                       const uint8_t *rid, char *err, size_t errlen)
{
    int rv = 0;
    batch_entry *e = NULL;
    db_batch *b = NULL;
    store_pending *pends = NULL; /* one per partition group committed here */
    size_t npend = 0;
    group_scratch g;
    memset(&g, 0, sizeof(g));
    buf_init(&g.ekey);
    buf keys, vals;
    buf_init(&keys);
    buf_init(&vals);
    group_once once = {.rid = rid};
    buf_init(&once.key);
    buf_init(&once.val);
    buf_init(&once.scratch);
    buf_init(&once.digests);
    if (n == 0) {
        goto out;
    }
    if (n > STORE_BATCH_MAX) {
        return errf(LAPSE_ETOOBIG, err, errlen, "a batch holds at most %d writes, got %zu",
                    STORE_BATCH_MAX, n);
    }
    if ((e = calloc(n, sizeof(*e))) == NULL || (b = db_batch_new()) == NULL ||
        (pends = calloc(n, sizeof(*pends))) == NULL) {
        rv = oom(err, errlen);
        goto out;
    }
    const int ttl = t->ttl.enabled;
    if ((ttl || store_derived_wanted(t)) && group_scratch_alloc(&g, n) != 0) {
        rv = oom(err, errlen);
        goto out;
    }
    if ((rv = encode_writes(t, writes, n, rid, e, &keys, &vals, err, errlen)) != 0) {
        goto out;
    }
    const clock_wall now = ttl ? clock_wall_now() : (clock_wall){0};
    /* One WriteBatch per partition, under that partition's lock. Only one
     * lock is held at a time, so batches cannot deadlock each other. The
     * groups' records go to their replicas together once all are
     * committed here (store_commit_finish_many at out). */
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && e[j].part == e[i].part) {
            j++;
        }
        int pended = 0;
        rv = commit_group(st, t, writes, &vals, e + i, j - i, now, &once, &g, b, &pends[npend],
                          &pended, err, errlen);
        npend += pended;
        if (rv != 0) {
            goto out; /* earlier partitions' groups stay applied */
        }
        i = j;
    }
out:
    if (npend > 0) {
        char why[256] = "";
        int frv = store_commit_finish_many(st, pends, npend, NULL, why, sizeof(why));
        if (rv == 0 && frv != 0) {
            rv = errf(frv, err, errlen, "%s", why);
        }
    }
    free(pends);
    group_scratch_fini(&g);
    db_batch_free(b);
    free(e);
    buf_fini(&keys);
    buf_fini(&vals);
    buf_fini(&once.key);
    buf_fini(&once.val);
    buf_fini(&once.scratch);
    buf_fini(&once.digests);
    return rv;
}

int store_batch_write(store *st, const table_schema *t, const store_write *writes, size_t n,
                      char *err, size_t errlen)
{
    return batch_write(st, t, writes, n, NULL, err, errlen);
}

int store_batch_write_once(store *st, const table_schema *t, const store_write *writes, size_t n,
                           const uint8_t *rid, char *err, size_t errlen)
{
    return batch_write(st, t, writes, n, rid, err, errlen);
}
