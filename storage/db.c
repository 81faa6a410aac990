/*
 * db.c: the RocksDB wrapper (see db.h): open, close, point reads and
 * maintenance. Write batches are in db_batch.c, snapshots and iterators in
 * db_iter.c; the three share db_int.h. storage/ is the only includer of
 * <rocksdb/c.h>.
 *
 * Error handling: every RocksDB call that reports errors gets a fresh
 * `char *e = NULL`; a non-NULL result is copied into the caller's buffer by
 * db_rerr(), which frees it at once. Nothing keeps or reuses an error string.
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
#include "db_int.h"

#define DEFAULT_BLOCK_CACHE_BYTES ((size_t)64 << 20)
#define WRITE_BUFFER_BYTES ((size_t)64 << 20)
#define DB_WRITE_BUFFER_BYTES ((size_t)256 << 20) /* all memtables together */
#define BLOOM_BITS_PER_KEY 10.0

int db_rerr(char *e, const char *what, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0) {
        snprintf(err, errlen, "%s: %s", what, e != NULL ? e : "unknown RocksDB error");
    }
    rocksdb_free(e);
    return LAPSE_EIO;
}

void db_set_err(char *err, size_t errlen, const char *msg)
{
    if (err != NULL && errlen > 0) {
        snprintf(err, errlen, "%s", msg);
    }
}

rocksdb_column_family_handle_t *db_cf_handle(const db *d, int cf)
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
    /* Memtable inserts by one thread per write group: the group's leader
     * inserts every batch itself, which is what lets the hinted families'
     * hints (db_options) work, and on two cores the other writers' threads
     * have no idle core to insert on anyway; nor do they spin waiting for
     * their turn. Measured in docs/benchmarks.md ("Insert hints"). */
    rocksdb_options_set_allow_concurrent_memtable_write(d->opts, 0);
    rocksdb_options_set_enable_write_thread_adaptive_yield(d->opts, 0);

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

/* Gives each family of opt->hinted_cfs its own options, with insert hints
 * by prefixes of opt->hint_prefix_len bytes (RocksDB's C API reaches that
 * option only through an options string). 0, LAPSE_ENOMEM, or LAPSE_EIO
 * with RocksDB's message. */
static int hinted_setup(db *d, const db_options *opt, const char **names,
                        const rocksdb_options_t **cfopts, char *err, size_t errlen)
{
    if (opt == NULL || opt->hint_prefix_len == 0) {
        return 0;
    }
    char spec[96];
    snprintf(spec, sizeof(spec),
             "memtable_insert_with_hint_prefix_extractor=rocksdb.FixedPrefix.%zu",
             opt->hint_prefix_len);
    for (size_t j = 0; j < opt->nhinted; j++) {
        int i = name_index(names, d->ncf, opt->hinted_cfs[j]);
        if (i < 0 || d->hinted_opts[i] != NULL) {
            continue; /* not one of the caller's families, or named twice */
        }
        if ((d->hinted_opts[i] = rocksdb_options_create()) == NULL) {
            return LAPSE_ENOMEM;
        }
        char *e = NULL;
        rocksdb_get_options_from_string(cfopts[i], spec, d->hinted_opts[i], &e);
        if (e != NULL) {
            return db_rerr(e, "open: insert hints", err, errlen);
        }
        cfopts[i] = d->hinted_opts[i];
    }
    d->hint_prefix_len = opt->hint_prefix_len;
    return 0;
}

/* Opens the database at path with the families names[0..n) and their
 * options, into *out and h[0..n). 0, or LAPSE_EIO with RocksDB's message
 * (*out NULL, h zeroed). */
static int open_families(const db *d, const char *path, const char **names,
                         const rocksdb_options_t **cfopts, size_t n, rocksdb_t **out,
                         rocksdb_column_family_handle_t **h, char *err, size_t errlen)
{
    char *e = NULL;
    *out = rocksdb_open_column_families(d->opts, path, (int)n, names, cfopts, h, &e);
    if (e != NULL || *out == NULL) {
        *out = NULL;
        memset(h, 0, n * sizeof(*h));
        return db_rerr(e, "open", err, errlen);
    }
    return 0;
}

/* Opens the existing database at path once without insert hints, and
 * closes it: RocksDB replays the write-ahead log into memtables and
 * flushes them, so a log written before db_options.hinted_cfs's rule held
 * (an older build's range deletions) never reaches a hinted memtable. One
 * more open of a directory at every start is its cost. 0 or as db_open. */
static int replay_unhinted(const db *d, const char *path, const char **names,
                           const rocksdb_options_t **cfopts, size_t n, char *err, size_t errlen)
{
    rocksdb_column_family_handle_t **h = calloc(n, sizeof(*h));
    if (h == NULL) {
        return LAPSE_ENOMEM;
    }
    rocksdb_t *r = NULL;
    int rv = open_families(d, path, names, cfopts, n, &r, h, err, errlen);
    if (rv == 0) {
        for (size_t i = 0; i < n; i++) {
            rocksdb_column_family_handle_destroy(h[i]);
        }
        rocksdb_close(r);
    }
    free(h);
    return rv;
}

/* db_open's arguments: a path, at most DB_MAX_CF non-empty distinct
 * column family names. 0 or LAPSE_EINVAL with err. */
static int check_args(const char *path, const char *const *cf_names, size_t ncf, char *err,
                      size_t errlen)
{
    if (path == NULL || (ncf > 0 && cf_names == NULL) || ncf > DB_MAX_CF) {
        db_set_err(err, errlen, "db_open: bad arguments");
        return LAPSE_EINVAL;
    }
    for (size_t i = 0; i < ncf; i++) {
        if (cf_names[i] == NULL || cf_names[i][0] == 0) {
            db_set_err(err, errlen, "db_open: empty column family name");
            return LAPSE_EINVAL;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(cf_names[i], cf_names[j]) == 0) {
                db_set_err(err, errlen, "db_open: duplicate column family name");
                return LAPSE_EINVAL;
            }
        }
    }
    return 0;
}

/* The column families the store at path holds: RocksDB must be opened with
 * every one. NULL with *n 0 on an error, which means a fresh directory
 * (it has only "default"). The caller frees the list with
 * rocksdb_list_column_families_destroy. */
static char **list_existing(db *d, const char *path, size_t *n)
{
    char *e = NULL;
    char **existing = rocksdb_list_column_families(d->opts, path, n, &e);
    if (e != NULL) {
        /* The list is allocated even on error (empty): free it too. */
        rocksdb_free(e);
        if (existing != NULL) {
            rocksdb_list_column_families_destroy(existing, *n);
        }
        existing = NULL;
        *n = 0;
    }
    return existing;
}

/* The open list into *names and *cfopts (caller frees both, also on
 * error), *n entries: the caller's names first (so cf i is handle i), then
 * "default" if absent, then any other existing column family, each with
 * d's options. The names are borrowed from cf_names and existing. 0 or
 * LAPSE_ENOMEM. */
static int open_list(db *d, const char *const *cf_names, size_t ncf, char **existing,
                     size_t nexisting, const char ***names, const rocksdb_options_t ***cfopts,
                     size_t *n)
{
    size_t cap = ncf + 1 + nexisting;
    *names = calloc(cap, sizeof(**names));
    *cfopts = calloc(cap, sizeof(**cfopts));
    if (*names == NULL || *cfopts == NULL) {
        return LAPSE_ENOMEM;
    }
    const char **nm = *names;
    *n = 0;
    for (size_t i = 0; i < ncf; i++) {
        nm[(*n)++] = cf_names[i];
    }
    if (name_index(nm, *n, "default") < 0) {
        nm[(*n)++] = "default";
    }
    for (size_t i = 0; i < nexisting; i++) {
        if (name_index(nm, *n, existing[i]) < 0) {
            nm[(*n)++] = existing[i];
        }
    }
    for (size_t i = 0; i < *n; i++) {
        (*cfopts)[i] = d->opts;
    }
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
    if ((rv = check_args(path, cf_names, ncf, err, errlen)) != 0) {
        return rv;
    }
    if ((d = calloc(1, sizeof(*d))) == NULL) {
        rv = LAPSE_ENOMEM;
        goto fail;
    }
    d->ncf = ncf;
    if ((rv = tune(d, opt)) != 0) {
        goto fail;
    }

    existing = list_existing(d, path, &nexisting);
    size_t n = 0;
    if ((rv = open_list(d, cf_names, ncf, existing, nexisting, &names, &cfopts, &n)) != 0) {
        goto fail;
    }
    if ((rv = expiring_setup(d, opt, names, n, cfopts)) != 0) {
        goto fail;
    }
    if (existing != NULL && opt != NULL && opt->nhinted > 0 &&
        (rv = replay_unhinted(d, path, names, cfopts, n, err, errlen)) != 0) {
        goto fail;
    }
    if ((rv = hinted_setup(d, opt, names, cfopts, err, errlen)) != 0) {
        goto fail;
    }
    if ((d->cfh = calloc(n, sizeof(*d->cfh))) == NULL) {
        rv = LAPSE_ENOMEM;
        goto fail;
    }
    if ((rv = open_families(d, path, names, cfopts, n, &d->rdb, d->cfh, err, errlen)) != 0) {
        goto fail;
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
        db_set_err(err, errlen, "db_open: out of memory");
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
    for (size_t i = 0; i < DB_MAX_CF; i++) {
        if (d->hinted_opts[i] != NULL) {
            rocksdb_options_destroy(d->hinted_opts[i]);
        }
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
    rocksdb_column_family_handle_t *h = db_cf_handle(d, cf);
    buf_clear(val);
    *found = 0;
    if (h == NULL) {
        db_set_err(err, errlen, "db_get: bad column family");
        return LAPSE_EINVAL;
    }
    char *e = NULL;
    rocksdb_pinnableslice_t *ps = rocksdb_get_pinned_cf(d->rdb, d->ropts, h, key, klen, &e);
    if (e != NULL) {
        if (ps != NULL) {
            rocksdb_pinnableslice_destroy(ps);
        }
        return db_rerr(e, "get", err, errlen);
    }
    if (ps == NULL) {
        return 0;
    }
    size_t vlen = 0;
    const char *v = rocksdb_pinnableslice_value(ps, &vlen);
    int rv = buf_append(val, v, vlen);
    rocksdb_pinnableslice_destroy(ps);
    if (rv != 0) {
        db_set_err(err, errlen, "db_get: out of memory");
        return rv;
    }
    *found = 1;
    return 0;
}

int db_multi_get(db *d, int cf, size_t n, const void *const *keys, const size_t *klens, buf *vals,
                 int *found, char *err, size_t errlen)
{
    rocksdb_column_family_handle_t *h = db_cf_handle(d, cf);
    if (h == NULL) {
        db_set_err(err, errlen, "db_multi_get: bad column family");
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
        db_set_err(err, errlen, "db_multi_get: out of memory");
        return LAPSE_ENOMEM;
    }
    rocksdb_batched_multi_get_cf(d->rdb, d->ropts, h, n, (const char *const *)keys, klens, values,
                                 errs, 0);
    /* Every returned value and error string is freed here, whatever happens. */
    for (size_t i = 0; i < n; i++) {
        if (errs[i] != NULL) {
            if (rv == 0) {
                rv = db_rerr(errs[i], "multi_get", err, errlen);
            } else {
                rocksdb_free(errs[i]);
            }
        } else if (values[i] != NULL && rv == 0) {
            size_t vlen = 0;
            const char *v = rocksdb_pinnableslice_value(values[i], &vlen);
            if (buf_append(&vals[i], v, vlen) != 0) {
                rv = LAPSE_ENOMEM;
                db_set_err(err, errlen, "db_multi_get: out of memory");
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
/* Maintenance                                                               */
/* ------------------------------------------------------------------------ */

int db_compact_range(db *d, int cf, const void *start, size_t slen, const void *end, size_t elen)
{
    rocksdb_column_family_handle_t *h = db_cf_handle(d, cf);
    if (h == NULL) {
        return LAPSE_EINVAL;
    }
    rocksdb_compact_range_cf(d->rdb, h, start, start != NULL ? slen : 0, end,
                             end != NULL ? elen : 0);
    return 0;
}

int db_approx_size(db *d, int cf, const void *start, size_t slen, const void *end, size_t elen,
                   uint64_t *bytes, char *err, size_t errlen)
{
    rocksdb_column_family_handle_t *h = db_cf_handle(d, cf);
    *bytes = 0;
    if (h == NULL || start == NULL || end == NULL) {
        db_set_err(err, errlen, "db_approx_size: bad column family or range");
        return LAPSE_EINVAL;
    }
    const char *s = start, *l = end;
    uint64_t size = 0;
    char *e = NULL;
    rocksdb_approximate_sizes_cf(d->rdb, h, 1, &s, &slen, &l, &elen, &size, &e);
    if (e != NULL) {
        return db_rerr(e, "approximate sizes", err, errlen);
    }
    *bytes = size;
    return 0;
}
