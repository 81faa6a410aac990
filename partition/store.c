/*
 * store.c: a node's item store over one RocksDB (see store.h). The on-disk
 * layout is documented in docs/storage-format.md:
 *
 *   items:  u32be table id | u32be partition | enc(pk) [| enc(sk)] -> item_encode(item)
 *   meta:   name bytes -> value bytes
 *   expiry: u32be table id | u32be partition | u64be due second | enc(pk) [| enc(sk)] -> ""
 *   lsi, outbox, repl, gsi, stream: docs/replication.md
 *
 * Point writes (put, delete, update, their conditions and retried forms)
 * are in store_write.c, batch writes in store_batch.c, the writes an item
 * change derives (expiry index, LSI entries, outbox record) in
 * store_derived.c, queries, scans and counts in store_query.c and
 * store_index.c, the key layouts in itemkey.c, the sweep and backfill of the
 * expiry index in expiry.c, the replication reads and the apply in
 * outbox.c, apply.c and stream.c, and what they all share (locks, sweep
 * cursors, the item read, repl counters) in store_int.c. This file opens
 * and closes the store, and holds its point reads, table drops and
 * metadata: it is the top of partition/'s call order (it calls the
 * expiry, outbox and commit files to close and drop; none calls it).
 *
 * Reads take no lock: RocksDB reads are consistent per key and iterators
 * see a point-in-time view.
 */
#include "store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "itemkey.h"
#include "request.h"
#include "store_int.h"
#include "../common/ttl.h"

static const char *const cf_names[CF_COUNT] = {"items", "meta", "expiry", "lsi",    "outbox",
                                               "repl",  "gsi",  "stream", "replog", "requests"};

static int oom(char *err, size_t errlen)
{
    return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
}

/* ======================================================================== */
/* Open and close                                                           */
/* ======================================================================== */

/* mkdir -p. Returns 0 or -1 with errno. */
static int mkdirs(const char *path)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == 0) {
            char c = tmp[i];
            tmp[i] = 0;
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
                return -1;
            }
            tmp[i] = c;
        }
    }
    return 0;
}

/* Sets st->missing_marks when any copy here misses records (a REPL_MISSING
 * key of any table: apply.h): one pass over the repl family, which holds
 * a few small counters per partition. */
static int load_missing_marks(store *st, char *err, size_t errlen)
{
    db_iter *it = NULL;
    if (db_iter_new(&it, st->db, CF_REPL, NULL, 0, NULL, 0) != 0) {
        return oom(err, errlen);
    }
    int found = 0;
    for (db_iter_seek_first(it); db_iter_valid(it) && !found; db_iter_next(it)) {
        size_t klen = 0;
        const uint8_t *k = db_iter_key(it, &klen);
        found = klen > 4 && k[4] == REPL_MISSING;
    }
    int rv = db_iter_status(it, err, errlen);
    db_iter_free(it);
    atomic_store(&st->missing_marks, found);
    return rv;
}

int store_open(store **out, const char *path, char *err, size_t errlen)
{
    int rv;
    *out = NULL;
    store *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return oom(err, errlen);
    }
    st->replog_retain = REPLOG_RETAIN_DEFAULT;
    for (; st->locks_inited < STORE_LOCK_STRIPES; st->locks_inited++) {
        if (pthread_mutex_init(&st->locks[st->locks_inited], NULL) != 0) {
            rv = errf(LAPSE_ENOMEM, err, errlen, "cannot initialize store locks");
            goto fail;
        }
    }
    if (keyset_init(&st->undeletable) != 0) {
        rv = errf(LAPSE_ENOMEM, err, errlen, "cannot initialize store locks");
        goto fail;
    }
    st->undeletable_inited = 1;
    if (pthread_mutex_init(&st->scratch_lock, NULL) != 0) {
        rv = errf(LAPSE_ENOMEM, err, errlen, "cannot initialize store locks");
        goto fail;
    }
    st->scratch_lock_inited = 1;
    for (; st->apply_locks_inited < STORE_LOCK_STRIPES; st->apply_locks_inited++) {
        if (pthread_mutex_init(&st->apply_locks[st->apply_locks_inited], NULL) != 0) {
            rv = errf(LAPSE_ENOMEM, err, errlen, "cannot initialize store locks");
            goto fail;
        }
    }
    if (pthread_mutex_init(&st->ack_lock, NULL) != 0) {
        rv = errf(LAPSE_ENOMEM, err, errlen, "cannot initialize store locks");
        goto fail;
    }
    st->ack_lock_inited = 1;
    if (mkdirs(path) != 0) {
        rv = errf(LAPSE_EIO, err, errlen, "cannot create %s: %s", path, strerror(errno));
        goto fail;
    }
    const char *const hinted[] = {cf_names[CF_REPLOG], cf_names[CF_REQUESTS]};
    db_options o = {.block_cache_bytes = 0,
                    .create_if_missing = 1,
                    .expiring_cf = cf_names[CF_REQUESTS],
                    .expire_after_ms = REQUEST_KEEP_MS,
                    .hinted_cfs = hinted,
                    .nhinted = sizeof(hinted) / sizeof(hinted[0]),
                    .hint_prefix_len = STORE_HINT_BYTES};
    if ((rv = db_open(&st->db, path, &o, cf_names, CF_COUNT, err, errlen)) != 0 ||
        (rv = load_missing_marks(st, err, errlen)) != 0) {
        goto fail;
    }
    *out = st;
    return 0;
fail:
    store_close(st);
    return rv;
}

void store_close(store *st)
{
    if (st == NULL) {
        return;
    }
    db_close(st->db);
    for (int i = 0; i < STORE_LOCK_STRIPES; i++) {
        buf_fini(&st->cursors[i].key);
    }
    if (st->undeletable_inited) {
        keyset_fini(&st->undeletable);
    }
    if (st->scratch_lock_inited) {
        expiry_scratch_release(st);
        pthread_mutex_destroy(&st->scratch_lock);
    }
    if (st->ack_lock_inited) {
        pthread_mutex_destroy(&st->ack_lock);
    }
    for (int i = st->apply_locks_inited - 1; i >= 0; i--) {
        pthread_mutex_destroy(&st->apply_locks[i]);
    }
    for (int i = st->locks_inited - 1; i >= 0; i--) {
        pthread_mutex_destroy(&st->locks[i]);
    }
    free(st);
}

/* ======================================================================== */
/* Reads                                                                    */
/* ======================================================================== */

int store_get(store *st, const table_schema *t, const item *key, item **out, char *err,
              size_t errlen)
{
    int rv;
    uint32_t part;
    buf k, scratch;
    buf_init(&k);
    buf_init(&scratch);
    *out = NULL;
    if ((rv = schema_check_item(t, key, 1, err, errlen)) != 0) {
        goto out;
    }
    if ((rv = itemkey_of_item(&k, t, key, &part)) != 0) {
        errf(rv, err, errlen, "cannot encode the key (%s)", lapse_strerror(rv));
        goto out;
    }
    rv = store_read_item(st, &k, &scratch, out, err, errlen);
    store_settle(st, t, part);
out:
    buf_fini(&k);
    buf_fini(&scratch);
    return rv;
}

/* ======================================================================== */
/* Tables and metadata                                                      */
/* ======================================================================== */

/* The families keyed by table id first, besides expiry (expiry.c). */
static const int table_cfs[] = {CF_ITEMS, CF_LSI,    CF_OUTBOX, CF_REPL,
                                CF_GSI,   CF_STREAM, CF_REPLOG, CF_REQUESTS};
#define NTABLE_CFS (sizeof(table_cfs) / sizeof(table_cfs[0]))

int store_drop_table(store *st, uint32_t table_id, char *err, size_t errlen)
{
    db_batch *b = db_batch_new();
    if (b == NULL) {
        return oom(err, errlen);
    }
    /* Every family keyed by table id joins this batch: items, LSI entries,
     * outbox, counters (source and destination), GSI entries, stream
     * records, the replication log, the expiry index and the backfill
     * progress. */
    store_table_delete(st, b, table_id, table_cfs, NTABLE_CFS);
    if (expiry_drop_into(st, b, table_id) != 0) {
        db_batch_free(b);
        return oom(err, errlen);
    }
    int rv = db_write(st->db, b, 0, err, errlen);
    db_batch_free(b);
    if (rv != 0) {
        return rv;
    }
    outbox_forget_table(st, table_id);
    /* The range tombstones hide the data at once; compaction reclaims it. */
    expiry_compact_table(st, table_id);
    return store_table_compact(st, table_id, table_cfs, NTABLE_CFS);
}

void store_set_expiry_hook(store *st, store_expiry_hook fn, void *arg)
{
    st->hook = fn;
    st->hook_arg = arg;
}

int store_meta_get(store *st, const char *name, buf *val, int *found, char *err, size_t errlen)
{
    return db_get(st->db, CF_META, name, strlen(name), val, found, err, errlen);
}

int store_meta_put(store *st, const char *name, const void *val, size_t len, int sync, char *err,
                   size_t errlen)
{
    db_batch *b = db_batch_new();
    if (b == NULL) {
        return oom(err, errlen);
    }
    db_batch_put(b, st->db, CF_META, name, strlen(name), val, len);
    int rv = db_write(st->db, b, sync, err, errlen);
    db_batch_free(b);
    return rv;
}
