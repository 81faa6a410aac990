/*
 * ddb_query.c: Query and Scan (ddb_query.h).
 */
#include "ddb_query.h"

#include <stdlib.h>
#include <string.h>

#include "ddb_expr.h"

/* ---- the key condition ---- */

typedef struct keycond {
    json_t *pk_value; /* borrowed */
    lapse_sk_op op;
    json_t *sk_value, *sk_hi; /* borrowed */
} keycond;

static int one_key_part(ddb_ctx *x, const expr_node *n, const char *pk, const char *sk, keycond *k)
{
    static const lapse_sk_op ops[] = {LAPSE_SK_EQ, LAPSE_SK_NONE, LAPSE_SK_LT,
                                      LAPSE_SK_LE, LAPSE_SK_GT,   LAPSE_SK_GE};
    static const lapse_sk_op flipped[] = {LAPSE_SK_EQ, LAPSE_SK_NONE, LAPSE_SK_GT,
                                          LAPSE_SK_GE, LAPSE_SK_LT,   LAPSE_SK_LE};
    const expr_node *path = NULL;
    lapse_sk_op op = LAPSE_SK_NONE;
    json_t *v = NULL, *hi = NULL;
    if (n->kind == EXPR_CMP && n->op != EXPR_NE) {
        if (n->a->kind == EXPR_PATH && n->b->kind == EXPR_VALUE) {
            path = n->a, v = n->b->value, op = ops[n->op];
        } else if (n->b->kind == EXPR_PATH && n->a->kind == EXPR_VALUE) {
            path = n->b, v = n->a->value, op = flipped[n->op];
        }
    } else if (n->kind == EXPR_BETWEEN && n->a->kind == EXPR_PATH && n->b->kind == EXPR_VALUE &&
               n->c->kind == EXPR_VALUE) {
        path = n->a, v = n->b->value, hi = n->c->value, op = LAPSE_SK_BETWEEN;
    } else if (n->kind == EXPR_FUNC && n->op == EXPR_FN_BEGINS_WITH && n->b->kind == EXPR_VALUE) {
        path = n->a, v = n->b->value, op = LAPSE_SK_BEGINS_WITH;
    }
    if (path == NULL || path->path->next != NULL) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "Invalid operator used in KeyConditionExpression: a key condition is "
                            "key = :v, a comparison (<, <=, >, >=) or BETWEEN of the sort key "
                            "with values, or begins_with(sort key, :v)");
    }
    const char *name = path->path->name;
    if (strcmp(name, pk) == 0) {
        if (op != LAPSE_SK_EQ || k->pk_value != NULL) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "Query key condition not supported: the partition key %s takes "
                                "one equality condition",
                                pk);
        }
        k->pk_value = v;
        return 0;
    }
    if (sk[0] != '\0' && strcmp(name, sk) == 0 && k->op == LAPSE_SK_NONE) {
        k->op = op, k->sk_value = v, k->sk_hi = hi;
        return 0;
    }
    return ddb_req_fail(x, 400, "ValidationException",
                        "Query condition missed key schema element: %s is not a key attribute "
                        "of this table or index (keys: %s%s%s)",
                        name, pk, sk[0] ? ", " : "", sk);
}

static int key_condition(ddb_ctx *x, const expr_node *c, const char *pk, const char *sk, keycond *k)
{
    memset(k, 0, sizeof *k);
    if (c->kind == EXPR_AND) {
        if (c->a->kind == EXPR_AND || c->b->kind == EXPR_AND) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "Conditions can be of length 1 or 2 only");
        }
        if (one_key_part(x, c->a, pk, sk, k) != 0 || one_key_part(x, c->b, pk, sk, k) != 0) {
            return -1;
        }
    } else if (one_key_part(x, c, pk, sk, k) != 0) {
        return -1;
    }
    if (k->pk_value == NULL) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "Query condition missed key schema element: %s", pk);
    }
    return 0;
}

/* DynamoDB refuses a Query filter on the key attributes (the key condition
 * is where they go). */
static int filter_on_keys(ddb_ctx *x, const expr_node *filter, const char *pk, const char *sk)
{
    json_t *reads = json_object();
    int rv = 0;
    ddb_expr_reads(filter, reads);
    const char *keys[2] = {pk, sk};
    for (int i = 0; i < 2 && rv == 0; i++) {
        if (keys[i][0] != '\0' && json_object_get(reads, keys[i]) != NULL) {
            rv = ddb_req_fail(x, 400, "ValidationException",
                              "Filter Expression can only contain non-primary key attributes: "
                              "Primary key attribute: %s",
                              keys[i]);
        }
    }
    json_decref(reads);
    return rv;
}

/* ---- shared by Query and Scan ---- */

typedef struct reader {
    expr_ctx e;
    expr_node *filter, *proj;
    int count_only;
    long limit;
    lapse_item *start;
} reader;

static int reader_init(ddb_ctx *x, json_t *req, reader *r)
{
    const char *select;
    memset(r, 0, sizeof *r);
    if (ddb_expr_init(x, req, &r->e) != 0 ||
        ddb_expr_condition(x, &r->e, req, "FilterExpression", &r->filter) != 0 ||
        ddb_expr_projection(x, &r->e, req, &r->proj) != 0 ||
        ddb_req_string(x, req, "Select", 0, &select) != 0 ||
        ddb_req_int(x, req, "Limit", 1, 1000000, &r->limit) != 0) {
        return -1;
    }
    if (select != NULL) {
        if (strcmp(select, "COUNT") == 0) {
            r->count_only = 1;
        } else if (strcmp(select, "ALL_ATTRIBUTES") != 0 &&
                   strcmp(select, "ALL_PROJECTED_ATTRIBUTES") != 0 &&
                   strcmp(select, "SPECIFIC_ATTRIBUTES") != 0) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "1 validation error detected: Value '%.40s' at 'select' failed to "
                                "satisfy constraint: Member must satisfy enum value set: "
                                "[SPECIFIC_ATTRIBUTES, COUNT, ALL_ATTRIBUTES, "
                                "ALL_PROJECTED_ATTRIBUTES]",
                                select);
        }
        if (r->proj != NULL && strcmp(select, "SPECIFIC_ATTRIBUTES") != 0) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "Cannot specify the ProjectionExpression when choosing to get %s",
                                select);
        }
        if (r->proj == NULL && strcmp(select, "SPECIFIC_ATTRIBUTES") == 0) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "Select SPECIFIC_ATTRIBUTES needs a ProjectionExpression");
        }
    }
    json_t *esk;
    if (ddb_req_object(x, req, "ExclusiveStartKey", 0, &esk) != 0 ||
        (esk != NULL && ddb_req_item(x, esk, "ExclusiveStartKey", &r->start) != 0)) {
        return -1;
    }
    return 0;
}

static void reader_fini(reader *r)
{
    lapse_item_free(r->start);
    expr_ctx_fini(&r->e);
}

/* Turns a page into the response: Items (filtered, projected), Count,
 * ScannedCount, LastEvaluatedKey. */
static int respond(ddb_ctx *x, reader *r, lapse_page *page)
{
    json_t *out = json_object(), *items = json_array();
    size_t n = lapse_page_count(page), count = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *doc = ddb_req_item_json(x, lapse_page_item(page, i));
        if (doc == NULL) {
            goto fail;
        }
        int keep = r->filter == NULL ? 1 : expr_eval(&r->e, r->filter, doc);
        if (keep < 0) {
            json_decref(doc);
            ddb_req_fail(x, 400, "ValidationException", "%s", r->e.err);
            goto fail;
        }
        if (keep) {
            count++;
            if (!r->count_only) {
                json_array_append_new(items,
                                      r->proj ? expr_project(r->proj, doc) : json_incref(doc));
            }
        }
        json_decref(doc);
    }
    if (!r->count_only) {
        json_object_set(out, "Items", items);
    }
    json_object_set_new(out, "Count", json_integer((json_int_t)count));
    json_object_set_new(out, "ScannedCount", json_integer((json_int_t)n));
    const lapse_item *last = lapse_page_last_key(page);
    if (last != NULL) {
        json_t *k = ddb_req_item_json(x, last);
        if (k == NULL) {
            goto fail;
        }
        json_object_set_new(out, "LastEvaluatedKey", k);
    }
    json_decref(items);
    x->out = out;
    return 0;
fail:
    json_decref(items);
    json_decref(out);
    return -1;
}

int ddb_query_query(ddb_ctx *x, json_t *req)
{
    const char *table, *index;
    int forward = 1, consistent = 0, rv = -1;
    expr_node *kc;
    reader r;
    keycond k;
    lapse_page *page = NULL;
    lapse_error err;
    char pk[LAPSE_KEY_NAME_MAX + 1], sk[LAPSE_KEY_NAME_MAX + 1];
    char *pk_json = NULL, *sk_json = NULL, *sk2_json = NULL;
    if (reader_init(x, req, &r) != 0 ||
        ddb_expr_condition(x, &r.e, req, "KeyConditionExpression", &kc) != 0 ||
        ddb_expr_done(x, &r.e) != 0 || ddb_req_string(x, req, "TableName", 1, &table) != 0 ||
        ddb_req_string(x, req, "IndexName", 0, &index) != 0 ||
        ddb_req_bool(x, req, "ScanIndexForward", 0, &forward) != 0 ||
        ddb_req_bool(x, req, "ConsistentRead", 0, &consistent) != 0) {
        goto out;
    }
    if (kc == NULL) {
        ddb_req_fail(x, 400, "ValidationException",
                     "Either the KeyConditions or KeyConditionExpression parameter must be "
                     "specified in the request.");
        goto out;
    }
    int gsi = 0;
    if (lapse_key_schema(x->c, table, index, pk, sk, &gsi, &err) != 0) {
        if (err.code == LAPSE_ENOTFOUND && index != NULL) {
            ddb_req_fail(x, 400, "ValidationException",
                         "The table does not have the specified index: %.255s", index);
        } else {
            ddb_req_lapse_fail(x, &err, table);
        }
        goto out;
    }
    if (gsi && consistent) {
        ddb_req_fail(x, 400, "ValidationException",
                     "Consistent reads are not supported on global secondary indexes");
        goto out;
    }
    if (key_condition(x, kc, pk, sk, &k) != 0 || filter_on_keys(x, r.filter, pk, sk) != 0) {
        goto out;
    }
    pk_json = json_dumps(k.pk_value, JSON_COMPACT);
    sk_json = k.sk_value ? json_dumps(k.sk_value, JSON_COMPACT) : NULL;
    sk2_json = k.sk_hi ? json_dumps(k.sk_hi, JSON_COMPACT) : NULL;
    lapse_query_opts o = {.partition_key_json = pk_json,
                          .sk_op = k.op,
                          .sk_json = sk_json,
                          .sk2_json = sk2_json,
                          .limit = (unsigned)r.limit,
                          .reverse = !forward,
                          .exclusive_start_key = r.start,
                          .partition_key_name = pk,
                          .eventually_consistent = !consistent};
    if (lapse_query_index(x->c, table, index, &o, &page, &err) != 0) {
        ddb_req_lapse_fail(x, &err, table);
        goto out;
    }
    rv = respond(x, &r, page);
out:
    lapse_page_free(page);
    free(pk_json);
    free(sk_json);
    free(sk2_json);
    reader_fini(&r);
    return rv;
}

int ddb_query_scan(ddb_ctx *x, json_t *req)
{
    const char *table, *index;
    long segment = -1, total = -1;
    int consistent = 0, rv = -1;
    reader r;
    lapse_page *page = NULL;
    lapse_error err;
    if (reader_init(x, req, &r) != 0 || ddb_expr_done(x, &r.e) != 0 ||
        ddb_req_string(x, req, "TableName", 1, &table) != 0 ||
        ddb_req_string(x, req, "IndexName", 0, &index) != 0 ||
        ddb_req_bool(x, req, "ConsistentRead", 0, &consistent) != 0 ||
        ddb_req_int(x, req, "Segment", 0, 999999, &segment) != 0 ||
        ddb_req_int(x, req, "TotalSegments", 1, 1000000, &total) != 0) {
        goto out;
    }
    if (index != NULL) {
        ddb_req_fail(x, 400, "ValidationException",
                     "Scan: IndexName is not served by Lapse yet (liblapse scans tables only)");
        goto out;
    }
    if ((segment < 0) != (total < 0)) {
        ddb_req_fail(x, 400, "ValidationException",
                     "The TotalSegments parameter is required but was not present in the request "
                     "when parameter Segment is present, and the reverse");
        goto out;
    }
    if (segment >= 0 && segment >= total) {
        ddb_req_fail(x, 400, "ValidationException",
                     "The Segment parameter is zero-based and must be less than parameter "
                     "TotalSegments: Segment: %ld is not less than TotalSegments: %ld",
                     segment, total);
        goto out;
    }
    lapse_scan_opts o = {.limit = (unsigned)r.limit,
                         .segment = segment >= 0 ? (unsigned)segment : 0,
                         .total_segments = total >= 0 ? (unsigned)total : 0,
                         .exclusive_start_key = r.start,
                         .eventually_consistent = !consistent};
    if (lapse_scan(x->c, table, &o, &page, &err) != 0) {
        ddb_req_lapse_fail(x, &err, table);
        goto out;
    }
    rv = respond(x, &r, page);
out:
    lapse_page_free(page);
    reader_fini(&r);
    return rv;
}
