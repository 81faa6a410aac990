/*
 * ddb_meta.c: the gateway's own per-table documents (ddb_meta.h).
 */
#include "ddb_meta.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"

#define META_PARTITIONS 8 /* a few small items per table */

/* Until this monotonic ms, DDB_META_TABLE is taken to be absent without
 * asking: a cluster that never needed it would otherwise make every read of
 * an index the nodes keep whole refresh liblapse's map from the coordinator
 * (the client's answer to a table it does not know). One second after
 * another gateway first creates it, this one sees it. */
#define ABSENT_RECHECK_MS 1000
static _Atomic int64_t absent_until_ms;

/* The meta item's key of table: {"k": "<table>@<created_ms>"}. */
static lapse_item *meta_key(const char *table, int64_t created_ms)
{
    char k[300];
    snprintf(k, sizeof k, "%.255s@%" PRId64, table, created_ms);
    lapse_item *it = lapse_item_new();
    if (it != NULL && lapse_item_set_s(it, "k", k) != 0) {
        lapse_item_free(it);
        it = NULL;
    }
    return it;
}

/* Table's document into *out (new object) and, when stored, its text into
 * *raw (caller frees; NULL: none); fresh: ask even when the table was just
 * seen absent. */
static int meta_read(ddb_ctx *x, const char *table, int64_t created_ms, int fresh, json_t **out,
                     char **raw)
{
    lapse_item *key = NULL, *it = NULL;
    lapse_error err;
    *out = NULL;
    *raw = NULL;
    if (!fresh && clock_mono_now().ms < atomic_load(&absent_until_ms)) {
        *out = json_object();
        return *out != NULL ? 0 : ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    if ((key = meta_key(table, created_ms)) == NULL) {
        return ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    /* A plain read may come from any in-sync copy; a change reads the
     * primary, whose copy its condition is checked against. */
    lapse_read_opts ro = {.eventually_consistent = !fresh};
    int rv = lapse_get_opts(x->c, DDB_META_TABLE, key, &ro, &it, &err);
    lapse_item_free(key);
    if (rv == LAPSE_ENOTFOUND) {
        atomic_store(&absent_until_ms, clock_mono_now().ms + ABSENT_RECHECK_MS);
        *out = json_object(); /* no gateway has written any yet */
        return 0;
    }
    if (rv != 0) {
        return ddb_req_lapse_fail(x, &err, DDB_META_TABLE);
    }
    const char *text = it != NULL ? lapse_item_get_s(it, "doc") : NULL;
    *out = text != NULL ? json_loads(text, 0, NULL) : json_object();
    *raw = text != NULL ? strdup(text) : NULL;
    lapse_item_free(it);
    if (!json_is_object(*out) || (text != NULL && *raw == NULL)) {
        json_decref(*out);
        *out = NULL;
        free(*raw);
        *raw = NULL;
        return ddb_req_fail(x, 500, "InternalServerError", "unreadable gateway document of %s",
                            table);
    }
    return 0;
}

int ddb_meta_get(ddb_ctx *x, const char *table, int64_t created_ms, json_t **out)
{
    char *raw = NULL;
    int rv = meta_read(x, table, created_ms, 0, out, &raw);
    free(raw);
    return rv;
}

/* Creates DDB_META_TABLE unless it is there. */
static int meta_table(ddb_ctx *x)
{
    lapse_table_def def = {.name = DDB_META_TABLE,
                           .partition_key = "k",
                           .partition_key_type = 'S',
                           .partitions = META_PARTITIONS};
    lapse_error err;
    int rv = lapse_create_table(x->c, &def, &err);
    if (rv != 0 && rv != LAPSE_EEXISTS) {
        return ddb_req_lapse_fail(x, &err, DDB_META_TABLE);
    }
    return 0;
}

/* Writes doc as table's document (deletes it when empty) under cond (NULL:
 * none). Returns 0, or -1 with x's error set (ConditionalCheckFailed when
 * cond was false). */
static int meta_write(ddb_ctx *x, const char *table, int64_t created_ms, json_t *doc,
                      const lapse_condition *cond)
{
    lapse_item *it = meta_key(table, created_ms);
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    lapse_error err;
    int rv = -1, lrv;
    if (it == NULL || text == NULL) {
        ddb_req_fail(x, 500, "InternalServerError", "out of memory");
        goto out;
    }
    if (json_object_size(doc) == 0) {
        lrv = lapse_delete(x->c, DDB_META_TABLE, it, cond, &err);
        rv = lrv == 0 || (lrv == LAPSE_ENOTFOUND && cond == NULL)
                 ? 0
                 : ddb_req_lapse_fail(x, &err, table);
        goto out;
    }
    if (lapse_item_set_s(it, "doc", text) != 0) {
        ddb_req_fail(x, 500, "InternalServerError", "out of memory");
        goto out;
    }
    lrv = lapse_put(x->c, DDB_META_TABLE, it, cond, &err);
    if (lrv == LAPSE_ENOTFOUND) { /* the first document any gateway writes */
        if (meta_table(x) != 0) {
            goto out;
        }
        lrv = lapse_put(x->c, DDB_META_TABLE, it, cond, &err);
    }
    if (lrv == 0) {
        atomic_store(&absent_until_ms, 0);
    }
    rv = lrv == 0 ? 0 : ddb_req_lapse_fail(x, &err, table);
out:
    free(text);
    lapse_item_free(it);
    return rv;
}

int ddb_meta_put(ddb_ctx *x, const char *table, int64_t created_ms, json_t *doc)
{
    return meta_write(x, table, created_ms, doc, NULL);
}

#define UPDATE_TRIES 8

int ddb_meta_update(ddb_ctx *x, const char *table, int64_t created_ms,
                    int (*fn)(ddb_ctx *x, json_t *doc, void *arg), void *arg)
{
    for (int i = 0; i < UPDATE_TRIES; i++) {
        json_t *doc = NULL;
        char *raw = NULL, *value = NULL;
        if (meta_read(x, table, created_ms, 1, &doc, &raw) != 0) {
            return -1;
        }
        /* Written only over what was read: the same text, or still none. */
        json_t *v = raw != NULL ? json_pack("{s:s}", "S", raw) : NULL;
        value = v != NULL ? json_dumps(v, JSON_COMPACT) : NULL;
        json_decref(v);
        lapse_condition cond = {.kind = raw != NULL ? LAPSE_COND_EQUALS : LAPSE_COND_NOT_EXISTS,
                                .attribute = raw != NULL ? "doc" : "k",
                                .value_json = value};
        int rv = raw != NULL && value == NULL
                     ? ddb_req_fail(x, 500, "InternalServerError", "out of memory")
                     : fn(x, doc, arg);
        if (rv == 0) {
            rv = raw == NULL && json_object_size(doc) == 0
                     ? 0 /* nothing stored, nothing to store */
                     : meta_write(x, table, created_ms, doc, &cond);
        }
        json_decref(doc);
        free(raw);
        free(value);
        if (rv == 0 || strcmp(x->type, "ConditionalCheckFailedException") != 0) {
            return rv;
        }
    }
    return ddb_req_fail(x, 500, "InternalServerError",
                        "the gateway's document of %s kept changing under %d attempts", table,
                        UPDATE_TRIES);
}

int ddb_meta_reserved(ddb_ctx *x, const char *op, json_t *req)
{
    const char *t = json_string_value(json_object_get(req, "TableName"));
    const char *arn = json_string_value(json_object_get(req, "ResourceArn"));
    const char *tail = arn != NULL ? strstr(arn, ":table/") : NULL;
    int named = (t != NULL && strcmp(t, DDB_META_TABLE) == 0) ||
                (tail != NULL && strcmp(tail + 7, DDB_META_TABLE) == 0);
    named = named || json_object_get(json_object_get(req, "RequestItems"), DDB_META_TABLE) != NULL;
    if (!named) {
        return 0;
    }
    if (strcmp(op, "CreateTable") == 0) {
        ddb_req_fail(x, 400, "ValidationException",
                     "Table name " DDB_META_TABLE " is reserved by the Lapse gateway");
    } else {
        ddb_req_fail(x, 400, "ResourceNotFoundException",
                     "Requested resource not found: Table: " DDB_META_TABLE " not found");
    }
    return 1;
}
