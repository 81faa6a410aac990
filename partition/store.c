/*
 * store.c: a node's item store over one RocksDB (see store.h). The on-disk
 * layout is documented in docs/storage-format.md:
 *
 *   items:  u32be table id | u32be partition | enc(pk) [| enc(sk)] -> item_encode(item)
 *   meta:   name bytes -> value bytes
 *   expiry: u32be table id | u32be partition | u64be due second | enc(pk) [| enc(sk)] -> ""
 *
 * Queries, scans and counts are in store_query.c, the key layout in
 * itemkey.c, the sweep and backfill of the expiry index in expiry.c.
 *
 * Writes: the caller's thread takes the partition's stripe lock, reads the
 * current item when a condition (or the old item) is needed, and applies one
 * WriteBatch before unlocking, so the read-check-write of conditional writes
 * is atomic per partition. Reads take no lock: RocksDB reads are consistent
 * per key and iterators see a point-in-time view.
 *
 * TTL (expiry.h invariant 1): when the table's TTL is enabled, every write
 * also reads the current item under the lock, evaluates the old and the new
 * version with ttl_eval at one clock snapshot, and adds "delete the old
 * entry, put the new one" to the same WriteBatch when they differ. Tables
 * with TTL off skip all of it (an unconditional put still does no read).
 * The outbox (replication issue) joins the same batch later.
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
#include "ttl.h"

static const char *const cf_names[CF_COUNT] = {"items", "meta", "expiry"};

#define NO_DUE INT64_MAX /* expiry.h's EXPIRY_NONE */

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
    if (keyset_init(&st->undeletable) != 0) {
        rv = store_errf(LAPSE_ENOMEM, err, errlen, "cannot initialize store locks");
        goto fail;
    }
    st->undeletable_inited = 1;
    if (pthread_mutex_init(&st->scratch_lock, NULL) != 0) {
        rv = store_errf(LAPSE_ENOMEM, err, errlen, "cannot initialize store locks");
        goto fail;
    }
    st->scratch_lock_inited = 1;
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
    for (int i = st->locks_inited - 1; i >= 0; i--) {
        pthread_mutex_destroy(&st->locks[i]);
    }
    free(st);
}

/* ======================================================================== */
/* Locks                                                                    */
/* ======================================================================== */

pthread_mutex_t *store_stripe(store *st, uint32_t table_id, uint32_t part)
{
    /* Partitions of one table map to distinct stripes (low bits of part
     * survive the xor), tables are spread by the multiplicative hash. */
    uint32_t h = (table_id * 0x9E3779B1u) ^ part;
    h ^= h >> 16;
    return &st->locks[h & (STORE_LOCK_STRIPES - 1)];
}

static sweep_cursor *cursor_of(store *st, uint32_t table_id, uint32_t part)
{
    return &st->cursors[store_stripe(st, table_id, part) - st->locks];
}

sweep_cursor *store_sweep_cursor(store *st, uint32_t table_id, uint32_t part)
{
    sweep_cursor *c = cursor_of(st, table_id, part);
    return c->valid && c->table_id == table_id && c->part == part ? c : NULL;
}

void store_sweep_cursor_note(store *st, uint32_t table_id, uint32_t part, const uint8_t *ekey,
                             size_t elen)
{
    sweep_cursor *c = store_sweep_cursor(st, table_id, part);
    if (c != NULL && (ekey == NULL || itemkey_cmp(ekey, elen, c->key.data, c->key.len) < 0)) {
        c->valid = 0;
    }
}

void store_sweep_cursor_set(store *st, uint32_t table_id, uint32_t part, const uint8_t *key,
                            size_t len)
{
    sweep_cursor *c = store_sweep_cursor(st, table_id, part);
    if (c != NULL && itemkey_cmp(key, len, c->key.data, c->key.len) <= 0) {
        return;
    }
    c = cursor_of(st, table_id, part);
    buf_clear(&c->key);
    c->valid = buf_append(&c->key, key, len) == 0;
    c->table_id = table_id;
    c->part = part;
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
 * and checks c against it. A stored value that does not decode is an error
 * when the item itself is needed (need_item, or a condition); otherwise (the
 * read serves only the TTL index) it counts as absent and *corrupt is set:
 * its index entry, if any, cannot be named and is left for the sweep to
 * remove as stale. Returns 0, LAPSE_ECONDITION (with *cur set), or the read
 * error. REQUIRES: the key's stripe lock is held. */
static int read_for_write(store *st, const buf *key, const store_cond *c, int need_item, item **cur,
                          int *corrupt, char *err, size_t errlen)
{
    int found = 0, rv;
    buf scratch;
    buf_init(&scratch);
    *cur = NULL;
    *corrupt = 0;
    rv = db_get(st->db, CF_ITEMS, key->data, key->len, &scratch, &found, err, errlen);
    if (rv == 0 && found && (rv = item_decode(scratch.data, scratch.len, cur)) != 0) {
        if (rv == LAPSE_ECORRUPT && !need_item && !cond_needs_read(c)) {
            *corrupt = 1;
            rv = 0;
        } else {
            store_errf(rv, err, errlen, "stored item failed to decode (%s)", lapse_strerror(rv));
        }
    }
    buf_fini(&scratch);
    if (rv != 0) {
        return rv;
    }
    if (!cond_holds(c, *cur)) {
        return cond_failed(c, err, errlen);
    }
    return 0;
}

/* ======================================================================== */
/* The expiry index in the write path                                       */
/* ======================================================================== */

/* The index entry one version of an item calls for. */
typedef struct ttl_entry {
    int has;       /* eligible: one entry due at due_s */
    int64_t due_s; /* valid when has */
} ttl_entry;

int store_ttl_due_s(const table_schema *t, const item *it, clock_wall now, int64_t *due_s)
{
    int64_t due_ms = 0;
    if (it == NULL || ttl_eval(&t->ttl, it, now, &due_ms) != TTL_ELIGIBLE) {
        return 0;
    }
    *due_s = due_ms / 1000; /* a whole second (ttl.h) */
    return 1;
}

static ttl_entry entry_of(const table_schema *t, const item *it, clock_wall now)
{
    ttl_entry e = {0, 0};
    e.has = store_ttl_due_s(t, it, now, &e.due_s);
    return e;
}

/* Adds to b the index change of the item at ikey going from entry o to
 * entry n: delete the old entry and put the new one when they differ (an
 * unchanged entry costs nothing). Lowers *min_due_ms to a new entry's due
 * instant. Returns 0 or LAPSE_ENOMEM (b may then hold part of the change:
 * the caller discards it). */
static int index_change(store *st, db_batch *b, const uint8_t *ikey, size_t ilen, ttl_entry o,
                        ttl_entry n, buf *scratch, int64_t *min_due_ms)
{
    if (o.has == n.has && (!o.has || o.due_s == n.due_s)) {
        return 0;
    }
    if (o.has) {
        if (itemkey_expiry_of(scratch, ikey, ilen, o.due_s) != 0) {
            return LAPSE_ENOMEM;
        }
        db_batch_delete(b, st->db, CF_EXPIRY, scratch->data, scratch->len);
    }
    if (n.has) {
        if (itemkey_expiry_of(scratch, ikey, ilen, n.due_s) != 0) {
            return LAPSE_ENOMEM;
        }
        db_batch_put(b, st->db, CF_EXPIRY, scratch->data, scratch->len, "", 0);
        store_sweep_cursor_note(st, buf_get_u32be(ikey), buf_get_u32be(ikey + 4), scratch->data,
                                scratch->len);
        if (n.due_s * 1000 < *min_due_ms) {
            *min_due_ms = n.due_s * 1000;
        }
    }
    return 0;
}

/* Runs the expiry hook for new entries due at min_due_ms (NO_DUE: none).
 * REQUIRES: no stripe lock held. */
static void notify(store *st, uint32_t table_id, uint32_t part, int64_t min_due_ms)
{
    if (min_due_ms != NO_DUE && st->hook != NULL) {
        st->hook(st->hook_arg, table_id, part, min_due_ms);
    }
}

/* Writes one item change (val NULL: delete) in its own WriteBatch, with the
 * index change from o to n when the table's TTL is on. A write replaces the
 * stored value, so the item is no longer one the sweep must skip.
 * REQUIRES: the key's stripe lock is held. */
static int write_one(store *st, const table_schema *t, const buf *key, const buf *val, ttl_entry o,
                     ttl_entry n, int64_t *min_due_ms, char *err, size_t errlen)
{
    int rv = 0;
    buf scratch;
    buf_init(&scratch);
    db_batch *b = db_batch_new();
    if (b == NULL) {
        return oom(err, errlen);
    }
    if (val != NULL) {
        db_batch_put(b, st->db, CF_ITEMS, key->data, key->len, val->data, val->len);
    } else {
        db_batch_delete(b, st->db, CF_ITEMS, key->data, key->len);
    }
    if (t->ttl.enabled &&
        index_change(st, b, key->data, key->len, o, n, &scratch, min_due_ms) != 0) {
        rv = oom(err, errlen);
        goto out;
    }
    if ((rv = db_write(st->db, b, 0, err, errlen)) == 0 && t->ttl.enabled &&
        keyset_remove(&st->undeletable, key->data, key->len)) {
        /* Its leftover entry may sit below the cursor: let the sweep see it. */
        store_sweep_cursor_note(st, t->id, buf_get_u32be(key->data + 4), NULL, 0);
    }
out:
    db_batch_free(b);
    buf_fini(&scratch);
    return rv;
}

/* ======================================================================== */
/* Point operations                                                         */
/* ======================================================================== */

int store_put(store *st, const table_schema *t, const item *it, const store_cond *cond,
              item **old_out, char *err, size_t errlen)
{
    int rv, corrupt = 0;
    uint32_t part = 0;
    int64_t min_due_ms = NO_DUE;
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
    const int ttl = t->ttl.enabled;
    const clock_wall now = ttl ? clock_wall_now() : (clock_wall){0};
    pthread_mutex_t *mu = store_stripe(st, t->id, part);
    pthread_mutex_lock(mu);
    if ((cond_needs_read(cond) || old_out != NULL || ttl) &&
        (rv = read_for_write(st, &key, cond, old_out != NULL, &cur, &corrupt, err, errlen)) != 0) {
        goto unlock;
    }
    if ((rv = write_one(st, t, &key, &val, entry_of(t, cur, now), entry_of(t, it, now), &min_due_ms,
                        err, errlen)) != 0) {
        goto unlock;
    }
    if (old_out != NULL) {
        *old_out = cur;
        cur = NULL;
    }
unlock:
    pthread_mutex_unlock(mu);
    if (rv == 0) {
        notify(st, t->id, part, min_due_ms);
    }
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
    int rv, corrupt = 0;
    uint32_t part = 0;
    int64_t min_due_ms = NO_DUE;
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
    const int ttl = t->ttl.enabled;
    const clock_wall now = ttl ? clock_wall_now() : (clock_wall){0};
    pthread_mutex_t *mu = store_stripe(st, t->id, part);
    pthread_mutex_lock(mu);
    int must_write = 1;
    if (cond_needs_read(cond) || old_out != NULL || ttl) {
        if ((rv = read_for_write(st, &k, cond, old_out != NULL, &cur, &corrupt, err, errlen)) !=
            0) {
            goto unlock;
        }
        must_write = cur != NULL || corrupt;
    }
    const ttl_entry none = {0, 0};
    if (must_write && (rv = write_one(st, t, &k, NULL, entry_of(t, cur, now), none, &min_due_ms,
                                      err, errlen)) != 0) {
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
    int rv, corrupt = 0;
    uint32_t part = 0;
    int64_t min_due_ms = NO_DUE;
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
    const clock_wall now = t->ttl.enabled ? clock_wall_now() : (clock_wall){0};
    pthread_mutex_t *mu = store_stripe(st, t->id, part);
    pthread_mutex_lock(mu);
    /* The update applies to the stored item, so it must decode (need_item). */
    if ((rv = read_for_write(st, &k, cond, 1, &cur, &corrupt, err, errlen)) != 0) {
        goto unlock;
    }
    const ttl_entry before = t->ttl.enabled ? entry_of(t, cur, now) : (ttl_entry){0, 0};
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
    const ttl_entry after = t->ttl.enabled ? entry_of(t, cur, now) : (ttl_entry){0, 0};
    if ((rv = write_one(st, t, &k, &val, before, after, &min_due_ms, err, errlen)) != 0) {
        goto unlock;
    }
    if (new_out != NULL) {
        *new_out = cur;
        cur = NULL;
    }
unlock:
    pthread_mutex_unlock(mu);
    if (rv == 0) {
        notify(st, t->id, part, min_due_ms);
    }
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
    size_t voff, vlen;  /* vlen == SIZE_MAX: a delete */
    const uint8_t *key; /* keys.data + koff, set once keys stops growing */
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

/* Scratch for the index changes of one partition group: the distinct keys'
 * current values, read with one MultiGet. */
typedef struct group_scratch {
    const void **kp;
    size_t *kl;
    buf *vals;
    int *found;
    size_t cap;
    buf ekey;
} group_scratch;

/* Adds to b the index changes of the writes e[0..n) (one partition, sorted
 * by entry_cmp): for each distinct key, from the entry of its stored item to
 * the entry of its last write (the earlier writes to a key never become
 * visible). Reads the stored items with one MultiGet.
 * REQUIRES: the partition's stripe lock is held. */
static int group_index(store *st, const table_schema *t, const store_write *writes,
                       const batch_entry *e, size_t n, clock_wall now, group_scratch *g,
                       db_batch *b, int64_t *min_due_ms, char *err, size_t errlen)
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
        ttl_entry o = {0, 0};
        if (g->found[r]) {
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
                o.due_s = due_ms / 1000; /* as store_ttl_due_s */
            }
        }
        const store_write *last = &writes[e[j - 1].idx];
        ttl_entry nw = entry_of(t, last->put, now); /* a delete: no entry */
        if (index_change(st, b, e[i].key, e[i].klen, o, nw, &g->ekey, min_due_ms) != 0) {
            return oom(err, errlen);
        }
        i = j;
    }
    return 0;
}

int store_batch_write(store *st, const table_schema *t, const store_write *writes, size_t n,
                      char *err, size_t errlen)
{
    int rv = 0;
    batch_entry *e = NULL;
    db_batch *b = NULL;
    group_scratch g;
    memset(&g, 0, sizeof(g));
    buf_init(&g.ekey);
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
    const int ttl = t->ttl.enabled;
    if (ttl) {
        g.kp = calloc(n, sizeof(*g.kp));
        g.kl = calloc(n, sizeof(*g.kl));
        g.vals = calloc(n, sizeof(*g.vals));
        g.found = calloc(n, sizeof(*g.found));
        if (g.kp == NULL || g.kl == NULL || g.vals == NULL || g.found == NULL) {
            rv = oom(err, errlen);
            goto out;
        }
        for (; g.cap < n; g.cap++) {
            buf_init(&g.vals[g.cap]);
        }
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
    for (size_t i = 0; i < n; i++) {
        e[i].key = keys.data + e[i].koff;
    }
    qsort(e, n, sizeof(*e), entry_cmp);
    const clock_wall now = ttl ? clock_wall_now() : (clock_wall){0};
    /* One WriteBatch per partition, under that partition's lock. Only one
     * lock is held at a time, so batches cannot deadlock each other. */
    for (size_t i = 0; i < n;) {
        size_t j = i;
        int64_t min_due_ms = NO_DUE;
        db_batch_clear(b);
        for (; j < n && e[j].part == e[i].part; j++) {
            if (e[j].vlen == SIZE_MAX) {
                db_batch_delete(b, st->db, CF_ITEMS, e[j].key, e[j].klen);
            } else {
                db_batch_put(b, st->db, CF_ITEMS, e[j].key, e[j].klen, vals.data + e[j].voff,
                             e[j].vlen);
            }
        }
        pthread_mutex_t *mu = store_stripe(st, t->id, e[i].part);
        pthread_mutex_lock(mu);
        if (ttl) {
            rv = group_index(st, t, writes, e + i, j - i, now, &g, b, &min_due_ms, err, errlen);
        }
        if (rv == 0) {
            rv = db_write(st->db, b, 0, err, errlen);
        }
        for (size_t x = i; rv == 0 && ttl && x < j; x++) {
            if (keyset_remove(&st->undeletable, e[x].key, e[x].klen)) {
                store_sweep_cursor_note(st, t->id, e[i].part, NULL, 0);
            }
        }
        pthread_mutex_unlock(mu);
        if (rv != 0) {
            goto out; /* earlier partitions' groups stay applied */
        }
        notify(st, t->id, e[i].part, min_due_ms);
        i = j;
    }
out:
    for (size_t i = 0; i < g.cap; i++) {
        buf_fini(&g.vals[i]);
    }
    free(g.kp);
    free(g.kl);
    free(g.vals);
    free(g.found);
    buf_fini(&g.ekey);
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
    /* Every CF keyed by table id joins this batch (expiry index and backfill
     * progress now, the outbox later). */
    db_batch_delete_range(b, st->db, CF_ITEMS, lo, sizeof(lo), hi, hlen);
    if (expiry_drop_into(st, b, table_id) != 0) {
        db_batch_free(b);
        return oom(err, errlen);
    }
    int rv = db_write(st->db, b, 0, err, errlen);
    db_batch_free(b);
    if (rv != 0) {
        return rv;
    }
    /* The range tombstones hide the data at once; compaction reclaims it. */
    expiry_compact_table(st, table_id);
    return db_compact_range(st->db, CF_ITEMS, lo, sizeof(lo), hi, hlen);
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
