/*
 * db.c: the RocksDB wrapper (see db.h). The only file including <rocksdb/c.h>.
 *
 * Error handling: every RocksDB call that reports errors gets a fresh
 * `char *e = NULL`; a non-NULL result is copied into the caller's buffer by
 * rerr(), which frees it at once. Nothing keeps or reuses an error string.
 *
 * Open order (close is the exact reverse, in db_close):
 *   block cache -> filter policy -> table options -> options -> read/write
 *   options -> rocksdb_t with its column-family handles.
 */
#include "db.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rocksdb/c.h>

#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/lapse_err.h"

#define DEFAULT_BLOCK_CACHE_BYTES ((size_t)64 << 20)
#define WRITE_BUFFER_BYTES ((size_t)64 << 20)
#define DB_WRITE_BUFFER_BYTES ((size_t)256 << 20) /* all memtables together */
#define BLOOM_BITS_PER_KEY 10.0

struct db {
    rocksdb_t *rdb;                            /* NULL until opened */
    rocksdb_cache_t *cache;                    /* our handle on the shared block cache */
    rocksdb_block_based_table_options_t *bbto; /* owns the filter policy */
    rocksdb_options_t *opts;                   /* db and column-family options */
    rocksdb_options_t *expiring_opts;          /* opts plus expiring_filter, or NULL */
    rocksdb_compactionfilter_t *expiring_filter; /* db_options.expiring_cf's */
    int64_t expire_after_ms;
    rocksdb_readoptions_t *ropts;              /* point reads */
    rocksdb_writeoptions_t *wopts;             /* WAL on, no fsync */
    rocksdb_writeoptions_t *wopts_sync;        /* WAL on, fsync */
    rocksdb_column_family_handle_t **cfh;      /* handles of every opened CF; the
                                                  caller's cf i is cfh[i] */
    size_t ncfh;                               /* entries in cfh */
    size_t ncf;                                /* the caller's column families */
    atomic_int write_fault;                    /* db_fault_write countdown; 0: off */
};

struct db_batch {
    rocksdb_writebatch_t *wb;
    int logging; /* db_batch_log_start: every op is also appended to log */
    int log_oom; /* an append to log failed: the log is incomplete */
    buf log;     /* the ops in db_batch_replay's format */
};

/* Op codes of the batch log (db_batch_log). */
enum { LOG_PUT = 'P', LOG_DELETE = 'D', LOG_DELETE_RANGE = 'R' };

struct db_iter {
    rocksdb_iterator_t *it;    /* destroyed first */
    rocksdb_readoptions_t *ro; /* holds pointers into lower/upper */
    char *lower;               /* owned copy of the lower bound, or NULL */
    char *upper;               /* owned copy of the upper bound, or NULL */
};

/* Copies RocksDB's error text into err, frees it and returns LAPSE_EIO. */
static int rerr(char *e, const char *what, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0) {
        snprintf(err, errlen, "%s: %s", what, e != NULL ? e : "unknown RocksDB error");
    }
    rocksdb_free(e);
    return LAPSE_EIO;
}

static void set_err(char *err, size_t errlen, const char *msg)
{
    if (err != NULL && errlen > 0) {
        snprintf(err, errlen, "%s", msg);
    }
}

static rocksdb_column_family_handle_t *cf_handle(const db *d, int cf)
{
    assert(cf >= 0 && (size_t)cf < d->ncf);
    if (cf < 0 || (size_t)cf >= d->ncf) {
        return NULL;
    }
    return d->cfh[cf];
}

/* ------------------------------------------------------------------------ */
/* Open and close                                                            */
/* ------------------------------------------------------------------------ */

static int name_index(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(names[i], name) == 0) {
            return (int)i;
        }
    }
    return -1;
}

static int tune(db *d, const db_options *opt)
{
    size_t cache_bytes = DEFAULT_BLOCK_CACHE_BYTES;
    if (opt != NULL && opt->block_cache_bytes > 0) {
        cache_bytes = opt->block_cache_bytes;
    }
    if ((d->cache = rocksdb_cache_create_lru(cache_bytes)) == NULL ||
        (d->bbto = rocksdb_block_based_options_create()) == NULL ||
        (d->opts = rocksdb_options_create()) == NULL ||
        (d->ropts = rocksdb_readoptions_create()) == NULL ||
        (d->wopts = rocksdb_writeoptions_create()) == NULL ||
        (d->wopts_sync = rocksdb_writeoptions_create()) == NULL) {
        return LAPSE_ENOMEM;
    }
    /* Point lookups (GetItem, conditional writes) dominate: a bloom filter
     * per table file saves disk reads for absent keys. The table options
     * take ownership of the policy. */
    rocksdb_filterpolicy_t *bloom = rocksdb_filterpolicy_create_bloom_full(BLOOM_BITS_PER_KEY);
    if (bloom == NULL) {
        return LAPSE_ENOMEM;
    }
    rocksdb_block_based_options_set_filter_policy(d->bbto, bloom);
    rocksdb_block_based_options_set_block_cache(d->bbto, d->cache);
    rocksdb_block_based_options_set_cache_index_and_filter_blocks(d->bbto, 1);
    rocksdb_block_based_options_set_format_version(d->bbto, 5);
    rocksdb_options_set_block_based_table_factory(d->opts, d->bbto);

    int create = opt == NULL ? 1 : opt->create_if_missing;
    rocksdb_options_set_create_if_missing(d->opts, (unsigned char)(create != 0));
    rocksdb_options_set_create_missing_column_families(d->opts, 1);
    /* A small machine: two background threads, 64 MiB memtables. */
    rocksdb_options_increase_parallelism(d->opts, 2);
    rocksdb_options_set_max_background_jobs(d->opts, 2);
    rocksdb_options_set_write_buffer_size(d->opts, WRITE_BUFFER_BYTES);
    rocksdb_options_set_db_write_buffer_size(d->opts, DB_WRITE_BUFFER_BYTES);
    rocksdb_options_set_level_compaction_dynamic_level_bytes(d->opts, 1);
    rocksdb_options_set_bytes_per_sync(d->opts, (uint64_t)1 << 20);
    rocksdb_options_set_keep_log_file_num(d->opts, 4);

    /* The WAL stays on for every write (never rocksdb_writeoptions_disable_WAL):
     * an acknowledged write must survive kill -9. */
    rocksdb_writeoptions_set_sync(d->wopts, 0);
    rocksdb_writeoptions_set_sync(d->wopts_sync, 1);
    return 0;
}

/* The compaction filter of db_options.expiring_cf: drops an entry whose
 * stamp is older than expire_after_ms (1), keeps the rest and anything too
 * short to carry a stamp (0). Runs on RocksDB's compaction threads. */
static unsigned char expiring_drop(void *arg, int level, const char *key, size_t klen,
                                   const char *val, size_t vlen, char **nv, size_t *nvlen,
                                   unsigned char *changed)
{
    const db *d = arg;
    (void)level, (void)key, (void)klen, (void)nv, (void)nvlen;
    *changed = 0;
    if (vlen < 8) {
        return 0;
    }
    int64_t stamp = (int64_t)buf_get_u64be((const uint8_t *)val);
    return stamp < clock_wall_now().ms - d->expire_after_ms;
}

static void expiring_state_free(void *arg)
{
    (void)arg; /* the state is the db itself */
}

static const char *expiring_name(void *arg)
{
    (void)arg;
    return "lapse.expiring";
}

/* Gives the family opt->expiring_cf (names[i]) its own options, with the
 * compaction filter that expires it. 0 or LAPSE_ENOMEM. */
static int expiring_setup(db *d, const db_options *opt, const char **names, size_t n,
                          const rocksdb_options_t **cfopts)
{
    if (opt == NULL || opt->expiring_cf == NULL) {
        return 0;
    }
    int i = name_index(names, n, opt->expiring_cf);
    if (i < 0) {
        return 0;
    }
    d->expire_after_ms = opt->expire_after_ms;
    if ((d->expiring_opts = rocksdb_options_create_copy(d->opts)) == NULL ||
        (d->expiring_filter = rocksdb_compactionfilter_create(d, expiring_state_free, expiring_drop,
                                                              expiring_name)) == NULL) {
        return LAPSE_ENOMEM;
    }
    rocksdb_options_set_compaction_filter(d->expiring_opts, d->expiring_filter);
    cfopts[i] = d->expiring_opts;
    return 0;
}

int db_open(db **out, const char *path, const db_options *opt, const char *const *cf_names,
            size_t ncf, char *err, size_t errlen)
{
    int rv;
    char **existing = NULL;
    size_t nexisting = 0;
    const char **names = NULL;
    const rocksdb_options_t **cfopts = NULL;
    db *d = NULL;

    *out = NULL;
    if (path == NULL || (ncf > 0 && cf_names == NULL) || ncf > DB_MAX_CF) {
        set_err(err, errlen, "db_open: bad arguments");
        return LAPSE_EINVAL;
    }
    for (size_t i = 0; i < ncf; i++) {
        if (cf_names[i] == NULL || cf_names[i][0] == 0) {
            set_err(err, errlen, "db_open: empty column family name");
            return LAPSE_EINVAL;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(cf_names[i], cf_names[j]) == 0) {
                set_err(err, errlen, "db_open: duplicate column family name");
                return LAPSE_EINVAL;
            }
        }
    }
    if ((d = calloc(1, sizeof(*d))) == NULL) {
        rv = LAPSE_ENOMEM;
        goto fail;
    }
    d->ncf = ncf;
    if ((rv = tune(d, opt)) != 0) {
        goto fail;
    }

    /* RocksDB must be opened with every column family it holds: list them
     * (an error here means a fresh directory, which has only "default"). */
    {
        char *e = NULL;
        existing = rocksdb_list_column_families(d->opts, path, &nexisting, &e);
        if (e != NULL) {
            /* The list is allocated even on error (empty): free it too. */
            rocksdb_free(e);
            if (existing != NULL) {
                rocksdb_list_column_families_destroy(existing, nexisting);
            }
            existing = NULL;
            nexisting = 0;
        }
    }

    /* The open list: the caller's names first (so cf i is handle i), then
     * "default" if absent, then any other existing column family. */
    size_t cap = ncf + 1 + nexisting;
    names = calloc(cap, sizeof(*names));
    cfopts = calloc(cap, sizeof(*cfopts));
    if (names == NULL || cfopts == NULL) {
        rv = LAPSE_ENOMEM;
        goto fail;
    }
    size_t n = 0;
    for (size_t i = 0; i < ncf; i++) {
        names[n++] = cf_names[i];
    }
    if (name_index(names, n, "default") < 0) {
        names[n++] = "default";
    }
    for (size_t i = 0; i < nexisting; i++) {
        if (name_index(names, n, existing[i]) < 0) {
            names[n++] = existing[i];
        }
    }
    for (size_t i = 0; i < n; i++) {
        cfopts[i] = d->opts;
    }
    if ((rv = expiring_setup(d, opt, names, n, cfopts)) != 0) {
        goto fail;
    }
    if ((d->cfh = calloc(n, sizeof(*d->cfh))) == NULL) {
        rv = LAPSE_ENOMEM;
        goto fail;
    }
    {
        char *e = NULL;
        d->rdb = rocksdb_open_column_families(d->opts, path, (int)n, names, cfopts, d->cfh, &e);
        if (e != NULL || d->rdb == NULL) {
            rv = rerr(e, "open", err, errlen);
            d->rdb = NULL;
            memset(d->cfh, 0, n * sizeof(*d->cfh));
            goto fail;
        }
    }
    d->ncfh = n;

    free(names);
    free(cfopts);
    if (existing != NULL) {
        rocksdb_list_column_families_destroy(existing, nexisting);
    }
    *out = d;
    return 0;

fail:
    if (rv == LAPSE_ENOMEM) {
        set_err(err, errlen, "db_open: out of memory");
    }
    free(names);
    free(cfopts);
    if (existing != NULL) {
        rocksdb_list_column_families_destroy(existing, nexisting);
    }
    db_close(d);
    return rv;
}

void db_close(db *d)
{
    if (d == NULL) {
        return;
    }
    if (d->cfh != NULL) {
        for (size_t i = 0; i < d->ncfh; i++) {
            if (d->cfh[i] != NULL) {
                rocksdb_column_family_handle_destroy(d->cfh[i]);
            }
        }
    }
    if (d->rdb != NULL) {
        rocksdb_close(d->rdb);
    }
    free(d->cfh);
    if (d->wopts_sync != NULL) {
        rocksdb_writeoptions_destroy(d->wopts_sync);
    }
    if (d->wopts != NULL) {
        rocksdb_writeoptions_destroy(d->wopts);
    }
    if (d->ropts != NULL) {
        rocksdb_readoptions_destroy(d->ropts);
    }
    if (d->opts != NULL) {
        rocksdb_options_destroy(d->opts);
    }
    if (d->expiring_opts != NULL) {
        rocksdb_options_destroy(d->expiring_opts);
    }
    if (d->expiring_filter != NULL) {
        rocksdb_compactionfilter_destroy(d->expiring_filter);
    }
    if (d->bbto != NULL) {
        rocksdb_block_based_options_destroy(d->bbto);
    }
    if (d->cache != NULL) {
        rocksdb_cache_destroy(d->cache);
    }
    free(d);
}

/* ------------------------------------------------------------------------ */
/* Reads                                                                     */
/* ------------------------------------------------------------------------ */

int db_get(db *d, int cf, const void *key, size_t klen, buf *val, int *found, char *err,
           size_t errlen)
{
    rocksdb_column_family_handle_t *h = cf_handle(d, cf);
    buf_clear(val);
    *found = 0;
    if (h == NULL) {
        set_err(err, errlen, "db_get: bad column family");
        return LAPSE_EINVAL;
    }
    char *e = NULL;
    rocksdb_pinnableslice_t *ps = rocksdb_get_pinned_cf(d->rdb, d->ropts, h, key, klen, &e);
    if (e != NULL) {
        if (ps != NULL) {
            rocksdb_pinnableslice_destroy(ps);
        }
        return rerr(e, "get", err, errlen);
    }
    if (ps == NULL) {
        return 0;
    }
    size_t vlen = 0;
    const char *v = rocksdb_pinnableslice_value(ps, &vlen);
    int rv = buf_append(val, v, vlen);
    rocksdb_pinnableslice_destroy(ps);
    if (rv != 0) {
        set_err(err, errlen, "db_get: out of memory");
        return rv;
    }
    *found = 1;
    return 0;
}

int db_multi_get(db *d, int cf, size_t n, const void *const *keys, const size_t *klens, buf *vals,
                 int *found, char *err, size_t errlen)
{
    rocksdb_column_family_handle_t *h = cf_handle(d, cf);
    if (h == NULL) {
        set_err(err, errlen, "db_multi_get: bad column family");
        return LAPSE_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        buf_clear(&vals[i]);
        found[i] = 0;
    }
    if (n == 0) {
        return 0;
    }
    int rv = 0;
    /* The batched MultiGet (one superversion, keys sorted and looked up
     * block by block) with pinned values: no std::string copy per value. */
    rocksdb_pinnableslice_t **values = calloc(n, sizeof(*values));
    char **errs = calloc(n, sizeof(*errs));
    if (values == NULL || errs == NULL) {
        free(values);
        free(errs);
        set_err(err, errlen, "db_multi_get: out of memory");
        return LAPSE_ENOMEM;
    }
    rocksdb_batched_multi_get_cf(d->rdb, d->ropts, h, n, (const char *const *)keys, klens, values,
                                 errs, 0);
    /* Every returned value and error string is freed here, whatever happens. */
    for (size_t i = 0; i < n; i++) {
        if (errs[i] != NULL) {
            if (rv == 0) {
                rv = rerr(errs[i], "multi_get", err, errlen);
            } else {
                rocksdb_free(errs[i]);
            }
        } else if (values[i] != NULL && rv == 0) {
            size_t vlen = 0;
            const char *v = rocksdb_pinnableslice_value(values[i], &vlen);
            if (buf_append(&vals[i], v, vlen) != 0) {
                rv = LAPSE_ENOMEM;
                set_err(err, errlen, "db_multi_get: out of memory");
            } else {
                found[i] = 1;
            }
        }
        if (values[i] != NULL) {
            rocksdb_pinnableslice_destroy(values[i]);
        }
    }
    free(values);
    free(errs);
    return rv;
}

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
        buf_append_byte(&b->log, (uint8_t)code) != 0 || buf_append_byte(&b->log, (uint8_t)cf) != 0 ||
        buf_append_u32be(&b->log, (uint32_t)l1) != 0 || buf_append(&b->log, k1, l1) != 0 ||
        (two && (buf_append_u32be(&b->log, (uint32_t)l2) != 0 || buf_append(&b->log, k2, l2) != 0))) {
        b->log_oom = 1;
    }
}

void db_batch_log_start(db_batch *b)
{
    b->logging = 1;
    b->log_oom = 0;
    buf_clear(&b->log);
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

int db_batch_replay(db_batch *b, db *d, const uint8_t *p, size_t len, size_t *ops)
{
    size_t pos = 0, n = 0;
    while (pos < len) {
        if (len - pos < 2) {
            return LAPSE_ECORRUPT;
        }
        int code = p[pos], cf = p[pos + 1];
        pos += 2;
        const uint8_t *k1, *k2;
        size_t l1, l2;
        if ((size_t)cf >= d->ncf || log_slice(p, len, &pos, &k1, &l1) != 0 ||
            (code != LOG_DELETE && log_slice(p, len, &pos, &k2, &l2) != 0)) {
            return LAPSE_ECORRUPT;
        }
        switch (code) {
        case LOG_PUT:
            db_batch_put(b, d, cf, k1, l1, k2, l2);
            break;
        case LOG_DELETE:
            db_batch_delete(b, d, cf, k1, l1);
            break;
        case LOG_DELETE_RANGE:
            db_batch_delete_range(b, d, cf, k1, l1, k2, l2);
            break;
        default:
            return LAPSE_ECORRUPT;
        }
        n++;
    }
    if (ops != NULL) {
        *ops = n;
    }
    return 0;
}

void db_batch_put(db_batch *b, db *d, int cf, const void *key, size_t klen, const void *val,
                  size_t vlen)
{
    rocksdb_column_family_handle_t *h = cf_handle(d, cf);
    if (h != NULL) {
        rocksdb_writebatch_put_cf(b->wb, h, key, klen, val, vlen);
        log_op(b, LOG_PUT, cf, key, klen, val, vlen, 1);
    }
}

void db_batch_delete(db_batch *b, db *d, int cf, const void *key, size_t klen)
{
    rocksdb_column_family_handle_t *h = cf_handle(d, cf);
    if (h != NULL) {
        rocksdb_writebatch_delete_cf(b->wb, h, key, klen);
        log_op(b, LOG_DELETE, cf, key, klen, NULL, 0, 0);
    }
}

void db_batch_delete_range(db_batch *b, db *d, int cf, const void *start, size_t slen,
                           const void *end, size_t elen)
{
    rocksdb_column_family_handle_t *h = cf_handle(d, cf);
    if (h != NULL) {
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
    rocksdb_write(d->rdb, sync ? d->wopts_sync : d->wopts, b->wb, &e);
    if (e != NULL) {
        return rerr(e, "write", err, errlen);
    }
    return 0;
}

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
    rocksdb_column_family_handle_t *h = cf_handle(d, cf);
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
        return rerr(e, "iterator", err, errlen);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Maintenance                                                               */
/* ------------------------------------------------------------------------ */

int db_compact_range(db *d, int cf, const void *start, size_t slen, const void *end, size_t elen)
{
    rocksdb_column_family_handle_t *h = cf_handle(d, cf);
    if (h == NULL) {
        return LAPSE_EINVAL;
    }
    rocksdb_compact_range_cf(d->rdb, h, start, start != NULL ? slen : 0, end,
                             end != NULL ? elen : 0);
    return 0;
}
