/* schema.c: table key schemas and item checks (schema.h). */
#include "schema.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "errf.h"
#include "lapse_err.h"

/* Checks a table or index name (what: "table", "LSI", "GSI"). */
static int check_name(const char *what, const char *name, char *err, size_t errlen)
{
    size_t n = name == NULL ? 0 : strnlen(name, SCHEMA_MAX_NAME + 1);
    if (n < 3 || n > SCHEMA_MAX_NAME) {
        if (strcmp(what, "table") == 0) {
            return errf(LAPSE_EINVAL, err, errlen, "table name must be 3-255 characters");
        }
        return errf(LAPSE_EINVAL, err, errlen, "%s name \"%.64s\" must be 3-255 characters", what,
                    name != NULL ? name : "");
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == '-';
        if (!ok) {
            return errf(LAPSE_EINVAL, err, errlen,
                        "%s name \"%.64s\" may contain only A-Z a-z 0-9 _ . -", what, name);
        }
    }
    return 0;
}

int schema_validate_table_name(const char *name, char *err, size_t errlen)
{
    return check_name("table", name, err, errlen);
}

static int key_type_ok(attr_type t)
{
    return t == ATTR_S || t == ATTR_N || t == ATTR_B;
}

static int check_key_def(const key_def *k, const char *which, char *err, size_t errlen)
{
    size_t n = strnlen(k->name, sizeof(k->name));
    if (n == 0 || n >= sizeof(k->name)) {
        return errf(LAPSE_EINVAL, err, errlen, "%s key name must be 1-255 bytes", which);
    }
    if (!key_type_ok(k->type)) {
        return errf(LAPSE_EINVAL, err, errlen, "%s key \"%s\" must be of type S, N or B", which,
                    k->name);
    }
    return 0;
}

static int pow2_partitions(uint32_t n)
{
    return n != 0 && n <= SCHEMA_MAX_PARTITIONS && (n & (n - 1)) == 0;
}

/* ------------------------------------------------------------------------ */
/* Indexes and the stream                                                   */
/* ------------------------------------------------------------------------ */

/* The checks of one index that need no other index (kind "LSI" or "GSI"). */
static int check_index(const table_schema *t, const index_def *ix, const char *kind, char *err,
                       size_t errlen)
{
    char which[SCHEMA_MAX_NAME + 32];
    int rv;
    if ((rv = check_name(kind, ix->name, err, errlen)) != 0) {
        return rv;
    }
    if (ix->projection != INDEX_PROJECT_ALL && ix->projection != INDEX_PROJECT_KEYS) {
        return errf(LAPSE_EINVAL, err, errlen, "%s \"%s\": unknown projection %d", kind, ix->name,
                    (int)ix->projection);
    }
    if (strcmp(kind, "LSI") == 0) {
        if (t->sk.name[0] == 0) {
            return errf(LAPSE_EINVAL, err, errlen,
                        "LSI \"%s\" needs a table with a sort key; \"%s\" has none", ix->name,
                        t->name);
        }
        if (ix->pk.name[0] != 0) {
            return errf(LAPSE_EINVAL, err, errlen,
                        "LSI \"%s\" has the table's partition key; leave its own unset", ix->name);
        }
        snprintf(which, sizeof which, "LSI \"%s\" sort", ix->name);
        if ((rv = check_key_def(&ix->sk, which, err, errlen)) != 0) {
            return rv;
        }
        if (strcmp(ix->sk.name, t->pk.name) == 0) {
            return errf(LAPSE_EINVAL, err, errlen,
                        "LSI \"%s\": sort key \"%s\" must differ from the table's partition key",
                        ix->name, ix->sk.name);
        }
        if (ix->partitions != 0) {
            return errf(LAPSE_EINVAL, err, errlen,
                        "LSI \"%s\" lives in the table's partitions; it cannot have %u of its own",
                        ix->name, (unsigned)ix->partitions);
        }
        return 0;
    }
    snprintf(which, sizeof which, "GSI \"%s\" partition", ix->name);
    if ((rv = check_key_def(&ix->pk, which, err, errlen)) != 0) {
        return rv;
    }
    if (ix->sk.name[0] != 0) {
        snprintf(which, sizeof which, "GSI \"%s\" sort", ix->name);
        if ((rv = check_key_def(&ix->sk, which, err, errlen)) != 0) {
            return rv;
        }
        if (strcmp(ix->sk.name, ix->pk.name) == 0) {
            return errf(LAPSE_EINVAL, err, errlen,
                        "GSI \"%s\": sort key \"%s\" must differ from its partition key", ix->name,
                        ix->sk.name);
        }
    }
    if (!pow2_partitions(ix->partitions)) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "GSI \"%s\": partition count %u must be a power of two from 1 to %d", ix->name,
                    (unsigned)ix->partitions, SCHEMA_MAX_PARTITIONS);
    }
    return 0;
}

/* The key attributes of the table and its indexes, for the cross checks. */
typedef struct key_use {
    const key_def *k;
    const char *owner; /* "the table" or an index name */
} key_use;

/* One type per attribute name over the table's and its indexes' keys: an
 * index key declared with another type than the table's key of that name
 * could never hold an item. */
static int check_key_types(const table_schema *t, char *err, size_t errlen)
{
    key_use use[2 + 2 * (SCHEMA_MAX_LSI + SCHEMA_MAX_GSI)];
    size_t n = 0;
    use[n++] = (key_use){&t->pk, "the table"};
    if (t->sk.name[0] != 0) {
        use[n++] = (key_use){&t->sk, "the table"};
    }
    for (uint32_t i = 0; i < t->nlsi; i++) {
        use[n++] = (key_use){&t->lsi[i].sk, t->lsi[i].name};
    }
    for (uint32_t i = 0; i < t->ngsi; i++) {
        use[n++] = (key_use){&t->gsi[i].pk, t->gsi[i].name};
        if (t->gsi[i].sk.name[0] != 0) {
            use[n++] = (key_use){&t->gsi[i].sk, t->gsi[i].name};
        }
    }
    for (size_t i = 1; i < n; i++) {
        for (size_t j = 0; j < i; j++) {
            if (strcmp(use[i].k->name, use[j].k->name) == 0 && use[i].k->type != use[j].k->type) {
                return errf(LAPSE_EINVAL, err, errlen,
                            "key attribute \"%s\" is of type %s in %s but %s in %s", use[i].k->name,
                            item_type_name(use[j].k->type), use[j].owner,
                            item_type_name(use[i].k->type), use[i].owner);
            }
        }
    }
    return 0;
}

/* Names unique across LSIs and GSIs, ids non-zero and unique. */
static int check_index_identity(const table_schema *t, char *err, size_t errlen)
{
    const index_def *all[SCHEMA_MAX_LSI + SCHEMA_MAX_GSI];
    const char *kind[SCHEMA_MAX_LSI + SCHEMA_MAX_GSI];
    size_t n = 0;
    for (uint32_t i = 0; i < t->nlsi; i++) {
        kind[n] = "LSI";
        all[n++] = &t->lsi[i];
    }
    for (uint32_t i = 0; i < t->ngsi; i++) {
        kind[n] = "GSI";
        all[n++] = &t->gsi[i];
    }
    for (size_t i = 0; i < n; i++) {
        if (all[i]->id == 0) {
            return errf(LAPSE_EINVAL, err, errlen, "%s \"%s\" has no index id", kind[i],
                        all[i]->name);
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(all[i]->name, all[j]->name) == 0) {
                return errf(LAPSE_EINVAL, err, errlen, "index name \"%s\" is used twice",
                            all[i]->name);
            }
            if (all[i]->id == all[j]->id) {
                return errf(LAPSE_EINVAL, err, errlen,
                            "%s \"%s\" and %s \"%s\" have the same index id %u", kind[j],
                            all[j]->name, kind[i], all[i]->name, (unsigned)all[i]->id);
            }
        }
    }
    return 0;
}

static int check_indexes_and_stream(const table_schema *t, char *err, size_t errlen)
{
    int rv;
    if (t->nlsi > SCHEMA_MAX_LSI) {
        return errf(LAPSE_EINVAL, err, errlen, "%u LSIs; a table has at most %d", (unsigned)t->nlsi,
                    SCHEMA_MAX_LSI);
    }
    if (t->ngsi > SCHEMA_MAX_GSI) {
        return errf(LAPSE_EINVAL, err, errlen, "%u GSIs; a table has at most %d", (unsigned)t->ngsi,
                    SCHEMA_MAX_GSI);
    }
    for (uint32_t i = 0; i < t->nlsi; i++) {
        if ((rv = check_index(t, &t->lsi[i], "LSI", err, errlen)) != 0) {
            return rv;
        }
    }
    for (uint32_t i = 0; i < t->ngsi; i++) {
        if ((rv = check_index(t, &t->gsi[i], "GSI", err, errlen)) != 0) {
            return rv;
        }
    }
    if ((rv = check_index_identity(t, err, errlen)) != 0 ||
        (rv = check_key_types(t, err, errlen)) != 0) {
        return rv;
    }
    if (t->stream.retention_hours > SCHEMA_MAX_STREAM_RETENTION_HOURS) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "stream retention of %u hours is over the limit of %d (a year)",
                    (unsigned)t->stream.retention_hours, SCHEMA_MAX_STREAM_RETENTION_HOURS);
    }
    return 0;
}

int schema_validate(const table_schema *t, char *err, size_t errlen)
{
    int rv;
    if ((rv = schema_validate_table_name(t->name, err, errlen)) != 0) {
        return rv;
    }
    if ((rv = check_key_def(&t->pk, "partition", err, errlen)) != 0) {
        return rv;
    }
    if (t->sk.name[0] != 0) {
        if ((rv = check_key_def(&t->sk, "sort", err, errlen)) != 0) {
            return rv;
        }
        if (strcmp(t->sk.name, t->pk.name) == 0) {
            return errf(LAPSE_EINVAL, err, errlen,
                        "sort key \"%s\" must differ from the partition key", t->sk.name);
        }
    }
    if (!pow2_partitions(t->partitions)) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "partition count %u must be a power of two from 1 to %d",
                    (unsigned)t->partitions, SCHEMA_MAX_PARTITIONS);
    }
    if (t->replication > SCHEMA_MAX_REPLICATION) {
        return errf(LAPSE_EINVAL, err, errlen, "replication %u must be from 1 to %d copies",
                    (unsigned)t->replication, SCHEMA_MAX_REPLICATION);
    }
    return check_indexes_and_stream(t, err, errlen);
}

/* Depth of the deepest value under v, counting v as 1. Stops counting once
 * past limit so a pathological value costs no more than limit levels. */
static int value_depth(const attr_value *v, int limit)
{
    if (limit <= 0) {
        return 1;
    }
    int d = 0;
    if (v->type == ATTR_L) {
        for (size_t i = 0; i < v->u.list.n; i++) {
            int c = value_depth(&v->u.list.v[i], limit - 1);
            d = c > d ? c : d;
        }
    } else if (v->type == ATTR_M) {
        for (size_t i = 0; i < v->u.map.n; i++) {
            int c = value_depth(&v->u.map.v[i].value, limit - 1);
            d = c > d ? c : d;
        }
    }
    return d + 1;
}

static int check_key_value(const key_def *k, const attr_value *v, size_t max_bytes, char *err,
                           size_t errlen)
{
    if (v == NULL) {
        return errf(LAPSE_EINVAL, err, errlen, "missing key attribute \"%s\"", k->name);
    }
    if (v->type != k->type) {
        return errf(LAPSE_EINVAL, err, errlen, "key attribute \"%s\" must be of type %s, got %s",
                    k->name, item_type_name(k->type), item_type_name(v->type));
    }
    if (v->type == ATTR_S || v->type == ATTR_B) {
        if (v->u.bytes.len == 0) {
            return errf(LAPSE_EINVAL, err, errlen, "key attribute \"%s\" must not be empty",
                        k->name);
        }
        if (v->u.bytes.len > max_bytes) {
            return errf(LAPSE_ETOOBIG, err, errlen,
                        "key attribute \"%s\" is %zu bytes, over the %zu-byte limit", k->name,
                        v->u.bytes.len, max_bytes);
        }
    }
    return 0;
}

/* An index key attribute may be absent (the item is not in that index: indexes
 * are sparse), but when present it must have the declared type and obey the
 * key rules: DynamoDB refuses such a write rather than leaving the item
 * silently out of the index. role, kind and index name the key in the
 * reason ("sort", "local", "ByDate"); nothing is formatted unless it fails,
 * since every write of an indexed table comes through here. */
static int check_index_value(const key_def *k, const char *role, const char *kind,
                             const char *index, const attr_value *v, size_t max_bytes, char *err,
                             size_t errlen)
{
    if (v == NULL) {
        return 0;
    }
    int bytes = v->type == ATTR_S || v->type == ATTR_B;
    if (v->type != k->type) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "attribute \"%s\" is the %s key of %s secondary index \"%s\" and must be of "
                    "type %s, got %s",
                    k->name, role, kind, index, item_type_name(k->type), item_type_name(v->type));
    }
    if (bytes && v->u.bytes.len == 0) {
        return errf(LAPSE_EINVAL, err, errlen,
                    "attribute \"%s\" is the %s key of %s secondary index \"%s\" and must not be "
                    "empty",
                    k->name, role, kind, index);
    }
    if (bytes && v->u.bytes.len > max_bytes) {
        return errf(LAPSE_ETOOBIG, err, errlen,
                    "attribute \"%s\" is the %s key of %s secondary index \"%s\": %zu bytes, over "
                    "the %zu-byte limit",
                    k->name, role, kind, index, v->u.bytes.len, max_bytes);
    }
    return 0;
}

/* Every index key attribute the item carries (check_index_value). */
static int check_index_keys(const table_schema *t, const item *it, char *err, size_t errlen)
{
    int rv = 0;
    for (uint32_t i = 0; i < t->nlsi && rv == 0; i++) {
        const index_def *x = &t->lsi[i];
        rv = check_index_value(&x->sk, "sort", "local", x->name, item_get(it, x->sk.name),
                               SCHEMA_MAX_SORT_KEY_BYTES, err, errlen);
    }
    for (uint32_t i = 0; i < t->ngsi && rv == 0; i++) {
        const index_def *x = &t->gsi[i];
        rv = check_index_value(&x->pk, "partition", "global", x->name, item_get(it, x->pk.name),
                               SCHEMA_MAX_KEY_BYTES, err, errlen);
        if (rv == 0 && x->sk.name[0] != 0) {
            rv = check_index_value(&x->sk, "sort", "global", x->name, item_get(it, x->sk.name),
                                   SCHEMA_MAX_SORT_KEY_BYTES, err, errlen);
        }
    }
    return rv;
}

int schema_check_item(const table_schema *t, const item *it, int key_only, char *err, size_t errlen)
{
    int rv;
    if ((rv = check_key_value(&t->pk, item_get(it, t->pk.name), SCHEMA_MAX_KEY_BYTES, err,
                              errlen)) != 0) {
        return rv;
    }
    int has_sk = t->sk.name[0] != 0;
    if (has_sk && (rv = check_key_value(&t->sk, item_get(it, t->sk.name), SCHEMA_MAX_SORT_KEY_BYTES,
                                        err, errlen)) != 0) {
        return rv;
    }
    if (key_only) {
        for (size_t i = 0; i < it->n; i++) {
            const char *nm = it->attrs[i].name;
            if (strcmp(nm, t->pk.name) != 0 && !(has_sk && strcmp(nm, t->sk.name) == 0)) {
                return errf(LAPSE_EINVAL, err, errlen,
                            "key must contain only the key attributes, found \"%s\"", nm);
            }
        }
    }
    for (size_t i = 0; i < it->n; i++) {
        if (value_depth(&it->attrs[i].value, ITEM_MAX_DEPTH + 1) > ITEM_MAX_DEPTH) {
            return errf(LAPSE_EINVAL, err, errlen,
                        "attribute \"%s\" is nested deeper than %d levels", it->attrs[i].name,
                        ITEM_MAX_DEPTH);
        }
    }
    if (!key_only && (rv = check_index_keys(t, it, err, errlen)) != 0) {
        return rv;
    }
    size_t sz = item_size(it);
    if (sz > ITEM_MAX_BYTES) {
        return errf(LAPSE_ETOOBIG, err, errlen, "item size %zu bytes exceeds the %d-byte limit", sz,
                    ITEM_MAX_BYTES);
    }
    return 0;
}

int schema_key_of(const table_schema *t, const item *it, item **out)
{
    item *k = item_new();
    if (k == NULL) {
        return LAPSE_ENOMEM;
    }
    const key_def *defs[2] = {&t->pk, &t->sk};
    for (int i = 0; i < 2; i++) {
        if (defs[i]->name[0] == 0) {
            continue;
        }
        const attr_value *v = item_get(it, defs[i]->name);
        if (v == NULL) {
            continue; /* REQUIRES says it is there; degrade gracefully */
        }
        int rv = item_set_copy(k, defs[i]->name, v);
        if (rv != 0) {
            item_free(k);
            return rv;
        }
    }
    *out = k;
    return 0;
}
