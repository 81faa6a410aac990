/*
 * outbox.c: the outbox counters and the source-side replication API (see
 * outbox.h). The records themselves are written by store_derived.c in the
 * WriteBatch of the change they describe.
 */
#include "outbox.h"

#include <string.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "itemkey.h"
#include "store_int.h"

static int oom(char *err, size_t errlen)
{
    return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
}

/* ======================================================================== */
/* Counters                                                                 */
/* ======================================================================== */

static seq_cache *cache_of(store *st, uint32_t table_id, uint32_t part)
{
    return &st->seqs[store_stripe(st, table_id, part) - st->locks];
}

int outbox_counters_decode(const uint8_t *v, size_t len, uint32_t table_id, uint32_t part,
                           uint64_t *next_seq, uint64_t *next_stream_seq, char *err, size_t errlen)
{
    if (len != 16 || buf_get_u64be(v) == 0 || buf_get_u64be(v + 8) == 0) {
        return errf(LAPSE_ECORRUPT, err, errlen,
                    "outbox counters of table %u partition %u are malformed", (unsigned)table_id,
                    (unsigned)part);
    }
    *next_seq = buf_get_u64be(v);
    *next_stream_seq = buf_get_u64be(v + 8);
    return 0;
}

int outbox_counters_get(store *st, uint32_t table_id, uint32_t part, uint64_t *next_seq,
                        uint64_t *next_stream_seq, char *err, size_t errlen)
{
    seq_cache *c = cache_of(st, table_id, part);
    if (c->valid && c->table_id == table_id && c->part == part) {
        *next_seq = c->next_seq;
        *next_stream_seq = c->next_stream_seq;
        return 0;
    }
    uint8_t k[ITEMKEY_REPL_MAX];
    size_t klen = itemkey_repl(k, table_id, REPL_SOURCE, part, 0, 0);
    int rv, found = 0;
    buf v;
    buf_init(&v);
    if ((rv = db_get(st->db, CF_REPL, k, klen, &v, &found, err, errlen)) != 0) {
        goto out;
    }
    if (!found) {
        *next_seq = *next_stream_seq = 1;
    } else if ((rv = outbox_counters_decode(v.data, v.len, table_id, part, next_seq,
                                            next_stream_seq, err, errlen)) != 0) {
        goto out;
    }
    outbox_counters_cache(st, table_id, part, *next_seq, *next_stream_seq);
out:
    buf_fini(&v);
    return rv;
}

/* Publishes (key, next) for peek_next (store_int.h, seq_cache: a seqlock).
 * REQUIRES: the stripe lock (the only writer). */
static void publish(seq_cache *c, uint64_t key, uint64_t next)
{
    uint32_t v = atomic_load_explicit(&c->pub_ver, memory_order_relaxed);
    atomic_store_explicit(&c->pub_ver, v + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&c->pub_key, key, memory_order_relaxed);
    atomic_store_explicit(&c->pub_next, next, memory_order_relaxed);
    atomic_store_explicit(&c->pub_ver, v + 2, memory_order_release);
}

static uint64_t pub_key_of(uint32_t table_id, uint32_t part)
{
    return (uint64_t)table_id << 32 | part;
}

/* The cached next_seq of (table_id, part) without the stripe lock: 1 and
 * *next set (a lower bound of the current next_seq, which only grows), or
 * 0 when the stripe caches another partition or is being written. */
static int peek_next(store *st, uint32_t table_id, uint32_t part, uint64_t *next)
{
    seq_cache *c = cache_of(st, table_id, part);
    uint32_t v1 = atomic_load_explicit(&c->pub_ver, memory_order_acquire);
    if (v1 & 1) {
        return 0;
    }
    uint64_t key = atomic_load_explicit(&c->pub_key, memory_order_relaxed);
    uint64_t n = atomic_load_explicit(&c->pub_next, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&c->pub_ver, memory_order_relaxed) != v1 || n == 0 ||
        key != pub_key_of(table_id, part)) {
        return 0;
    }
    *next = n;
    return 1;
}

void outbox_counters_cache(store *st, uint32_t table_id, uint32_t part, uint64_t next_seq,
                           uint64_t next_stream_seq)
{
    seq_cache *c = cache_of(st, table_id, part);
    c->valid = 1;
    c->table_id = table_id;
    c->part = part;
    c->next_seq = next_seq;
    c->next_stream_seq = next_stream_seq;
    publish(c, pub_key_of(table_id, part), next_seq);
}

void outbox_forget_table(store *st, uint32_t table_id)
{
    for (int i = 0; i < STORE_LOCK_STRIPES; i++) {
        pthread_mutex_lock(&st->locks[i]);
        if (st->seqs[i].table_id == table_id) {
            st->seqs[i].valid = 0;
            publish(&st->seqs[i], 0, 0);
        }
        pthread_mutex_unlock(&st->locks[i]);
    }
}

void outbox_forget_part(store *st, uint32_t table_id, uint32_t part)
{
    seq_cache *c = &st->seqs[store_stripe(st, table_id, part) - st->locks];
    if (c->table_id == table_id && c->part == part) {
        c->valid = 0;
        publish(c, 0, 0);
    }
}

/* ======================================================================== */
/* Reading                                                                  */
/* ======================================================================== */

int outbox_read(store *st, uint32_t table_id, uint32_t part, uint64_t after_seq, size_t max_records,
                size_t max_bytes, change_list *out, char *err, size_t errlen)
{
    return store_seq_read(st, CF_OUTBOX, table_id, part, after_seq, max_records, max_bytes, out,
                          "outbox_read", err, errlen);
}

int outbox_first_seq(store *st, uint32_t table_id, uint32_t part, uint64_t *first, char *err,
                     size_t errlen)
{
    change_list l;
    change_list_init(&l);
    int rv = outbox_read(st, table_id, part, 0, 1, 0, &l, err, errlen);
    *first = rv == 0 && l.n > 0 ? l.v[0].seq : 0;
    change_list_fini(&l);
    return rv;
}

int outbox_last_seq(store *st, uint32_t table_id, uint32_t part, uint64_t *last, char *err,
                    size_t errlen)
{
    uint64_t next = 1, next_stream = 1;
    if (peek_next(st, table_id, part, &next)) {
        *last = next - 1; /* no wait behind a write holding the stripe */
        return 0;
    }
    pthread_mutex_t *mu = store_stripe(st, table_id, part);
    pthread_mutex_lock(mu);
    int rv = outbox_counters_get(st, table_id, part, &next, &next_stream, err, errlen);
    pthread_mutex_unlock(mu);
    *last = rv == 0 ? next - 1 : 0;
    return rv;
}

/* ======================================================================== */
/* Acks and trimming                                                        */
/* ======================================================================== */

static int ack_get(store *st, uint32_t table_id, uint32_t part, uint32_t dest, uint64_t *seq,
                   char *err, size_t errlen)
{
    return store_repl_u64(st, table_id, REPL_ACK, part, 1, dest, seq, err, errlen);
}

int outbox_acked(store *st, uint32_t table_id, uint32_t part, uint32_t dest_node_id, uint64_t *seq,
                 char *err, size_t errlen)
{
    return ack_get(st, table_id, part, dest_node_id, seq, err, errlen);
}

int outbox_ack(store *st, uint32_t table_id, uint32_t part, uint32_t dest_node_id, uint64_t seq,
               char *err, size_t errlen)
{
    int rv;
    uint64_t next = 1, cur = 0;
    /* The bound check needs next_seq: the published copy when it already
     * allows seq (it only grows), else the stripe lock, so an ack never
     * waits behind a write in the common case and a refusal is certain. */
    if (!peek_next(st, table_id, part, &next) || seq >= next) {
        uint64_t next_stream = 1;
        pthread_mutex_t *mu = store_stripe(st, table_id, part);
        pthread_mutex_lock(mu);
        rv = outbox_counters_get(st, table_id, part, &next, &next_stream, err, errlen);
        pthread_mutex_unlock(mu);
        if (rv != 0) {
            return rv;
        }
    }
    if (seq >= next) {
        return errf(
            LAPSE_EINVAL, err, errlen, "ack of seq %llu from node %u, but the last record is %llu",
            (unsigned long long)seq, (unsigned)dest_node_id, (unsigned long long)(next - 1));
    }
    /* Acks have a lock of their own: only acks read-modify-write them. */
    pthread_mutex_t *mu = &st->ack_lock;
    pthread_mutex_lock(mu);
    if ((rv = ack_get(st, table_id, part, dest_node_id, &cur, err, errlen)) != 0) {
        goto unlock;
    }
    if (seq <= cur) {
        goto unlock; /* an old or repeated ack */
    }
    uint8_t k[ITEMKEY_REPL_MAX], v[8];
    size_t klen = itemkey_repl(k, table_id, REPL_ACK, part, 1, dest_node_id);
    buf_put_u64be(v, seq);
    db_batch *b = db_batch_new();
    if (b == NULL) {
        rv = oom(err, errlen);
        goto unlock;
    }
    /* Not synced: a lost ack only makes the shipper resend what the
     * destination then skips as applied. */
    db_batch_put(b, st->db, CF_REPL, k, klen, v, sizeof(v));
    rv = db_write(st->db, b, 0, err, errlen);
    db_batch_free(b);
unlock:
    pthread_mutex_unlock(mu);
    return rv;
}

/* Deletes the records (trimmed, low] of (table_id, part): one range delete,
 * skipped when none is there. The range starts past `trimmed`: the deleted
 * records below it stay in the memtable and SST files until compaction,
 * and a seek from seq 0 would step over every one of them each time
 * (quadratic). */
static int trim_range(store *st, uint32_t table_id, uint32_t part, uint64_t trimmed, uint64_t low,
                      char *err, size_t errlen)
{
    int rv = 0;
    db_iter *it = NULL;
    db_batch *b = NULL;
    buf lo, hi;
    buf_init(&lo);
    buf_init(&hi);
    if ((rv = itemkey_seq_of(&lo, table_id, part, trimmed + 1)) != 0 ||
        (rv = itemkey_seq_of(&hi, table_id, part, low + 1)) != 0 ||
        (rv = db_iter_new(&it, st->db, CF_OUTBOX, lo.data, lo.len, hi.data, hi.len)) != 0) {
        rv = oom(err, errlen);
        goto out;
    }
    db_iter_seek_first(it);
    int any = db_iter_valid(it); /* skip writing a tombstone over nothing */
    if ((rv = db_iter_status(it, err, errlen)) != 0) {
        goto out;
    }
    if (any) {
        if ((b = db_batch_new()) == NULL) {
            rv = oom(err, errlen);
            goto out;
        }
        db_batch_delete_range(b, st->db, CF_OUTBOX, lo.data, lo.len, hi.data, hi.len);
        if ((rv = db_write(st->db, b, 0, err, errlen)) != 0) {
            goto out;
        }
    }
out:
    db_iter_free(it);
    db_batch_free(b);
    buf_fini(&lo);
    buf_fini(&hi);
    return rv;
}

int outbox_trim(store *st, uint32_t table_id, uint32_t part, const uint32_t *dest_ids, size_t n,
                uint64_t trimmed, uint64_t *trimmed_through, char *err, size_t errlen)
{
    int rv = 0;
    uint64_t low = UINT64_MAX;
    if (trimmed_through != NULL) {
        *trimmed_through = 0;
    }
    if (n == 0 || dest_ids == NULL) {
        return errf(LAPSE_EINVAL, err, errlen, "outbox_trim: no destinations");
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t a = 0;
        if ((rv = ack_get(st, table_id, part, dest_ids[i], &a, err, errlen)) != 0) {
            return rv;
        }
        low = a < low ? a : low;
    }
    if (low == 0 || low <= trimmed) {
        if (trimmed_through != NULL) {
            *trimmed_through = low;
        }
        return 0;
    }
    /* No lock: acks only grow and new records land above every ack, so the
     * range [1, low] holds only records every destination applied. */
    if ((rv = trim_range(st, table_id, part, trimmed, low, err, errlen)) == 0 &&
        trimmed_through != NULL) {
        *trimmed_through = low;
    }
    return rv;
}

int outbox_trim_copy(store *st, uint32_t table_id, uint32_t part, uint64_t trimmed,
                     uint64_t through, uint64_t *trimmed_through, char *err, size_t errlen)
{
    uint64_t last = 0;
    int rv = outbox_last_seq(st, table_id, part, &last, err, errlen);
    uint64_t low = through < last ? through : last;
    *trimmed_through = trimmed;
    if (rv != 0 || low <= trimmed) {
        return rv;
    }
    /* Records at or below the copy's last are all here, and nothing lands
     * below it any more: the range holds exactly the records to drop. */
    if ((rv = trim_range(st, table_id, part, trimmed, low, err, errlen)) == 0) {
        *trimmed_through = low;
    }
    return rv;
}

int outbox_pending(store *st, uint32_t table_id, uint32_t part, uint32_t dest_node_id,
                   uint64_t *pending, char *err, size_t errlen)
{
    uint64_t last = 0, acked = 0;
    int rv;
    *pending = 0;
    if ((rv = outbox_last_seq(st, table_id, part, &last, err, errlen)) != 0 ||
        (rv = ack_get(st, table_id, part, dest_node_id, &acked, err, errlen)) != 0) {
        return rv;
    }
    *pending = last > acked ? last - acked : 0;
    return 0;
}
