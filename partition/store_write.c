/*
 * store_write.c: a node's point writes (store.h: store_put, store_delete,
 * store_update and their _once forms for retried calls): the conditions,
 * the remembered outcomes of retried writes (request.h) and the one
 * WriteBatch each write commits. The store itself, its locks and reads are
 * in store.c.
 *
 * Writes: the caller's thread takes the partition's stripe lock, reads the
 * current item when a condition (or the old item) is needed, and applies one
 * WriteBatch before unlocking, so the read-check-write of conditional writes
 * is atomic per partition.
 *
 * TTL (expiry.h invariant 1): when the table's TTL is enabled, every write
 * also reads the current item under the lock, evaluates the old and the new
 * version with ttl_eval at one clock snapshot, and adds "delete the old
 * entry, put the new one" to the same WriteBatch when they differ. Tables
 * with TTL off skip all of it (an unconditional put still does no read).
 *
 * LSI and outbox (store_derived.c): a table with LSIs, a GSI or a stream also
 * reads the stored value under the lock, and its WriteBatch carries the LSI
 * changes and the outbox record of the write. Other tables pay one test.
 */
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "../common/ttl.h"
#include "itemkey.h"
#include "replog.h"
#include "request.h"
#include "store_int.h"

static int oom(char *err, size_t errlen)
{
    return errf(LAPSE_ENOMEM, err, errlen, "out of memory");
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
        c->kind != STORE_COND_EQUALS && c->kind != STORE_COND_ITEM_EQUALS) {
        return errf(LAPSE_EINVAL, err, errlen, "unknown condition kind %d", (int)c->kind);
    }
    if (c->kind == STORE_COND_ITEM_EQUALS) {
        return c->value != NULL && c->value->type == ATTR_M
                   ? 0
                   : errf(LAPSE_EINVAL, err, errlen, "item condition without an M value");
    }
    if (c->attr == NULL || c->attr[0] == 0) {
        return errf(LAPSE_EINVAL, err, errlen, "condition without an attribute name");
    }
    if (c->kind == STORE_COND_EQUALS && c->value == NULL) {
        return errf(LAPSE_EINVAL, err, errlen, "equality condition without a value");
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
    if (c->kind == STORE_COND_ITEM_EQUALS) {
        return cur != NULL && item_eq_map(cur, c->value);
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
    static const char *const what[] = {"", "attribute_not_exists", "attribute_exists", "equals",
                                       "item_equals"};
    return errf(LAPSE_ECONDITION, err, errlen, "the conditional request failed: %s(%s)",
                what[c->kind <= STORE_COND_ITEM_EQUALS ? c->kind : 0],
                c->kind == STORE_COND_ITEM_EQUALS || c->attr == NULL ? "" : c->attr);
}

/* The stored value of an item as read for a write. */
typedef struct stored {
    buf raw;     /* the stored bytes when found */
    int found;   /* a value is stored */
    int corrupt; /* found, but it does not decode */
} stored;

/* Reads the item under key into *cur (NULL when absent; the caller frees it)
 * and its bytes into old, and checks c against it. A stored value that does
 * not decode is an error when the item itself is needed (need_item, or a
 * condition); otherwise (the read serves only the derived writes) it counts
 * as absent and old->corrupt is set: its index entries, if any, cannot be
 * named; the expiry entry is left for the sweep to remove as stale.
 * Returns 0, LAPSE_ECONDITION (with *cur set), or the read error.
 * REQUIRES: the key's stripe lock is held. */
static int read_for_write(store *st, const buf *key, const store_cond *c, int need_item, item **cur,
                          stored *old, char *err, size_t errlen)
{
    int rv;
    *cur = NULL;
    old->corrupt = 0;
    rv = db_get(st->db, CF_ITEMS, key->data, key->len, &old->raw, &old->found, err, errlen);
    if (rv == 0 && old->found && (rv = item_decode(old->raw.data, old->raw.len, cur)) != 0) {
        if (rv == LAPSE_ECORRUPT && !need_item && !cond_needs_read(c)) {
            old->corrupt = 1;
            rv = 0;
        } else {
            errf(rv, err, errlen, "stored item failed to decode (%s)", lapse_strerror(rv));
        }
    }
    if (rv != 0) {
        return rv;
    }
    if (!cond_holds(c, *cur)) {
        return cond_failed(c, err, errlen);
    }
    return 0;
}

/* ======================================================================== */
/* Retried writes (request.h)                                               */
/* ======================================================================== */

/* A point write's request id and the record of an earlier attempt. */
typedef struct once {
    const uint8_t *id; /* REQUEST_ID_BYTES; NULL: none, every call applies */
    request_kind kind;
    buf key;              /* the record's key (when id) */
    buf val;              /* the record found */
    int done;             /* an earlier attempt of the call wrote: val holds its record */
    request_outcome seen; /* what val says (when done) */
} once;

static void once_init(once *o, const uint8_t *id, request_kind kind)
{
    memset(o, 0, sizeof(*o));
    o->id = id;
    o->kind = kind;
    buf_init(&o->key);
    buf_init(&o->val);
}

static void once_fini(once *o)
{
    buf_fini(&o->key);
    buf_fini(&o->val);
}

/* store_int.h. The record follows the earlier write in the partition's
 * log, and replicas apply the log in order with no gap, so when the record
 * is through, so is the write: here (the primary may have changed) or
 * queued behind a round still on the wire, as the earlier attempt may be. */
int store_request_confirm(store *st, const table_schema *t, uint32_t part, const buf *key,
                          const buf *val, store_pending *pend, char *err, size_t errlen)
{
    db_batch *b = db_batch_new();
    if (b == NULL) {
        return oom(err, errlen);
    }
    store_commit_prepare(st, b, t);
    db_batch_put(b, st->db, CF_REQUESTS, key->data, key->len, val->data, val->len);
    int written = 0;
    int rv = store_commit(st, b, t, part, NULL, &written, pend, err, errlen);
    db_batch_free(b);
    return rv;
}

int store_request_find(store *st, const table_schema *t, uint32_t part, const uint8_t *rid,
                       request_kind kind, buf *key, buf *val, int *found, request_outcome *seen,
                       char *err, size_t errlen)
{
    *found = 0;
    if (request_key(key, t->id, part, rid) != 0) {
        return oom(err, errlen);
    }
    int rv = request_recall(st->db, CF_REQUESTS, key, val, found, seen, err, errlen);
    if (rv == 0 && *found && seen->kind != kind) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "request id already used by another kind of write (%c, not %c)",
                    (char)seen->kind, (char)kind);
    }
    return rv;
}

/* Looks for an earlier attempt's record, before the call's condition is
 * checked: a write that was done answers done even when its own effect now
 * fails its condition. Found, sets o->done and confirms it (store_request_confirm:
 * *pend is then to be finished); the caller writes nothing more. A record
 * of another kind of write under the id is the client's error
 * (LAPSE_EINVAL). REQUIRES: the partition's stripe lock. */
static int once_check(store *st, const table_schema *t, uint32_t part, once *o, store_pending *pend,
                      char *err, size_t errlen)
{
    if (o->id == NULL) {
        return 0;
    }
    int rv = store_request_find(st, t, part, o->id, o->kind, &o->key, &o->val, &o->done, &o->seen,
                                err, errlen);
    if (rv != 0 || !o->done) {
        return rv;
    }
    return store_request_confirm(st, t, part, &o->key, &o->val, pend, err, errlen);
}

/* Writes one item change (val NULL: delete) in its own WriteBatch, with the
 * expiry index change from o to n when the table's TTL is on, and the LSI
 * and outbox writes derived from the stored value old (read when
 * store_derived_wanted(t)), and the record of req's request id when it has
 * one (an update's holds its new item, val). same: whether val is the item
 * old held (store_derived_change). A write replaces the stored
 * value, so the item is no longer one the sweep must skip. On 0, *pend is to be finished
 * (finish_write) once the stripe lock is released.
 * REQUIRES: the key's stripe lock is held. */
static int write_one(store *st, const table_schema *t, const buf *key, const stored *old,
                     const buf *val, int same, expiry_entry o, expiry_entry n, const once *req,
                     int64_t *min_due_ms, store_pending *pend, char *err, size_t errlen)
{
    int rv = 0;
    const int derive = store_derived_wanted(t);
    const uint32_t part = buf_get_u32be(key->data + 4);
    store_derived d;
    memset(&d, 0, sizeof(d));
    buf scratch;
    buf_init(&scratch);
    db_batch *b = db_batch_new();
    if (b == NULL) {
        return oom(err, errlen);
    }
    store_commit_prepare(st, b, t);
    if (val != NULL) {
        db_batch_put(b, st->db, CF_ITEMS, key->data, key->len, val->data, val->len);
    } else {
        db_batch_delete(b, st->db, CF_ITEMS, key->data, key->len);
    }
    if (t->ttl.enabled &&
        store_derived_expiry_change(st, b, key->data, key->len, o, n, &scratch, min_due_ms) != 0) {
        rv = oom(err, errlen);
        goto out;
    }
    if (req->id != NULL) {
        const int upd = req->kind == REQUEST_UPDATE;
        if (request_remember(b, st->db, CF_REQUESTS, &req->key, req->kind, upd ? val->data : NULL,
                             upd ? val->len : 0, &scratch) != 0) {
            rv = oom(err, errlen);
            goto out;
        }
    }
    if (derive) {
        store_derived_begin(&d, st, t, part);
        const uint8_t *ov = old->found ? old->raw.data : NULL;
        if ((rv = store_derived_change(&d, b, key->data, key->len, ov, old->raw.len,
                                       val != NULL ? val->data : NULL, val != NULL ? val->len : 0,
                                       same, NULL, err, errlen)) != 0) {
            goto out;
        }
    }
    int written = 0;
    rv = store_commit(st, b, t, part, derive ? &d : NULL, &written, pend, err, errlen);
    if (!written) {
        goto out;
    }
    if (t->ttl.enabled && keyset_remove(&st->undeletable, key->data, key->len)) {
        /* Its leftover entry may sit below the cursor: let the sweep see it. */
        store_sweep_cursor_note(st, t->id, part, NULL, 0);
    }
out:
    store_derived_end(&d);
    db_batch_free(b);
    buf_fini(&scratch);
    return rv;
}

/* After the stripe lock is released: waits for the write's replicas (rv
 * 0; pend from write_one, or nothing pending), or, for a condition that
 * failed on what the partition holds, until the writes it saw are settled
 * (store_settle). Returns the outcome. */
static int finish_write(store *st, const table_schema *t, uint32_t part, int rv,
                        store_pending *pend, char *err, size_t errlen)
{
    if (rv == 0) {
        return store_commit_finish(st, pend, err, errlen);
    }
    if (rv == LAPSE_ECONDITION) {
        store_settle(st, t, part);
    }
    return rv;
}

/* ======================================================================== */
/* Point operations                                                         */
/* ======================================================================== */

/* A write that succeeded here: finished (waits for its replicas), or its
 * wait handed to the caller in *defer (store_put_begin). */
static int finish_or_defer(store *st, const table_schema *t, uint32_t part, int rv,
                           store_pending *pend, store_pending *defer, char *err, size_t errlen)
{
    if (defer != NULL && rv == 0) {
        *defer = *pend;
        return 0;
    }
    return finish_write(st, t, part, rv, pend, err, errlen);
}

/* One item put (val the item) or deleted (val NULL, it its key), for
 * store_put/_once/_begin and store_delete/_once/_begin: rid NULL, or no
 * old_out; defer NULL but for the _begin calls. */
static int point_write(store *st, const table_schema *t, const item *it, int is_delete,
                       const store_cond *cond, const uint8_t *rid, item **old_out,
                       store_pending *defer, char *err, size_t errlen)
{
    int rv;
    uint32_t part = 0;
    int64_t min_due_ms = STORE_NO_DUE;
    item *cur = NULL;
    stored old = {.found = 0};
    store_pending pend = {.ticket = NULL};
    once req;
    once_init(&req, rid, is_delete ? REQUEST_DELETE : REQUEST_PUT);
    buf key, val;
    buf_init(&key);
    buf_init(&val);
    buf_init(&old.raw);
    if (old_out != NULL) {
        *old_out = NULL;
    }
    if ((rv = schema_check_item(t, it, is_delete, err, errlen)) != 0 ||
        (rv = cond_validate(cond, err, errlen)) != 0) {
        goto out;
    }
    if ((rv = itemkey_of_item(&key, t, it, &part)) != 0 ||
        (!is_delete && (rv = item_encode(it, &val)) != 0)) {
        errf(rv, err, errlen, "cannot encode the %s (%s)", is_delete ? "key" : "item",
             lapse_strerror(rv));
        goto out;
    }
    const int ttl = t->ttl.enabled;
    const clock_wall now = ttl ? clock_wall_now() : (clock_wall){0};
    pthread_mutex_t *mu = store_stripe(st, t->id, part);
    pthread_mutex_lock(mu);
    if ((rv = store_repl_prepare(st, t, part, err, errlen)) != 0 ||
        (rv = once_check(st, t, part, &req, &pend, err, errlen)) != 0 || req.done) {
        goto unlock;
    }
    int must_write = 1;
    if (cond_needs_read(cond) || old_out != NULL || ttl || store_derived_wanted(t)) {
        if ((rv = read_for_write(st, &key, cond, old_out != NULL, &cur, &old, err, errlen)) != 0) {
            goto unlock;
        }
        must_write = !is_delete || old.found; /* deleting an absent item writes nothing */
    }
    if (must_write) {
        /* Both are decoded here: no bytes need comparing. */
        const expiry_entry none = {0, 0};
        rv = write_one(st, t, &key, &old, is_delete ? NULL : &val,
                       !is_delete && cur != NULL && item_eq_exact(cur, it),
                       store_derived_expiry_entry(t, cur, now),
                       is_delete ? none : store_derived_expiry_entry(t, it, now), &req, &min_due_ms,
                       &pend, err, errlen);
    }
unlock:
    pthread_mutex_unlock(mu);
    rv = finish_or_defer(st, t, part, rv, &pend, defer, err, errlen);
    if (rv == 0 && old_out != NULL) {
        *old_out = cur;
        cur = NULL;
    }
    /* Also after a write that committed here but failed to replicate, or
     * before it is through (a spurious wake-up costs the scanner nothing). */
    store_derived_notify(st, t->id, part, min_due_ms);
out:
    item_free(cur);
    buf_fini(&key);
    buf_fini(&val);
    buf_fini(&old.raw);
    once_fini(&req);
    return rv;
}

/* store.h's six point writes: one line each over point_write, the put and
 * delete triples alike but for the flag (not copies of any logic). */
int store_put(store *st, const table_schema *t, const item *it, const store_cond *cond,
              item **old_out, char *err, size_t errlen)
{
    return point_write(st, t, it, 0, cond, NULL, old_out, NULL, err, errlen);
}

int store_put_once(store *st, const table_schema *t, const item *it, const store_cond *cond,
                   const uint8_t *rid, char *err, size_t errlen)
{
    return point_write(st, t, it, 0, cond, rid, NULL, NULL, err, errlen);
}

int store_put_begin(store *st, const table_schema *t, const item *it, const store_cond *cond,
                    const uint8_t *rid, store_pending *pend, char *err, size_t errlen)
{
    memset(pend, 0, sizeof(*pend));
    return point_write(st, t, it, 0, cond, rid, NULL, pend, err, errlen);
}

int store_delete(store *st, const table_schema *t, const item *key, const store_cond *cond,
                 item **old_out, char *err, size_t errlen)
{
    return point_write(st, t, key, 1, cond, NULL, old_out, NULL, err, errlen);
}

int store_delete_once(store *st, const table_schema *t, const item *key, const store_cond *cond,
                      const uint8_t *rid, char *err, size_t errlen)
{
    return point_write(st, t, key, 1, cond, rid, NULL, NULL, err, errlen);
}

int store_delete_begin(store *st, const table_schema *t, const item *key, const store_cond *cond,
                       const uint8_t *rid, store_pending *pend, char *err, size_t errlen)
{
    memset(pend, 0, sizeof(*pend));
    return point_write(st, t, key, 1, cond, rid, NULL, pend, err, errlen);
}

static int is_key_attr(const table_schema *t, const char *name)
{
    return strcmp(name, t->pk.name) == 0 || (t->sk.name[0] != 0 && strcmp(name, t->sk.name) == 0);
}

static int actions_validate(const table_schema *t, const store_update_action *a, size_t n,
                            char *err, size_t errlen)
{
    if (n > 0 && a == NULL) {
        return errf(LAPSE_EINVAL, err, errlen, "update actions missing");
    }
    for (size_t i = 0; i < n; i++) {
        if (a[i].name == NULL || a[i].name[0] == 0) {
            return errf(LAPSE_EINVAL, err, errlen, "update action without an attribute name");
        }
        if (is_key_attr(t, a[i].name)) {
            return errf(LAPSE_EINVAL, err, errlen,
                        "cannot update attribute \"%s\": it is part of the key", a[i].name);
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(a[i].name, a[j].name) == 0) {
                return errf(LAPSE_EINVAL, err, errlen,
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
    return store_update_once(st, t, key, actions, nactions, cond, NULL, new_out, err, errlen);
}

/* Applies the update's actions to cur in place (a SET of an attribute
 * keeps its position), checks that the result is still a valid item (size
 * limit, nesting) and encodes it into val. 0, or an error with err (cur
 * may then be partly updated: the caller drops it). */
static int apply_actions(const table_schema *t, item *cur, const store_update_action *actions,
                         size_t nactions, buf *val, char *err, size_t errlen)
{
    int rv;
    for (size_t i = 0; i < nactions; i++) {
        if (actions[i].value == NULL) {
            item_remove(cur, actions[i].name);
        } else if ((rv = item_set_copy(cur, actions[i].name, actions[i].value)) != 0) {
            return errf(rv, err, errlen, "cannot set attribute \"%s\" (%s)", actions[i].name,
                        lapse_strerror(rv));
        }
    }
    if ((rv = schema_check_item(t, cur, 0, err, errlen)) != 0) {
        return rv;
    }
    buf_clear(val);
    if ((rv = item_encode(cur, val)) != 0) {
        return errf(rv, err, errlen, "cannot encode the item (%s)", lapse_strerror(rv));
    }
    return 0;
}

int store_update_once(store *st, const table_schema *t, const item *key,
                      const store_update_action *actions, size_t nactions, const store_cond *cond,
                      const uint8_t *rid, item **new_out, char *err, size_t errlen)
{
    int rv;
    uint32_t part = 0;
    int64_t min_due_ms = STORE_NO_DUE;
    item *cur = NULL;
    stored old = {.found = 0};
    store_pending pend = {.ticket = NULL};
    once req;
    once_init(&req, rid, REQUEST_UPDATE);
    buf k, val;
    buf_init(&k);
    buf_init(&val);
    buf_init(&old.raw);
    if (new_out != NULL) {
        *new_out = NULL;
    }
    if ((rv = schema_check_item(t, key, 1, err, errlen)) != 0 ||
        (rv = cond_validate(cond, err, errlen)) != 0 ||
        (rv = actions_validate(t, actions, nactions, err, errlen)) != 0) {
        goto out;
    }
    if ((rv = itemkey_of_item(&k, t, key, &part)) != 0) {
        errf(rv, err, errlen, "cannot encode the key (%s)", lapse_strerror(rv));
        goto out;
    }
    const clock_wall now = t->ttl.enabled ? clock_wall_now() : (clock_wall){0};
    pthread_mutex_t *mu = store_stripe(st, t->id, part);
    pthread_mutex_lock(mu);
    if ((rv = store_repl_prepare(st, t, part, err, errlen)) != 0 ||
        (rv = once_check(st, t, part, &req, &pend, err, errlen)) != 0 || req.done) {
        goto unlock;
    }
    /* The update applies to the stored item, so it must decode (need_item). */
    if ((rv = read_for_write(st, &k, cond, 1, &cur, &old, err, errlen)) != 0) {
        goto unlock;
    }
    const expiry_entry before =
        t->ttl.enabled ? store_derived_expiry_entry(t, cur, now) : (expiry_entry){0, 0};
    if (cur == NULL && (cur = item_dup(key)) == NULL) { /* upsert */
        rv = oom(err, errlen);
        goto unlock;
    }
    if ((rv = apply_actions(t, cur, actions, nactions, &val, err, errlen)) != 0) {
        goto unlock;
    }
    const expiry_entry after =
        t->ttl.enabled ? store_derived_expiry_entry(t, cur, now) : (expiry_entry){0, 0};
    /* The actions edit the stored item in place (a SET of an attribute keeps
     * its position): it is unchanged exactly when the bytes are. */
    const int same =
        old.found && old.raw.len == val.len && memcmp(old.raw.data, val.data, val.len) == 0;
    rv = write_one(st, t, &k, &old, &val, same, before, after, &req, &min_due_ms, &pend, err,
                   errlen);
unlock:
    pthread_mutex_unlock(mu);
    rv = finish_write(st, t, part, rv, &pend, err, errlen);
    /* Done before: the answer is the new item the record holds. */
    if (rv == 0 && req.done && (rv = item_decode(req.seen.item, req.seen.item_len, &cur)) != 0) {
        errf(rv, err, errlen, "request record's item failed to decode (%s)", lapse_strerror(rv));
    }
    if (rv == 0 && new_out != NULL) {
        *new_out = cur;
        cur = NULL;
    }
    /* Also after a write that committed here but failed to replicate (a
     * spurious wake-up costs the scanner nothing). */
    store_derived_notify(st, t->id, part, min_due_ms);
out:
    item_free(cur);
    buf_fini(&k);
    buf_fini(&val);
    buf_fini(&old.raw);
    once_fini(&req);
    return rv;
}
