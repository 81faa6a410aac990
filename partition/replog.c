/*
 * replog.c: the replication log of replicated partitions (replog.h): the
 * replica's apply, catch-up reads, resets and the digest that compares
 * replicas. The primary's commit, and the log's position and records both
 * sides write, are in store_commit.c, below this file.
 */
#include "replog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "itemkey.h"
#include "store_int.h"

#define EPOCH_BYTES 8

/* Sets *it to an iterator over family cf's keys of partition part of
 * table_id from lo (NULL: the partition's first key) to its last. 0, or
 * an error with err. */
static int part_iter(store *st, int cf, uint32_t table_id, uint32_t part, const buf *lo,
                     db_iter **it, char *err, size_t errlen)
{
    buf pre, hi;
    buf_init(&pre);
    buf_init(&hi);
    *it = NULL;
    int rv = itemkey_append_prefix(&pre, table_id, part) != 0 ||
                     itemkey_append_prefix(&hi, table_id, part) != 0
                 ? LAPSE_ENOMEM
                 : 0;
    if (rv == 0) {
        int unbounded = itemkey_successor(&hi);
        rv = db_iter_new(it, st->db, cf, lo != NULL ? lo->data : pre.data,
                         lo != NULL ? lo->len : pre.len, unbounded ? NULL : hi.data,
                         unbounded ? 0 : hi.len);
    }
    buf_fini(&pre);
    buf_fini(&hi);
    return rv != 0 ? errf(rv, err, errlen, "cannot read table %u partition %u", (unsigned)table_id,
                          (unsigned)part)
                   : 0;
}

int replog_position(store *st, uint32_t table_id, uint32_t part, uint64_t *epoch, uint64_t *seq,
                    char *err, size_t errlen)
{
    return store_commit_pos_read(st, table_id, part, epoch, seq, err, errlen);
}

int replog_outbox_mark(store *st, uint32_t table_id, uint32_t part, uint64_t *log_seq,
                       uint64_t *outbox_last, char *err, size_t errlen)
{
    uint64_t epoch, next = 1, next_stream = 1;
    pthread_mutex_t *mu = store_stripe(st, table_id, part);
    pthread_mutex_lock(mu);
    int rv = store_commit_pos_read(st, table_id, part, &epoch, log_seq, err, errlen);
    if (rv == 0) {
        rv = outbox_counters_get(st, table_id, part, &next, &next_stream, err, errlen);
    }
    pthread_mutex_unlock(mu);
    *outbox_last = rv == 0 ? next - 1 : 0;
    return rv;
}

uint64_t replog_rec_epoch(const uint8_t *rec, size_t len)
{
    return len >= EPOCH_BYTES ? buf_get_u64be(rec) : 0;
}

int replog_record_epoch(store *st, uint32_t table_id, uint32_t part, uint64_t seq, uint64_t *epoch,
                        char *err, size_t errlen)
{
    *epoch = 0;
    if (seq == 0) {
        return 0;
    }
    buf k, v;
    buf_init(&k);
    buf_init(&v);
    int found = 0, rv = 0;
    if (itemkey_seq_of(&k, table_id, part, seq) != 0) {
        rv = errf(LAPSE_ENOMEM, err, errlen, "out of memory");
    } else if ((rv = db_get(st->db, CF_REPLOG, k.data, k.len, &v, &found, err, errlen)) == 0) {
        uint64_t pos_epoch = 0, pos_seq = 0;
        if (!found &&
            (rv = store_commit_pos_read(st, table_id, part, &pos_epoch, &pos_seq, err, errlen)) ==
                0 &&
            pos_seq == seq) {
            *epoch = pos_epoch; /* the last record, not held after a snapshot install */
        } else if (rv != 0) {
            /* the position cannot be read: rv says why */
        } else if (!found) {
            rv = errf(LAPSE_ENOTFOUND, err, errlen,
                      "record %llu of table %u partition %u is not in the log",
                      (unsigned long long)seq, (unsigned)table_id, (unsigned)part);
        } else if (v.len < EPOCH_BYTES) {
            rv = errf(LAPSE_ECORRUPT, err, errlen,
                      "record %llu of table %u partition %u is %zu bytes", (unsigned long long)seq,
                      (unsigned)table_id, (unsigned)part, v.len);
        } else {
            *epoch = buf_get_u64be(v.data);
        }
    }
    buf_fini(&k);
    buf_fini(&v);
    return rv;
}

/* The diverged answer: this copy holds a record the sender's log has not. */
static int diverged_at(int *diverged, char *err, size_t errlen, uint32_t table_id, uint32_t part,
                       uint64_t seq, uint64_t mine, uint64_t theirs)
{
    *diverged = 1;
    return errf(LAPSE_ESTATE, err, errlen,
                "table %u partition %u has diverged at record %llu (epoch %llu here, %llu "
                "at the sender): it needs a rebuild",
                (unsigned)table_id, (unsigned)part, (unsigned long long)seq,
                (unsigned long long)mine, (unsigned long long)theirs);
}

void replog_run_init(replog_run *run, uint32_t table_id, uint32_t part)
{
    memset(run, 0, sizeof(*run));
    run->table_id = table_id;
    run->part = part;
}

int replog_apply_into(store *st, db_batch *b, replog_run *run, uint64_t seq, uint64_t prev_epoch,
                      const uint8_t *rec, size_t len, uint64_t *applied, int *diverged, char *err,
                      size_t errlen)
{
    const uint32_t table_id = run->table_id, part = run->part;
    *diverged = 0;
    if (len < EPOCH_BYTES || seq == 0) {
        return errf(LAPSE_ECORRUPT, err, errlen, "replication record %llu is malformed",
                    (unsigned long long)seq);
    }
    uint64_t epoch = buf_get_u64be(rec), mine;
    int rv = 0;
    if (!run->loaded) {
        if ((rv = store_commit_pos_read(st, table_id, part, &run->epoch, &run->last, err,
                                        errlen)) != 0) {
            return rv;
        }
        run->loaded = 1;
    }
    *applied = run->last;
    if (epoch < run->epoch) {
        return errf(LAPSE_EPERM, err, errlen,
                    "record %llu is of epoch %llu; table %u partition %u is at epoch %llu",
                    (unsigned long long)seq, (unsigned long long)epoch, (unsigned)table_id,
                    (unsigned)part, (unsigned long long)run->epoch);
    }
    if (seq <= run->last) {
        /* A resend of what is here is acknowledged again; another record
         * under the same number means the logs parted. Records added to b
         * are not resent within one run (a run is consecutive), so the
         * stored log answers. */
        if ((rv = replog_record_epoch(st, table_id, part, seq, &mine, err, errlen)) == 0 &&
            mine != epoch) {
            rv = diverged_at(diverged, err, errlen, table_id, part, seq, mine, epoch);
        } else if (rv == LAPSE_ENOTFOUND) {
            rv = 0; /* trimmed here, or older than the snapshot this copy was rebuilt from */
        }
        return rv;
    }
    if (seq != run->last + 1) {
        return errf(LAPSE_ESTATE, err, errlen,
                    "record %llu of table %u partition %u leaves a gap after %llu",
                    (unsigned long long)seq, (unsigned)table_id, (unsigned)part,
                    (unsigned long long)run->last);
    }
    if (run->last > 0 && prev_epoch != run->epoch) {
        return diverged_at(diverged, err, errlen, table_id, part, run->last, run->epoch,
                           prev_epoch);
    }
    if ((rv = db_batch_replay(b, st->db, rec + EPOCH_BYTES, len - EPOCH_BYTES, NULL)) != 0) {
        return errf(rv, err, errlen, /* b as it was */
                    "replication record %llu of table %u partition %u is malformed",
                    (unsigned long long)seq, (unsigned)table_id, (unsigned)part);
    }
    /* The position goes in once per run, when b is written (replog_write):
     * one memtable insert per call instead of one per record. */
    if (store_commit_record_put(st, b, table_id, part, seq, rec, len) != 0 ||
        (store_commit_trim_due(st, seq) &&
         store_commit_trim_add(st, b, table_id, part, seq) != 0)) {
        return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
    }
    run->epoch = epoch;
    run->last = seq;
    run->added++;
    return 0;
}

int replog_write(store *st, db_batch *b, replog_run *const *runs, size_t n, char *err,
                 size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        if (runs[i]->added > 0) {
            store_commit_pos_put(st, b, runs[i]->table_id, runs[i]->part, runs[i]->epoch,
                                 runs[i]->last);
        }
    }
    int rv = db_write(st->db, b, 0, err, errlen);
    for (size_t i = 0; rv == 0 && i < n; i++) {
        if (runs[i]->added > 0) {
            /* The copy's items and counters changed under any cached state. */
            store_sweep_cursor_note(st, runs[i]->table_id, runs[i]->part, NULL, 0);
            outbox_forget_part(st, runs[i]->table_id, runs[i]->part);
        }
    }
    return rv;
}

int replog_apply_locked(store *st, uint32_t table_id, uint32_t part, uint64_t seq,
                        uint64_t prev_epoch, const uint8_t *rec, size_t len, uint64_t *applied,
                        int *diverged, char *err, size_t errlen)
{
    db_batch *b = db_batch_new();
    if (b == NULL) {
        return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
    }
    replog_run run, *runs[1] = {&run};
    replog_run_init(&run, table_id, part);
    int rv =
        replog_apply_into(st, b, &run, seq, prev_epoch, rec, len, applied, diverged, err, errlen);
    if (rv == 0 && run.added > 0 && (rv = replog_write(st, b, runs, 1, err, errlen)) == 0) {
        *applied = seq;
    }
    db_batch_free(b);
    return rv;
}

int replog_apply(store *st, uint32_t table_id, uint32_t part, uint64_t seq, uint64_t prev_epoch,
                 const uint8_t *rec, size_t len, uint64_t *applied, int *diverged, char *err,
                 size_t errlen)
{
    pthread_mutex_t *mu = store_stripe(st, table_id, part);
    pthread_mutex_lock(mu);
    int rv = replog_apply_locked(st, table_id, part, seq, prev_epoch, rec, len, applied, diverged,
                                 err, errlen);
    pthread_mutex_unlock(mu);
    return rv;
}

static int mutex_ptr_cmp(const void *a, const void *b)
{
    const uintptr_t x = (uintptr_t) * (pthread_mutex_t *const *)a;
    const uintptr_t y = (uintptr_t) * (pthread_mutex_t *const *)b;
    return x < y ? -1 : x > y;
}

/* The distinct stripes of the n partitions, in address order (the order
 * every taker of several uses), into *out (caller frees); their count. */
static size_t stripes_of(store *st, const uint32_t *tables, const uint32_t *parts, size_t n,
                         pthread_mutex_t ***out)
{
    pthread_mutex_t **mus = malloc((n > 0 ? n : 1) * sizeof(*mus));
    *out = mus;
    if (mus == NULL) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        mus[i] = store_stripe(st, tables[i], parts[i]);
    }
    qsort(mus, n, sizeof(*mus), mutex_ptr_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m == 0 || mus[m - 1] != mus[i]) {
            mus[m++] = mus[i];
        }
    }
    return m;
}

int replog_lock_many(store *st, const uint32_t *tables, const uint32_t *parts, size_t n)
{
    pthread_mutex_t **mus = NULL;
    size_t m = stripes_of(st, tables, parts, n, &mus);
    if (mus == NULL) {
        return LAPSE_ENOMEM;
    }
    for (size_t i = 0; i < m; i++) {
        pthread_mutex_lock(mus[i]);
    }
    free(mus);
    return 0;
}

void replog_unlock_many(store *st, const uint32_t *tables, const uint32_t *parts, size_t n)
{
    /* No allocation on the way out: each distinct stripe is released at
     * its first occurrence. */
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_t *mu = store_stripe(st, tables[i], parts[i]);
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) {
            seen = store_stripe(st, tables[j], parts[j]) == mu;
        }
        if (!seen) {
            pthread_mutex_unlock(mu);
        }
    }
}

void replog_lock(store *st, uint32_t table_id, uint32_t part)
{
    pthread_mutex_lock(store_stripe(st, table_id, part));
}

void replog_unlock(store *st, uint32_t table_id, uint32_t part)
{
    pthread_mutex_unlock(store_stripe(st, table_id, part));
}

/* Adds to b the deletion of every key of family cf that starts with
 * prefix p (plen bytes). 0 or LAPSE_ENOMEM. */
static int drop_prefix(store *st, db_batch *b, int cf, const uint8_t *p, size_t plen)
{
    buf hi;
    buf_init(&hi);
    if (buf_append(&hi, p, plen) != 0) {
        return LAPSE_ENOMEM;
    }
    if (itemkey_successor(&hi)) {
        db_batch_delete_range(b, st->db, cf, p, plen, NULL, 0);
    } else {
        db_batch_delete_range(b, st->db, cf, p, plen, hi.data, hi.len);
    }
    buf_fini(&hi);
    return 0;
}

int replog_reset(store *st, uint32_t table_id, uint32_t part, char *err, size_t errlen)
{
    static const int part_cfs[] = {CF_ITEMS, CF_EXPIRY, CF_LSI, CF_OUTBOX, CF_REPLOG, CF_REQUESTS};
    static const uint8_t kinds[] = {REPL_SOURCE, REPL_ACK, REPL_LOG_POS};
    buf pre;
    buf_init(&pre);
    db_batch *b = db_batch_new();
    int rv = b == NULL || itemkey_append_prefix(&pre, table_id, part) != 0 ? LAPSE_ENOMEM : 0;
    for (size_t i = 0; rv == 0 && i < sizeof(part_cfs) / sizeof(part_cfs[0]); i++) {
        rv = drop_prefix(st, b, part_cfs[i], pre.data, pre.len);
    }
    for (size_t i = 0; rv == 0 && i < sizeof(kinds); i++) {
        uint8_t k[ITEMKEY_REPL_MAX];
        size_t klen = itemkey_repl(k, table_id, kinds[i], part, 0, 0);
        rv = drop_prefix(st, b, CF_REPL, k, klen);
    }
    if (rv == 0) {
        rv = expiry_forget_progress(st, b, table_id, part);
    }
    if (rv != 0) {
        rv = errf(LAPSE_ENOMEM, err, errlen, "out of memory");
    }
    pthread_mutex_t *mu = store_stripe(st, table_id, part);
    pthread_mutex_lock(mu);
    if (rv == 0 && (rv = db_write(st->db, b, 1, err, errlen)) == 0) {
        store_sweep_cursor_note(st, table_id, part, NULL, 0);
        outbox_forget_part(st, table_id, part);
    }
    pthread_mutex_unlock(mu);
    db_batch_free(b);
    buf_fini(&pre);
    return rv;
}

int replog_set_position_locked(store *st, uint32_t table_id, uint32_t part, uint64_t epoch,
                               uint64_t seq, char *err, size_t errlen)
{
    db_batch *b = db_batch_new();
    if (b == NULL) {
        return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
    }
    store_commit_pos_put(st, b, table_id, part, epoch, seq);
    int rv = db_write(st->db, b, 1, err, errlen);
    if (rv == 0) {
        store_sweep_cursor_note(st, table_id, part, NULL, 0);
        outbox_forget_part(st, table_id, part);
    }
    db_batch_free(b);
    return rv;
}

int replog_first(store *st, uint32_t table_id, uint32_t part, uint64_t *first, char *err,
                 size_t errlen)
{
    db_iter *it = NULL;
    *first = 0;
    int rv = part_iter(st, CF_REPLOG, table_id, part, NULL, &it, err, errlen);
    if (rv != 0) {
        return rv;
    }
    db_iter_seek_first(it);
    if (db_iter_valid(it)) {
        size_t klen = 0;
        const uint8_t *k = db_iter_key(it, &klen); /* klen is set here, before it is read */
        *first = itemkey_seq(k, klen);
    } else if ((rv = db_iter_status(it, err, errlen)) == 0) {
        uint64_t epoch, seq;
        if ((rv = store_commit_pos_read(st, table_id, part, &epoch, &seq, err, errlen)) == 0) {
            *first = seq + 1;
        }
    }
    db_iter_free(it);
    return rv;
}

int replog_read(store *st, uint32_t table_id, uint32_t part, uint64_t after_seq, size_t max,
                size_t max_bytes,
                int (*fn)(void *arg, uint64_t seq, const uint8_t *rec, size_t len), void *arg,
                char *err, size_t errlen)
{
    buf lo;
    buf_init(&lo);
    db_iter *it = NULL;
    int rv = 0;
    if (after_seq == UINT64_MAX) {
        return 0;
    }
    if (itemkey_seq_of(&lo, table_id, part, after_seq + 1) != 0) {
        rv = errf(LAPSE_ENOMEM, err, errlen, "out of memory");
        goto out;
    }
    if ((rv = part_iter(st, CF_REPLOG, table_id, part, &lo, &it, err, errlen)) != 0) {
        goto out;
    }
    size_t n = 0, bytes = 0;
    for (db_iter_seek_first(it); db_iter_valid(it) && n < max; db_iter_next(it)) {
        size_t klen, vlen;
        const uint8_t *k = db_iter_key(it, &klen);
        const uint8_t *v = db_iter_value(it, &vlen);
        if (n > 0 && max_bytes > 0 && bytes + vlen > max_bytes) {
            break;
        }
        if ((rv = fn(arg, itemkey_seq(k, klen), v, vlen)) != 0) {
            goto out;
        }
        n++;
        bytes += vlen;
    }
    rv = db_iter_status(it, err, errlen);
out:
    db_iter_free(it);
    buf_fini(&lo);
    return rv;
}

/* FNV-1a, 64 bits, continued from h. */
static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* Counts the keys of it and digests them with their values, in order. */
static int digest_iter(db_iter *it, uint64_t *count, uint64_t *digest, char *err, size_t errlen)
{
    uint64_t h = 0xcbf29ce484222325ULL, n = 0;
    for (db_iter_seek_first(it); db_iter_valid(it); db_iter_next(it)) {
        size_t klen, vlen;
        const uint8_t *k = db_iter_key(it, &klen);
        const uint8_t *v = db_iter_value(it, &vlen);
        uint8_t lens[16];
        buf_put_u64be(lens, (uint64_t)klen);
        buf_put_u64be(lens + 8, (uint64_t)vlen);
        h = fnv(fnv(fnv(h, lens, sizeof(lens)), k, klen), v, vlen);
        n++;
    }
    *count = n;
    *digest = h;
    return db_iter_status(it, err, errlen);
}

int replog_items_digest(store *st, uint32_t table_id, uint32_t part, uint64_t *count,
                        uint64_t *digest, char *err, size_t errlen)
{
    db_iter *it = NULL;
    *count = 0;
    *digest = 0;
    int rv = part_iter(st, CF_ITEMS, table_id, part, NULL, &it, err, errlen);
    if (rv == 0) {
        rv = digest_iter(it, count, digest, err, errlen);
    }
    db_iter_free(it);
    return rv;
}

int replog_gsi_digest(store *st, uint32_t table_id, uint32_t index_id, uint32_t gpart,
                      uint64_t *count, uint64_t *digest, char *err, size_t errlen)
{
    db_iter *it = NULL;
    buf lo, hi;
    buf_init(&lo);
    buf_init(&hi);
    *count = 0;
    *digest = 0;
    int rv = itemkey_gsi_prefix(&lo, table_id, index_id, gpart) != 0 ||
                     itemkey_gsi_prefix(&hi, table_id, index_id, gpart) != 0
                 ? LAPSE_ENOMEM
                 : 0;
    if (rv == 0) {
        int unbounded = itemkey_successor(&hi);
        rv = db_iter_new(&it, st->db, CF_GSI, lo.data, lo.len, unbounded ? NULL : hi.data,
                         unbounded ? 0 : hi.len);
    }
    rv = rv != 0 ? errf(rv, err, errlen, "cannot read table %u index %u partition %u",
                        (unsigned)table_id, (unsigned)index_id, (unsigned)gpart)
                 : digest_iter(it, count, digest, err, errlen);
    db_iter_free(it);
    buf_fini(&lo);
    buf_fini(&hi);
    return rv;
}
