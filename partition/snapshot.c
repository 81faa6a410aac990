/*
 * snapshot.c: a consistent copy of one replicated partition (snapshot.h).
 */
#include "snapshot.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "itemkey.h"
#include "replog.h"
#include "store_int.h"

/* The key ranges of a partition's copy, in the order a snapshot hands
 * them out. */
enum { RANGE_COUNT = 8 };

typedef struct range {
    int cf;
    buf lo, hi;
    int unbounded; /* hi is past every key */
} range;

struct snapshot {
    store *st;
    db_snapshot *snap;
    range r[RANGE_COUNT];
    size_t nranges; /* r[0..nranges) are handed out */
    size_t cur;     /* the range being read */
    db_iter *it;    /* on r[cur], positioned at the next entry; NULL: not opened */
    uint64_t entries, bytes;
};

static void ranges_fini(range *r)
{
    for (size_t i = 0; i < RANGE_COUNT; i++) {
        buf_fini(&r[i].lo);
        buf_fini(&r[i].hi);
    }
}

/* Sets r[i] to every key of family cf starting with p[0..plen). */
static int prefix_range(range *r, int cf, const uint8_t *p, size_t plen)
{
    r->cf = cf;
    if (buf_append(&r->lo, p, plen) != 0 || buf_append(&r->hi, p, plen) != 0) {
        return LAPSE_ENOMEM;
    }
    r->unbounded = itemkey_successor(&r->hi);
    return 0;
}

/* The ranges of partition part of table_id (r[] initialized by the call):
 * what replog_reset drops, less the log and its position. */
static int ranges_of(range *r, uint32_t table_id, uint32_t part)
{
    static const int part_cfs[] = {CF_ITEMS, CF_EXPIRY, CF_LSI, CF_OUTBOX, CF_REQUESTS};
    static const uint8_t kinds[] = {REPL_SOURCE, REPL_ACK};
    for (size_t i = 0; i < RANGE_COUNT; i++) {
        buf_init(&r[i].lo);
        buf_init(&r[i].hi);
    }
    buf pre;
    buf_init(&pre);
    int rv = itemkey_append_prefix(&pre, table_id, part);
    size_t n = 0;
    for (size_t i = 0; rv == 0 && i < sizeof(part_cfs) / sizeof(part_cfs[0]); i++) {
        rv = prefix_range(&r[n++], part_cfs[i], pre.data, pre.len);
    }
    for (size_t i = 0; rv == 0 && i < sizeof(kinds); i++) {
        uint8_t k[ITEMKEY_REPL_MAX];
        size_t klen = itemkey_repl(k, table_id, kinds[i], part, 0, 0);
        rv = prefix_range(&r[n++], CF_REPL, k, klen);
    }
    /* The backfill progress: exactly one key ("backfill/1/1" is a prefix
     * of partition 10's), so [key, key "\0"). */
    if (rv == 0 && (rv = expiry_progress_key(&r[n].lo, table_id, part)) == 0) {
        r[n].cf = CF_META;
        rv =
            buf_append(&r[n].hi, r[n].lo.data, r[n].lo.len) != 0 || buf_append(&r[n].hi, "", 1) != 0
                ? LAPSE_ENOMEM
                : 0;
        n++;
    }
    buf_fini(&pre);
    return rv != 0 ? LAPSE_ENOMEM : 0;
}

/* Copies the value of repl key (table_id, kind, part) in the snapshot into
 * *v (cleared; left empty when the key is absent). */
static int repl_at(snapshot *s, uint32_t table_id, uint8_t kind, uint32_t part, buf *v, char *err,
                   size_t errlen)
{
    uint8_t k[ITEMKEY_REPL_MAX + 1];
    size_t klen = itemkey_repl(k, table_id, kind, part, 0, 0);
    k[klen] = 0;
    db_iter *it = NULL;
    buf_clear(v);
    int rv = db_iter_new_at(&it, s->st->db, s->snap, CF_REPL, k, klen, k, klen + 1);
    if (rv != 0) {
        return errf(rv, err, errlen, "cannot read the partition's counters");
    }
    db_iter_seek_first(it);
    if (db_iter_valid(it)) {
        size_t vlen = 0;
        const uint8_t *val = db_iter_value(it, &vlen);
        if (buf_append(v, val, vlen) != 0) {
            rv = errf(LAPSE_ENOMEM, err, errlen, "out of memory");
        }
    }
    if (rv == 0) {
        rv = db_iter_status(it, err, errlen);
    }
    db_iter_free(it);
    return rv;
}

/* Opens the view: s->r from ranges_of, the first nranges handed out, and
 * the snapshot itself. On error *out is NULL. */
static int open_view(snapshot **out, store *st, uint32_t table_id, uint32_t part, size_t nranges,
                     char *err, size_t errlen)
{
    snapshot *s = calloc(1, sizeof(*s));
    *out = NULL;
    if (s == NULL) {
        return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
    }
    s->st = st;
    s->nranges = nranges;
    int rv = ranges_of(s->r, table_id, part);
    if (rv == 0 && (s->snap = db_snapshot_new(st->db)) == NULL) {
        rv = LAPSE_ENOMEM;
    }
    if (rv != 0) {
        snapshot_close(s);
        return errf(rv, err, errlen, "out of memory");
    }
    *out = s;
    return 0;
}

int snapshot_open(snapshot **out, store *st, uint32_t table_id, uint32_t part, uint64_t *epoch,
                  uint64_t *seq, char *err, size_t errlen)
{
    snapshot *s = NULL;
    buf v;
    buf_init(&v);
    *out = NULL;
    *epoch = 0;
    *seq = 0;
    int rv = open_view(&s, st, table_id, part, RANGE_COUNT, err, errlen);
    if (rv == 0 && (rv = repl_at(s, table_id, REPL_LOG_POS, part, &v, err, errlen)) == 0 &&
        v.len > 0) {
        rv = store_commit_pos_decode(v.data, v.len, table_id, part, epoch, seq, err, errlen);
    }
    buf_fini(&v);
    if (rv != 0) {
        snapshot_close(s);
        return rv;
    }
    *out = s;
    return 0;
}

int snapshot_next(snapshot *s, size_t max_bytes, int (*fn)(void *arg, const snapshot_entry *e),
                  void *arg, int *done, char *err, size_t errlen)
{
    size_t bytes = 0;
    *done = 0;
    while (s->cur < s->nranges) {
        range *r = &s->r[s->cur];
        int rv;
        if (s->it == NULL) {
            if ((rv = db_iter_new_at(&s->it, s->st->db, s->snap, r->cf, r->lo.data, r->lo.len,
                                     r->unbounded ? NULL : r->hi.data,
                                     r->unbounded ? 0 : r->hi.len)) != 0) {
                return errf(rv, err, errlen, "cannot read the partition");
            }
            db_iter_seek_first(s->it);
        }
        for (; db_iter_valid(s->it); db_iter_next(s->it)) {
            snapshot_entry e = {.family = (uint32_t)r->cf};
            e.key = db_iter_key(s->it, &e.klen);
            e.val = db_iter_value(s->it, &e.vlen);
            if (bytes > 0 && bytes + e.klen + e.vlen > max_bytes) {
                return 0;
            }
            if ((rv = fn(arg, &e)) != 0) {
                return rv;
            }
            bytes += e.klen + e.vlen;
            s->entries++;
            s->bytes += e.klen + e.vlen;
        }
        if ((rv = db_iter_status(s->it, err, errlen)) != 0) {
            return rv;
        }
        db_iter_free(s->it);
        s->it = NULL;
        s->cur++;
    }
    *done = 1;
    return 0;
}

int snapshot_open_items(snapshot **out, store *st, uint32_t table_id, uint32_t part,
                        const uint8_t *after, size_t alen, uint64_t *outbox_last, char *err,
                        size_t errlen)
{
    snapshot *s = NULL;
    buf v;
    buf_init(&v);
    *out = NULL;
    *outbox_last = 0;
    int rv = open_view(&s, st, table_id, part, 1, err, errlen); /* the items come first */
    range *r = s != NULL ? &s->r[0] : NULL;
    if (rv == 0 && alen > 0 && (alen < r->lo.len || memcmp(after, r->lo.data, r->lo.len) != 0)) {
        rv =
            errf(LAPSE_EINVAL, err, errlen, "the start key is no item key of table %u partition %u",
                 (unsigned)table_id, (unsigned)part);
    } else if (rv == 0 && alen > 0) {
        buf_clear(&r->lo); /* the first key past after: after "\0" */
        if (buf_append(&r->lo, after, alen) != 0 || buf_append(&r->lo, "", 1) != 0) {
            rv = errf(LAPSE_ENOMEM, err, errlen, "out of memory");
        }
    }
    uint64_t next = 0, next_stream = 0;
    if (rv == 0 && (rv = repl_at(s, table_id, REPL_SOURCE, part, &v, err, errlen)) == 0 &&
        v.len > 0 &&
        (rv = outbox_counters_decode(v.data, v.len, table_id, part, &next, &next_stream, err,
                                     errlen)) == 0) {
        *outbox_last = next - 1;
    }
    buf_fini(&v);
    if (rv != 0) {
        snapshot_close(s);
        return rv;
    }
    *out = s;
    return 0;
}

void snapshot_counts(const snapshot *s, uint64_t *entries, uint64_t *bytes)
{
    *entries = s->entries;
    *bytes = s->bytes;
}

void snapshot_close(snapshot *s)
{
    if (s == NULL) {
        return;
    }
    db_iter_free(s->it);
    if (s->snap != NULL) {
        db_snapshot_free(s->snap);
    }
    ranges_fini(s->r);
    free(s);
}

/* 1 when e lies in one of the ranges of its family. */
static int in_ranges(const range *r, const snapshot_entry *e)
{
    for (size_t i = 0; i < RANGE_COUNT; i++) {
        if (r[i].cf != (int)e->family ||
            itemkey_cmp(e->key, e->klen, r[i].lo.data, r[i].lo.len) < 0) {
            continue;
        }
        if (r[i].unbounded || itemkey_cmp(e->key, e->klen, r[i].hi.data, r[i].hi.len) < 0) {
            return 1;
        }
    }
    return 0;
}

/* 0 when the partition has no log position (a reset copy), else
 * LAPSE_ESTATE with err. REQUIRES: the stripe lock. */
static int check_reset(store *st, uint32_t table_id, uint32_t part, char *err, size_t errlen)
{
    uint64_t epoch = 0, seq = 0;
    int rv = replog_position(st, table_id, part, &epoch, &seq, err, errlen);
    if (rv == 0 && seq != 0) {
        rv = errf(LAPSE_ESTATE, err, errlen,
                  "table %u partition %u holds its log up to record %llu: a snapshot goes "
                  "only into a copy just reset",
                  (unsigned)table_id, (unsigned)part, (unsigned long long)seq);
    }
    return rv;
}

int snapshot_install(store *st, uint32_t table_id, uint32_t part, const snapshot_entry *e, size_t n,
                     char *err, size_t errlen)
{
    range r[RANGE_COUNT];
    int rv = ranges_of(r, table_id, part);
    if (rv != 0) {
        ranges_fini(r);
        return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
    }
    /* Every entry is checked before any is written: a refused call
     * writes nothing. */
    for (size_t i = 0; i < n; i++) {
        if (!in_ranges(r, &e[i])) {
            rv = errf(LAPSE_EINVAL, err, errlen,
                      "snapshot entry %zu (family %u, %zu-byte key) is not a key of table "
                      "%u partition %u",
                      i, (unsigned)e[i].family, e[i].klen, (unsigned)table_id, (unsigned)part);
            ranges_fini(r);
            return rv;
        }
    }
    ranges_fini(r);
    db_batch *b = db_batch_thread(); /* a part is up to 4 MB: kept */
    if (b == NULL) {
        return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
    }
    pthread_mutex_t *mu = store_stripe(st, table_id, part);
    for (size_t i = 0; rv == 0 && i < n;) {
        size_t bytes = 0;
        for (; i < n && (bytes == 0 || bytes + e[i].klen + e[i].vlen <= SNAPSHOT_WRITE_BYTES);
             i++) {
            db_batch_put(b, st->db, (int)e[i].family, e[i].key, e[i].klen, e[i].val, e[i].vlen);
            bytes += e[i].klen + e[i].vlen;
        }
        pthread_mutex_lock(mu);
        if ((rv = check_reset(st, table_id, part, err, errlen)) == 0 &&
            (rv = db_write(st->db, b, 0, err, errlen)) == 0) {
            /* New expiry entries and outbox counters under any cached state. */
            store_sweep_cursor_note(st, table_id, part, NULL, 0);
            outbox_forget_part(st, table_id, part);
        }
        pthread_mutex_unlock(mu);
        db_batch_clear(b);
    }
    db_batch_thread_done(b);
    return rv;
}

int snapshot_finish(store *st, uint32_t table_id, uint32_t part, uint64_t epoch, uint64_t seq,
                    char *err, size_t errlen)
{
    pthread_mutex_t *mu = store_stripe(st, table_id, part);
    pthread_mutex_lock(mu);
    int rv = check_reset(st, table_id, part, err, errlen);
    if (rv == 0) {
        rv = replog_set_position_locked(st, table_id, part, epoch, seq, err, errlen);
    }
    pthread_mutex_unlock(mu);
    return rv;
}
