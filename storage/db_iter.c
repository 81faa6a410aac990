/*
 * db_iter.c: snapshots and iterators (db.h), bounded by owned copies of
 * their bounds. The handles and error helpers are db_int.h's; errors as in
 * db.c.
 */
#include "db.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "db_int.h"

/* ------------------------------------------------------------------------ */
/* Iterators                                                                 */
/* ------------------------------------------------------------------------ */

struct db_snapshot {
    db *d;
    const rocksdb_snapshot_t *snap;
};

db_snapshot *db_snapshot_new(db *d)
{
    db_snapshot *s = calloc(1, sizeof(*s));
    if (s != NULL) {
        s->d = d;
        s->snap = rocksdb_create_snapshot(d->rdb);
        if (s->snap == NULL) {
            free(s);
            s = NULL;
        }
    }
    return s;
}

void db_snapshot_free(db_snapshot *s)
{
    if (s != NULL) {
        rocksdb_release_snapshot(s->d->rdb, s->snap);
        free(s);
    }
}

int db_iter_new(db_iter **out, db *d, int cf, const void *lower, size_t llen, const void *upper,
                size_t ulen)
{
    return db_iter_new_at(out, d, NULL, cf, lower, llen, upper, ulen);
}

int db_iter_new_at(db_iter **out, db *d, const db_snapshot *snap, int cf, const void *lower,
                   size_t llen, const void *upper, size_t ulen)
{
    *out = NULL;
    rocksdb_column_family_handle_t *h = db_cf_handle(d, cf);
    if (h == NULL) {
        return LAPSE_EINVAL;
    }
    db_iter *it = calloc(1, sizeof(*it));
    if (it == NULL) {
        return LAPSE_ENOMEM;
    }
    if ((it->ro = rocksdb_readoptions_create()) == NULL) {
        goto oom;
    }
    if (snap != NULL) {
        rocksdb_readoptions_set_snapshot(it->ro, snap->snap);
    }
    /* RocksDB keeps pointers to the bounds, so they live in the db_iter and
     * are freed only after the iterator. */
    if (lower != NULL) {
        if ((it->lower = malloc(llen > 0 ? llen : 1)) == NULL) {
            goto oom;
        }
        memcpy(it->lower, lower, llen);
        rocksdb_readoptions_set_iterate_lower_bound(it->ro, it->lower, llen);
    }
    if (upper != NULL) {
        if ((it->upper = malloc(ulen > 0 ? ulen : 1)) == NULL) {
            goto oom;
        }
        memcpy(it->upper, upper, ulen);
        rocksdb_readoptions_set_iterate_upper_bound(it->ro, it->upper, ulen);
    }
    if ((it->it = rocksdb_create_iterator_cf(d->rdb, it->ro, h)) == NULL) {
        goto oom;
    }
    *out = it;
    return 0;
oom:
    db_iter_free(it);
    return LAPSE_ENOMEM;
}

void db_iter_free(db_iter *it)
{
    if (it == NULL) {
        return;
    }
    if (it->it != NULL) {
        rocksdb_iter_destroy(it->it);
    }
    if (it->ro != NULL) {
        rocksdb_readoptions_destroy(it->ro);
    }
    free(it->upper);
    free(it->lower);
    free(it);
}

void db_iter_seek(db_iter *it, const void *key, size_t klen)
{
    rocksdb_iter_seek(it->it, key, klen);
}

void db_iter_seek_for_prev(db_iter *it, const void *key, size_t klen)
{
    rocksdb_iter_seek_for_prev(it->it, key, klen);
}

void db_iter_seek_first(db_iter *it)
{
    rocksdb_iter_seek_to_first(it->it);
}

void db_iter_seek_last(db_iter *it)
{
    rocksdb_iter_seek_to_last(it->it);
}

int db_iter_valid(const db_iter *it)
{
    return rocksdb_iter_valid(it->it) != 0;
}

void db_iter_next(db_iter *it)
{
    rocksdb_iter_next(it->it);
}

void db_iter_prev(db_iter *it)
{
    rocksdb_iter_prev(it->it);
}

const uint8_t *db_iter_key(const db_iter *it, size_t *len)
{
    return (const uint8_t *)rocksdb_iter_key(it->it, len);
}

const uint8_t *db_iter_value(const db_iter *it, size_t *len)
{
    return (const uint8_t *)rocksdb_iter_value(it->it, len);
}

int db_iter_status(const db_iter *it, char *err, size_t errlen)
{
    char *e = NULL;
    rocksdb_iter_get_error(it->it, &e);
    if (e != NULL) {
        return db_rerr(e, "iterator", err, errlen);
    }
    return 0;
}
