/*
 * ddb_batch.c: BatchWriteItem and BatchGetItem (ddb_query.h) on
 * lapse_batch_write and lapse_batch_get, one liblapse call per table.
 */
#include <stdlib.h>
#include <string.h>

#include "ddb_expr.h"
#include "ddb_query.h"

/* 1 when a liblapse failure means "not done, try again" (UnprocessedItems):
 * the SDKs resend those, and puts and deletes are idempotent. */
static int retryable(const lapse_error *err)
{
    return err->code == LAPSE_ETIMEDOUT || err->code == LAPSE_EUNAVAILABLE;
}

/* The text of key's attributes in a canonical form, to find duplicates
 * (caller frees). */
static char *key_text(ddb_ctx *x, const lapse_item *key)
{
    json_t *j = ddb_req_item_json(x, key);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return s;
}

static int duplicate(ddb_ctx *x, json_t *seen, const lapse_item *key)
{
    char *k = key_text(x, key);
    if (k == NULL) {
        return -1;
    }
    if (json_object_get(seen, k) != NULL) {
        free(k);
        return ddb_req_fail(x, 400, "ValidationException",
                            "Provided list of item keys contains duplicates");
    }
    json_object_set_new(seen, k, json_true());
    free(k);
    return 0;
}

static void free_items(lapse_item **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        lapse_item_free(v[i]);
    }
    free(v);
}

/* One table's share of a BatchWriteItem. On a retryable failure, reqs goes
 * to unprocessed[table]. */
static int write_table(ddb_ctx *x, const char *table, json_t *reqs, json_t *unprocessed)
{
    size_t n = json_array_size(reqs), np = 0, nd = 0, i;
    lapse_item **puts = calloc(n ? n : 1, sizeof *puts), **dels = calloc(n ? n : 1, sizeof *dels);
    json_t *seen = json_object(), *r;
    lapse_error err;
    int rv = -1;
    if (puts == NULL || dels == NULL || seen == NULL) {
        ddb_req_fail(x, 500, "InternalServerError", "out of memory");
        goto out;
    }
    json_array_foreach(reqs, i, r)
    {
        json_t *put = json_object_get(r, "PutRequest"), *del = json_object_get(r, "DeleteRequest");
        if (!json_is_object(r) || (put == NULL) == (del == NULL) || json_object_size(r) != 1) {
            ddb_req_fail(x, 400, "ValidationException",
                         "Each WriteRequest has exactly one of PutRequest or DeleteRequest");
            goto out;
        }
        json_t *obj;
        lapse_item *it = NULL, *key = NULL;
        if (put != NULL) {
            if (ddb_req_object(x, put, "Item", 1, &obj) != 0 ||
                ddb_req_item(x, obj, "Item", &it) != 0) {
                goto out;
            }
            puts[np++] = it;
        } else {
            if (ddb_req_object(x, del, "Key", 1, &obj) != 0 ||
                ddb_req_item(x, obj, "Key", &it) != 0) {
                goto out;
            }
            dels[nd++] = it;
        }
        if (lapse_check_item(x->c, table, it, del != NULL, &err) != 0) {
            ddb_req_lapse_fail(x, &err, table);
            goto out;
        }
        if (ddb_expr_key_of(x, table, it, &key) != 0) {
            goto out;
        }
        int dup = duplicate(x, seen, key);
        lapse_item_free(key);
        if (dup != 0) {
            goto out;
        }
    }
    if (lapse_batch_write(x->c, table, puts, np, dels, nd, &err) != 0) {
        if (!retryable(&err)) {
            ddb_req_lapse_fail(x, &err, table);
            goto out;
        }
        json_object_set(unprocessed, table, reqs);
    }
    rv = 0;
out:
    free_items(puts, np);
    free_items(dels, nd);
    json_decref(seen);
    return rv;
}

/* The RequestItems map of a batch call, its total size checked. */
static int request_items(ddb_ctx *x, json_t *req, const char *op, size_t max, int get, json_t **out)
{
    const char *table;
    json_t *v;
    size_t total = 0;
    if (ddb_req_object(x, req, "RequestItems", 1, out) != 0) {
        return -1;
    }
    if (json_object_size(*out) == 0) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "1 validation error detected: Value at 'requestItems' failed to "
                            "satisfy constraint: Member must have length greater than or equal "
                            "to 1");
    }
    json_object_foreach(*out, table, v)
    {
        json_t *list = get ? json_object_get(v, "Keys") : v;
        if (!json_is_array(list) || json_array_size(list) == 0) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "%s: the requests of table %.255s must be a non-empty list%s", op,
                                table, get ? " of Keys" : "");
        }
        total += json_array_size(list);
    }
    if (total > max) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "Too many items requested for the %s call: %zu, the limit is %zu", op,
                            total, max);
    }
    return 0;
}

int ddb_batch_write(ddb_ctx *x, json_t *req)
{
    json_t *items, *v, *unprocessed = json_object();
    const char *table;
    if (unprocessed == NULL) {
        return ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    if (request_items(x, req, "BatchWriteItem", DDB_BATCH_WRITE_MAX, 0, &items) != 0) {
        json_decref(unprocessed);
        return -1;
    }
    json_object_foreach(items, table, v)
    {
        if (write_table(x, table, v, unprocessed) != 0) {
            json_decref(unprocessed);
            return -1;
        }
    }
    x->out = json_pack("{s:o}", "UnprocessedItems", unprocessed);
    return 0;
}

/* One table's share of a BatchGetItem into responses[table]. */
static int get_table(ddb_ctx *x, const char *table, json_t *spec, json_t *responses,
                     json_t *unprocessed)
{
    json_t *keys = json_object_get(spec, "Keys"), *k, *seen = json_object(), *found = NULL;
    size_t n = json_array_size(keys), nk = 0, i;
    lapse_item **in = calloc(n ? n : 1, sizeof *in), **out = calloc(n ? n : 1, sizeof *out);
    expr_ctx e;
    expr_node *proj = NULL;
    lapse_error err;
    int consistent = 0, rv = -1;
    if (ddb_expr_init(x, spec, &e) != 0 ||
        ddb_req_bool(x, spec, "ConsistentRead", 0, &consistent) != 0 ||
        ddb_expr_projection(x, &e, spec, &proj) != 0 || ddb_expr_done(x, &e) != 0) {
        goto out;
    }
    if (in == NULL || out == NULL || seen == NULL) {
        ddb_req_fail(x, 500, "InternalServerError", "out of memory");
        goto out;
    }
    json_array_foreach(keys, i, k)
    {
        if (!json_is_object(k)) {
            ddb_req_fail(x, 400, "SerializationException", "Keys: each key must be an object");
            goto out;
        }
        if (ddb_req_item(x, k, "Key", &in[nk]) != 0) {
            goto out;
        }
        nk++;
        if (lapse_check_item(x->c, table, in[nk - 1], 1, &err) != 0) {
            ddb_req_lapse_fail(x, &err, table);
            goto out;
        }
        if (duplicate(x, seen, in[nk - 1]) != 0) {
            goto out;
        }
    }
    lapse_read_opts ro = {.eventually_consistent = !consistent};
    if (lapse_batch_get_opts(x->c, table, in, nk, &ro, out, &err) != 0) {
        if (!retryable(&err)) {
            ddb_req_lapse_fail(x, &err, table);
            goto out;
        }
        json_object_set(unprocessed, table, spec);
        rv = 0;
        goto out;
    }
    found = json_array();
    for (i = 0; i < nk; i++) {
        if (out[i] == NULL) {
            continue;
        }
        json_t *doc = ddb_req_item_json(x, out[i]);
        if (doc == NULL) {
            goto out;
        }
        json_array_append_new(found, proj ? expr_project(proj, doc) : json_incref(doc));
        json_decref(doc);
    }
    json_object_set(responses, table, found);
    rv = 0;
out:
    json_decref(found);
    free_items(in, nk);
    free_items(out, out ? nk : 0);
    json_decref(seen);
    expr_ctx_fini(&e);
    return rv;
}

int ddb_batch_get(ddb_ctx *x, json_t *req)
{
    json_t *items, *v, *responses = json_object(), *unprocessed = json_object();
    const char *table;
    if (responses == NULL || unprocessed == NULL ||
        request_items(x, req, "BatchGetItem", DDB_BATCH_GET_MAX, 1, &items) != 0) {
        json_decref(responses);
        json_decref(unprocessed);
        return x->status != 200 ? -1 : ddb_req_fail(x, 500, "InternalServerError", "oom");
    }
    json_object_foreach(items, table, v)
    {
        if (!json_is_object(v) || get_table(x, table, v, responses, unprocessed) != 0) {
            json_decref(responses);
            json_decref(unprocessed);
            return x->status != 200 ? -1
                                    : ddb_req_fail(x, 400, "SerializationException",
                                                   "RequestItems: each table maps to an object");
        }
    }
    x->out = json_pack("{s:o,s:o}", "Responses", responses, "UnprocessedKeys", unprocessed);
    return 0;
}
