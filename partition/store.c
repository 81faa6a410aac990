/*
 * store.c: a node's item store over one RocksDB (see store.h). The on-disk
 * layout is documented in docs/storage-format.md:
 *
 *   items: u32be table id | u32be partition | enc(pk) [| enc(sk)] -> item_encode(item)
 *   meta:  name bytes -> value bytes
 *
 * Queries, scans and counts are in store_query.c, the key layout in
 * itemkey.c.
 *
 * Writes: the caller's thread takes the partition's stripe lock, reads the
 * current item when a condition (or the old item) is needed, and applies one
 * WriteBatch before unlocking, so the read-check-write of conditional writes
 * is atomic per partition. Later issues add the TTL expiry index and the
 * outbox to the same batch. Reads take no lock: RocksDB reads are consistent
 * per key and iterators see a point-in-time view.
 */
#include "store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "itemkey.h"
#include "store_int.h"

static const char *const cf_names[CF_COUNT] = {"items", "meta"};

int store_errf(int code, char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

static int oom(char *err, size_t errlen)
{
    return store_errf(LAPSE_ENOMEM, err, errlen, "out of memory");
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

int store_open(store **out, const char *path, char *err, size_t errlen)
{
    int rv;
    *out = NULL;
    store *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return oom(err, errlen);
    }
    for (; st->locks_inited < STORE_LOCK_STRIPES; st->locks_inited++) {
        if (pthread_mutex_init(&st->locks[st->locks_inited], NULL) != 0) {
            rv = store_errf(LAPSE_ENOMEM, err, errlen, "cannot initialize store locks");
            goto fail;
        }
    }
    if (mkdirs(path) != 0) {
        rv = store_errf(LAPSE_EIO, err, errlen, "cannot create %s: %s", path, strerror(errno));
        goto fail;
    }
    db_options o = {.block_cache_bytes = 0, .create_if_missing = 1};
    if ((rv = db_open(&st->db, path, &o, cf_names, CF_COUNT, err, errlen)) != 0) {
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
    for (int i = st->locks_inited - 1; i >= 0; i--) {
        pthread_mutex_destroy(&st->locks[i]);
    }
    free(st);
}

/* ======================================================================== */
/* Locks                                                                    */
/* ======================================================================== */

static pthread_mutex_t *stripe(store *st, uint32_t table_id, uint32_t part)
{
    /* Partitions of one table map to distinct stripes (low bits of part
     * survive the xor), tables are spread by the multiplicative hash. */
    uint32_t h = (table_id * 0x9E3779B1u) ^ part;
    h ^= h >> 16;
    return &st->locks[h & (STORE_LOCK_STRIPES - 1)];
}

/* ======================================================================== */
/* Conditions                                                               */
/* ======================================================================== */

static int cond_validate(const store_cond *c, char *err, size_t errlen)
{
    if (c == NULL || c->kind == STORE_COND_NONE) {
        return 0;
    }
    if (c->kind != STORE_COND_NOT_EXISTS && c->kind != STORE_COND_EXISTS &&
        c->kind != STORE_COND_EQUALS) {
        return store_errf(LAPSE_EINVAL, err, errlen, "unknown condition kind %d", (int)c->kind);
    }
    if (c->attr == NULL || c->attr[0] == 0) {
        return store_errf(LAPSE_EINVAL, err, errlen, "condition without an attribute name");
    }
    if (c->kind == STORE_COND_EQUALS && c->value == NULL) {
        return store_errf(LAPSE_EINVAL, err, errlen, "equality condition without a value");
    }
    return 0;
}

static int cond_needs_read(const store_cond *c)
{
    return c != NULL && c->kind != STORE_COND_NONE;
}

/* Evaluates c against cur (NULL: no item). */
static int cond_holds(const store_cond *c, const item *cur)
{
    if (c == NULL || c->kind == STORE_COND_NONE) {
        return 1;
    }
    const attr_value *v = cur != NULL ? item_get(cur, c->attr) : NULL;
    switch (c->kind) {
    case STORE_COND_NOT_EXISTS:
        return v == NULL;
    case STORE_COND_EXISTS:
        return v != NULL;
    case STORE_COND_EQUALS:
        return v != NULL && item_value_eq(v, c->value);
    default:
        return 0;
    }
}

static int cond_failed(const store_cond *c, char *err, size_t errlen)
{
    static const char *const what[] = {"", "attribute_not_exists", "attribute_exists", "equals"};
    return store_errf(LAPSE_ECONDITION, err, errlen, "the conditional request failed: %s(%s)",
                      what[c->kind <= STORE_COND_EQUALS ? c->kind : 0], c->attr);
}

/* Reads and decodes the item under key; *out is NULL when absent. */
static int read_item(store *st, const buf *key, buf *scratch, item **out, char *err, size_t errlen)
{
    int found = 0, rv;
    *out = NULL;
    if ((rv = db_get(st->db, CF_ITEMS, key->data, key->len, scratch, &found, err, errlen)) != 0) {
        return rv;
    }
    if (!found) {
        return 0;
    }
    if ((rv = item_decode(scratch->data, scratch->len, out)) != 0) {
        return store_errf(rv, err, errlen, "stored item failed to decode (%s)", lapse_strerror(rv));
    }
    return 0;
}

/* Reads the item under key into *cur (NULL when absent; the caller frees it)
 * and checks c against it. Returns 0, LAPSE_ECONDITION (with *cur set) or the
 * read error. REQUIRES: the key's stripe lock is held. */
static int read_checked(store *st, const buf *key, const store_cond *c, item **cur, char *err,
                        size_t errlen)
{
    buf scratch;
    buf_init(&scratch);
    int rv = read_item(st, key, &scratch, cur, err, errlen);
    buf_fini(&scratch);
    if (rv != 0) {
        return rv;
    }
    if (!cond_holds(c, *cur)) {
        return cond_failed(c, err, errlen);
    }
    return 0;
}

/* Writes one item change in its own batch. val NULL = delete. */
static int write_one(store *st, const buf *key, const buf *val, char *err, size_t errlen)
{
    db_batch *b = db_batch_new();
    if (b == NULL) {
        return oom(err, errlen);
    }
    if (val != NULL) {
        db_batch_put(b, st->db, CF_ITEMS, key->data, key->len, val->data, val->len);
    } else {
        db_batch_delete(b, st->db, CF_ITEMS, key->data, key->len);
    }
    int rv = db_write(st->db, b, 0, err, errlen);
    db_batch_free(b);
    return rv;
}

/* ======================================================================== */
/* Point operations                                                         */
/* ======================================================================== */

int store_put(store *st, const table_schema *t, const item *it, const store_cond *cond,
              item **old_out, char *err, size_t errlen)
{
    int rv;
    uint32_t part = 0;
    item *cur = NULL;
    buf key, val;
    buf_init(&key);
    buf_init(&val);
    if (old_out != NULL) {
        *old_out = NULL;
    }
    if ((rv = schema_check_item(t, it, 0, err, errlen)) != 0 ||
        (rv = cond_validate(cond, err, errlen)) != 0) {
        goto out;
    }
    if ((rv = itemkey_of_item(&key, t, it, &part)) != 0 || (rv = item_encode(it, &val)) != 0) {
        store_errf(rv, err, errlen, "cannot encode the item (%s)", lapse_strerror(rv));
        goto out;
    }
    pthread_mutex_t *mu = stripe(st, t->id, part);
    pthread_mutex_lock(mu);
    if ((cond_needs_read(cond) || old_out != NULL) &&
        (rv = read_checked(st, &key, cond, &cur, err, errlen)) != 0) {
        goto unlock;
    }
    if ((rv = write_one(st, &key, &val, err, errlen)) != 0) {
        goto unlock;
    }
    if (old_out != NULL) {
        *old_out = cur;
        cur = NULL;
    }
unlock:
    pthread_mutex_unlock(mu);
out:
    item_free(cur);
    buf_fini(&key);
    buf_fini(&val);
    return rv;
}

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
        store_errf(rv, err, errlen, "cannot encode the key (%s)", lapse_strerror(rv));
        goto out;
    }
    rv = read_item(st, &k, &scratch, out, err, errlen);
out:
    buf_fini(&k);
    buf_fini(&scratch);
    return rv;
}

int store_delete(store *st, const table_schema *t, const item *key, const store_cond *cond,
                 item **old_out, char *err, size_t errlen)
{
    int rv;
    uint32_t part = 0;
    item *cur = NULL;
    buf k;
    buf_init(&k);
    if (old_out != NULL) {
        *old_out = NULL;
    }
    if ((rv = schema_check_item(t, key, 1, err, errlen)) != 0 ||
        (rv = cond_validate(cond, err, errlen)) != 0) {
        goto out;
    }
    if ((rv = itemkey_of_item(&k, t, key, &part)) != 0) {
        store_errf(rv, err, errlen, "cannot encode the key (%s)", lapse_strerror(rv));
        goto out;
    }
    pthread_mutex_t *mu = stripe(st, t->id, part);
    pthread_mutex_lock(mu);
    int must_write = 1;
    if (cond_needs_read(cond) || old_out != NULL) {
        if ((rv = read_checked(st, &k, cond, &cur, err, errlen)) != 0) {
            goto unlock;
        }
        must_write = cur != NULL;
    }
    if (must_write && (rv = write_one(st, &k, NULL, err, errlen)) != 0) {
        goto unlock;
    }
    if (old_out != NULL) {
        *old_out = cur;
        cur = NULL;
    }
unlock:
    pthread_mutex_unlock(mu);
out:
    item_free(cur);
    buf_fini(&k);
    return rv;
}

static int is_key_attr(const table_schema *t, const char *name)
{
    return strcmp(name, t->pk.name) == 0 || (t->sk.name[0] != 0 && strcmp(name, t->sk.name) == 0);
}

static int actions_validate(const table_schema *t, const store_update_action *a, size_t n,
                            char *err, size_t errlen)
{
    if (n > 0 && a == NULL) {
        return store_errf(LAPSE_EINVAL, err, errlen, "update actions missing");
    }
    for (size_t i = 0; i < n; i++) {
        if (a[i].name == NULL || a[i].name[0] == 0) {
            return store_errf(LAPSE_EINVAL, err, errlen, "update action without an attribute name");
        }
        if (is_key_attr(t, a[i].name)) {
            return store_errf(LAPSE_EINVAL, err, errlen,
                              "cannot update attribute \"%s\": it is part of the key", a[i].name);
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(a[i].name, a[j].name) == 0) {
                return store_errf(LAPSE_EINVAL, err, errlen,
                                  "two update actions name the same attribute \"%s\"", a[i].name);
            }
        }
    }
    return 0;
}

int store_update(store *st, const table_schema *t, const item *key,
                 const store_update_action *actions, size_t nactions, const store_cond *cond,
                 item **new_out, char *err, size_t errlen)
{
    int rv;
    uint32_t part = 0;
    item *cur = NULL;
    buf k, val;
    buf_init(&k);
    buf_init(&val);
    if (new_out != NULL) {
        *new_out = NULL;
    }
    if ((rv = schema_check_item(t, key, 1, err, errlen)) != 0 ||
        (rv = cond_validate(cond, err, errlen)) != 0 ||
        (rv = actions_validate(t, actions, nactions, err, errlen)) != 0) {
        goto out;
    }
    if ((rv = itemkey_of_item(&k, t, key, &part)) != 0) {
        store_errf(rv, err, errlen, "cannot encode the key (%s)", lapse_strerror(rv));
        goto out;
    }
    pthread_mutex_t *mu = stripe(st, t->id, part);
    pthread_mutex_lock(mu);
    if ((rv = read_checked(st, &k, cond, &cur, err, errlen)) != 0) {
        goto unlock;
    }
    if (cur == NULL && (cur = item_dup(key)) == NULL) { /* upsert */
        rv = oom(err, errlen);
        goto unlock;
    }
    for (size_t i = 0; i < nactions; i++) {
        if (actions[i].value == NULL) {
            item_remove(cur, actions[i].name);
        } else if ((rv = item_set_copy(cur, actions[i].name, actions[i].value)) != 0) {
            store_errf(rv, err, errlen, "cannot set attribute \"%s\" (%s)", actions[i].name,
                       lapse_strerror(rv));
            goto unlock;
        }
    }
    /* The result must still be a valid item (size limit, nesting). */
    if ((rv = schema_check_item(t, cur, 0, err, errlen)) != 0) {
        goto unlock;
    }
    buf_clear(&val);
    if ((rv = item_encode(cur, &val)) != 0) {
        store_errf(rv, err, errlen, "cannot encode the item (%s)", lapse_strerror(rv));
        goto unlock;
    }
    if ((rv = write_one(st, &k, &val, err, errlen)) != 0) {
        goto unlock;
    }
    if (new_out != NULL) {
        *new_out = cur;
        cur = NULL;
    }
unlock:
    pthread_mutex_unlock(mu);
out:
    item_free(cur);
    buf_fini(&k);
    buf_fini(&val);
    return rv;
}

/* ======================================================================== */
/* Batch writes                                                             */
/* ======================================================================== */

/* One validated write: its key and (for puts) value live in shared bufs. */
typedef struct batch_entry {
    uint32_t part;
    uint32_t idx; /* position in the request: later writes to a key win */
    size_t koff, klen;
    size_t voff, vlen; /* vlen == SIZE_MAX: a delete */
} batch_entry;

static int entry_cmp(const void *a, const void *b)
{
    const batch_entry *x = a, *y = b;
    if (x->part != y->part) {
        return x->part < y->part ? -1 : 1;
    }
    return x->idx < y->idx ? -1 : (x->idx > y->idx ? 1 : 0);
}

int store_batch_write(store *st, const table_schema *t, const store_write *writes, size_t n,
                      char *err, size_t errlen)
{
    int rv = 0;
    batch_entry *e = NULL;
    db_batch *b = NULL;
    buf keys, vals, k;
    buf_init(&keys);
    buf_init(&vals);
    buf_init(&k);
    if (n == 0) {
        return 0;
    }
    if (n > STORE_BATCH_MAX) {
        return store_errf(LAPSE_ETOOBIG, err, errlen, "a batch holds at most %d writes, got %zu",
                          STORE_BATCH_MAX, n);
    }
    if ((e = calloc(n, sizeof(*e))) == NULL || (b = db_batch_new()) == NULL) {
        rv = oom(err, errlen);
        goto out;
    }
    /* Validate and encode everything before applying anything. */
    for (size_t i = 0; i < n; i++) {
        const store_write *w = &writes[i];
        const item *it = w->put != NULL ? w->put : w->delete_key;
        if ((w->put == NULL) == (w->delete_key == NULL)) {
            rv = store_errf(LAPSE_EINVAL, err, errlen,
                            "write %zu must be exactly one put or delete", i);
            goto out;
        }
        char why[256];
        if ((rv = schema_check_item(t, it, w->put == NULL, why, sizeof(why))) != 0) {
            store_errf(rv, err, errlen, "write %zu: %s", i, why);
            goto out;
        }
        if ((rv = itemkey_of_item(&k, t, it, &e[i].part)) != 0 ||
            (rv = buf_append(&keys, k.data, k.len)) != 0) {
            store_errf(rv, err, errlen, "write %zu: cannot encode the key (%s)", i,
                       lapse_strerror(rv));
            goto out;
        }
        e[i].idx = (uint32_t)i;
        e[i].koff = keys.len - k.len;
        e[i].klen = k.len;
        e[i].vlen = SIZE_MAX;
        if (w->put != NULL) {
            e[i].voff = vals.len;
            if ((rv = item_encode(w->put, &vals)) != 0) {
                store_errf(rv, err, errlen, "write %zu: cannot encode the item", i);
                goto out;
            }
            e[i].vlen = vals.len - e[i].voff;
        }
    }
    qsort(e, n, sizeof(*e), entry_cmp);
    /* One WriteBatch per partition, under that partition's lock. Only one
     * lock is held at a time, so batches cannot deadlock each other. */
    for (size_t i = 0; i < n;) {
        size_t j = i;
        db_batch_clear(b);
        for (; j < n && e[j].part == e[i].part; j++) {
            const uint8_t *kp = keys.data + e[j].koff;
            if (e[j].vlen == SIZE_MAX) {
                db_batch_delete(b, st->db, CF_ITEMS, kp, e[j].klen);
            } else {
                db_batch_put(b, st->db, CF_ITEMS, kp, e[j].klen, vals.data + e[j].voff, e[j].vlen);
            }
        }
        pthread_mutex_t *mu = stripe(st, t->id, e[i].part);
        pthread_mutex_lock(mu);
        rv = db_write(st->db, b, 0, err, errlen);
        pthread_mutex_unlock(mu);
        if (rv != 0) {
            goto out; /* earlier partitions' groups stay applied */
        }
        i = j;
    }
out:
    db_batch_free(b);
    free(e);
    buf_fini(&keys);
    buf_fini(&vals);
    buf_fini(&k);
    return rv;
}

/* ======================================================================== */
/* Tables and metadata                                                      */
/* ======================================================================== */

int store_drop_table(store *st, uint32_t table_id, char *err, size_t errlen)
{
    uint8_t lo[4], hi[9];
    size_t hlen = 0;
    itemkey_table_range(table_id, lo, hi, &hlen);
    db_batch *b = db_batch_new();
    if (b == NULL) {
        return oom(err, errlen);
    }
    /* Every CF keyed by table id joins this batch (expiry index, outbox). */
    db_batch_delete_range(b, st->db, CF_ITEMS, lo, sizeof(lo), hi, hlen);
    int rv = db_write(st->db, b, 0, err, errlen);
    db_batch_free(b);
    if (rv != 0) {
        return rv;
    }
    /* The range tombstone hides the data at once; compaction reclaims it. */
    return db_compact_range(st->db, CF_ITEMS, lo, sizeof(lo), hi, hlen);
}

int store_meta_get(store *st, const char *name, buf *val, int *found, char *err, size_t errlen)
{
    return db_get(st->db, CF_META, name, strlen(name), val, found, err, errlen);
}

int store_meta_put(store *st, const char *name, const void *val, size_t len, char *err,
                   size_t errlen)
{
    db_batch *b = db_batch_new();
    if (b == NULL) {
        return oom(err, errlen);
    }
    db_batch_put(b, st->db, CF_META, name, strlen(name), val, len);
    /* Metadata is rare and identifies the node: make it durable. */
    int rv = db_write(st->db, b, 1, err, errlen);
    db_batch_free(b);
    return rv;
}
