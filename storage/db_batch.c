/*
 * db_batch.c: write batches (db.h): their ops, the portable log of a batch
 * that a replica replays (db_batch_log, db_batch_replay), and writing them.
 * The handles and error helpers are db_int.h's; errors as in db.c.
 */
#include "db.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "db_int.h"

/* ------------------------------------------------------------------------ */
/* Write batches                                                             */
/* ------------------------------------------------------------------------ */

db_batch *db_batch_new(void)
{
    db_batch *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return NULL;
    }
    if ((b->wb = rocksdb_writebatch_create()) == NULL) {
        free(b);
        return NULL;
    }
    buf_init(&b->log);
    return b;
}

void db_batch_free(db_batch *b)
{
    if (b == NULL) {
        return;
    }
    if (b->wb != NULL) {
        rocksdb_writebatch_destroy(b->wb);
    }
    buf_fini(&b->log);
    free(b);
}

void db_batch_clear(db_batch *b)
{
    rocksdb_writebatch_clear(b->wb);
    buf_clear(&b->log);
    b->log_oom = 0;
    b->logging = 0;
    b->refused = 0;
}

/* The key of each thread's db_batch_thread batch, made once. */
static pthread_key_t thread_batch_key;
static pthread_once_t thread_batch_once = PTHREAD_ONCE_INIT;
static int thread_batch_ok; /* the key was made */

static void thread_batch_free(void *b)
{
    db_batch_free(b);
}

static void thread_batch_init(void)
{
    thread_batch_ok = pthread_key_create(&thread_batch_key, thread_batch_free) == 0;
}

db_batch *db_batch_thread(void)
{
    (void)pthread_once(&thread_batch_once, thread_batch_init);
    if (!thread_batch_ok) {
        return db_batch_new(); /* freed by db_batch_thread_done, not kept */
    }
    db_batch *b = pthread_getspecific(thread_batch_key);
    if (b == NULL && (b = db_batch_new()) != NULL &&
        pthread_setspecific(thread_batch_key, b) != 0) {
        db_batch_free(b);
        return NULL;
    }
    return b;
}

void db_batch_thread_done(db_batch *b)
{
    if (b == NULL) {
        return;
    }
    size_t size = 0;
    (void)rocksdb_writebatch_data(b->wb, &size);
    if (!thread_batch_ok || size > DB_BATCH_THREAD_KEEP) {
        if (thread_batch_ok && pthread_getspecific(thread_batch_key) == b) {
            (void)pthread_setspecific(thread_batch_key, NULL);
        }
        db_batch_free(b);
        return;
    }
    db_batch_clear(b);
}

/* Appends one op to the log: code, family, then each slice as a u32 length
 * and its bytes. */
static void log_op(db_batch *b, int code, int cf, const void *k1, size_t l1, const void *k2,
                   size_t l2, int two)
{
    if (!b->logging || b->log_oom) {
        return;
    }
    if (l1 > UINT32_MAX || l2 > UINT32_MAX || buf_reserve(&b->log, 10 + l1 + l2) != 0 ||
        buf_append_byte(&b->log, (uint8_t)code) != 0 ||
        buf_append_byte(&b->log, (uint8_t)cf) != 0 ||
        buf_append_u32be(&b->log, (uint32_t)l1) != 0 || buf_append(&b->log, k1, l1) != 0 ||
        (two &&
         (buf_append_u32be(&b->log, (uint32_t)l2) != 0 || buf_append(&b->log, k2, l2) != 0))) {
        b->log_oom = 1;
    }
}

void db_batch_log_start(db_batch *b)
{
    b->logging = 1;
    b->log_oom = 0;
    buf_clear(&b->log);
}

int db_batch_logging(const db_batch *b)
{
    return b->logging;
}

const uint8_t *db_batch_log(const db_batch *b, size_t *len)
{
    if (!b->logging || b->log_oom) {
        *len = 0;
        return NULL;
    }
    *len = b->log.len;
    return b->log.data != NULL ? b->log.data : (const uint8_t *)"";
}

/* Reads a u32-length-prefixed slice at *pos of p[0..len). */
static int log_slice(const uint8_t *p, size_t len, size_t *pos, const uint8_t **s, size_t *n)
{
    if (len - *pos < 4) {
        return LAPSE_ECORRUPT;
    }
    uint32_t l = buf_get_u32be(p + *pos);
    *pos += 4;
    if (len - *pos < l) {
        return LAPSE_ECORRUPT;
    }
    *s = p + *pos;
    *n = l;
    *pos += l;
    return 0;
}

/* One pass over the log p[0..len): with b NULL it only checks it; else
 * it adds its ops to b. The number of ops, or -1 when malformed. */
static long replay_pass(db_batch *b, db *d, const uint8_t *p, size_t len)
{
    size_t pos = 0;
    long n = 0;
    while (pos < len) {
        if (len - pos < 2) {
            return -1;
        }
        int code = p[pos], cf = p[pos + 1];
        pos += 2;
        const uint8_t *k1, *k2 = NULL;
        size_t l1, l2 = 0;
        if ((size_t)cf >= d->ncf || log_slice(p, len, &pos, &k1, &l1) != 0 ||
            (code != LOG_DELETE && log_slice(p, len, &pos, &k2, &l2) != 0) ||
            (code != LOG_PUT && code != LOG_DELETE && code != LOG_DELETE_RANGE)) {
            return -1;
        }
        if (b != NULL && code == LOG_PUT) {
            db_batch_put(b, d, cf, k1, l1, k2, l2);
        } else if (b != NULL && code == LOG_DELETE) {
            db_batch_delete(b, d, cf, k1, l1);
        } else if (b != NULL) {
            db_batch_delete_range(b, d, cf, k1, l1, k2, l2);
        }
        n++;
    }
    return n;
}

int db_batch_replay(db_batch *b, db *d, const uint8_t *p, size_t len, size_t *ops)
{
    if (replay_pass(NULL, d, p, len) < 0) {
        return LAPSE_ECORRUPT; /* b untouched */
    }
    long n = replay_pass(b, d, p, len);
    if (ops != NULL) {
        *ops = (size_t)n;
    }
    return 0;
}

void db_batch_put(db_batch *b, db *d, int cf, const void *key, size_t klen, const void *val,
                  size_t vlen)
{
    rocksdb_column_family_handle_t *h = db_cf_handle(d, cf);
    if (h != NULL) {
        rocksdb_writebatch_put_cf(b->wb, h, key, klen, val, vlen);
        log_op(b, LOG_PUT, cf, key, klen, val, vlen, 1);
    }
}

void db_batch_delete(db_batch *b, db *d, int cf, const void *key, size_t klen)
{
    rocksdb_column_family_handle_t *h = db_cf_handle(d, cf);
    if (h != NULL) {
        rocksdb_writebatch_delete_cf(b->wb, h, key, klen);
        log_op(b, LOG_DELETE, cf, key, klen, NULL, 0, 0);
    }
}

void db_batch_delete_range(db_batch *b, db *d, int cf, const void *start, size_t slen,
                           const void *end, size_t elen)
{
    rocksdb_column_family_handle_t *h = db_cf_handle(d, cf);
    if (cf >= 0 && cf < DB_MAX_CF && d->hinted_opts[cf] != NULL && slen >= d->hint_prefix_len) {
        b->refused = 1; /* db_options.hinted_cfs: it would corrupt the memtable */
    } else if (h != NULL) {
        rocksdb_writebatch_delete_range_cf(b->wb, h, start, slen, end, elen);
        log_op(b, LOG_DELETE_RANGE, cf, start, slen, end, elen, 1);
    }
}

size_t db_batch_count(const db_batch *b)
{
    int n = rocksdb_writebatch_count(b->wb);
    return n < 0 ? 0 : (size_t)n;
}

void db_fault_write(db *d, int after)
{
    atomic_store(&d->write_fault, after);
}

int db_write(db *d, db_batch *b, int sync, char *err, size_t errlen)
{
    char *e = NULL;
    /* The fault point: a relaxed load costs nothing measurable per write. */
    if (atomic_load_explicit(&d->write_fault, memory_order_relaxed) > 0 &&
        atomic_fetch_sub(&d->write_fault, 1) == 1) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "write: injected fault");
        }
        return LAPSE_EIO;
    }
    if (b->refused) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen,
                     "write: a range deletion in an insert-hinted family begins with a key "
                     "of %zu bytes or more",
                     d->hint_prefix_len);
        }
        return LAPSE_EINVAL;
    }
    rocksdb_write(d->rdb, sync ? d->wopts_sync : d->wopts, b->wb, &e);
    if (e != NULL) {
        return db_rerr(e, "write", err, errlen);
    }
    return 0;
}
