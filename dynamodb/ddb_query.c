/*
 * ddb_query.c: Query and Scan (ddb_query.h).
 */
#include "ddb_query.h"

#include <stdlib.h>
#include <string.h>

#include "ddb_expr.h"
#include "ddb_index.h"

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
    const char *select; /* borrowed from the request; NULL: absent */
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
    r->select = select;
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

/* The response of docs (an array of items in DynamoDB JSON, borrowed), of
 * which scanned were read: Items (filtered, projected), Count, ScannedCount,
 * and lek as LastEvaluatedKey (stolen; NULL: none). */
static int respond_docs(ddb_ctx *x, reader *r, json_t *docs, size_t scanned, json_t *lek)
{
    json_t *out = json_object(), *items = json_array();
    size_t i, count = 0;
    json_t *doc;
    json_array_foreach(docs, i, doc)
    {
        int keep = r->filter == NULL ? 1 : expr_eval(&r->e, r->filter, doc);
        if (keep < 0) {
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
    }
    if (!r->count_only) {
        json_object_set(out, "Items", items);
    }
    json_object_set_new(out, "Count", json_integer((json_int_t)count));
    json_object_set_new(out, "ScannedCount", json_integer((json_int_t)scanned));
    if (lek != NULL) {
        json_object_set_new(out, "LastEvaluatedKey", lek);
        lek = NULL;
    }
    json_decref(items);
    x->out = out;
    return 0;
fail:
    json_decref(lek);
    json_decref(items);
    json_decref(out);
    return -1;
}

/* Turns a page into the response, as respond_docs; each item as ix's
 * projection shows it when ix is non-NULL. */
static int respond(ddb_ctx *x, reader *r, lapse_page *page, const ddb_index *ix)
{
    json_t *docs = json_array(), *lek = NULL;
    size_t n = lapse_page_count(page);
    for (size_t i = 0; i < n; i++) {
        json_t *doc = ddb_req_item_json(x, lapse_page_item(page, i));
        if (doc == NULL) {
            goto fail;
        }
        json_array_append_new(docs, ix != NULL ? ddb_index_project(ix, doc) : json_incref(doc));
        json_decref(doc);
    }
    const lapse_item *last = lapse_page_last_key(page);
    if (last != NULL && (lek = ddb_req_item_json(x, last)) == NULL) {
        goto fail;
    }
    int rv = respond_docs(x, r, docs, n, lek);
    json_decref(docs);
    return rv;
fail:
    json_decref(docs);
    return -1;
}

/* ---- reading an index ---- */

/* Into *view, ix when the items read from it are shown as its projection
 * shows them, or NULL when whole: as DynamoDB, an LSI read fetches what
 * its projection lacks from the table when Select is ALL_ATTRIBUTES or a
 * ProjectionExpression asks for attributes, a GSI read cannot
 * (ALL_ATTRIBUTES on a GSI that does not project ALL is refused), and
 * either shows its projection by default (ALL_PROJECTED_ATTRIBUTES). */
static int index_view(ddb_ctx *x, const reader *r, const ddb_index *ix, const ddb_index **view)
{
    int all = r->select != NULL && strcmp(r->select, "ALL_ATTRIBUTES") == 0;
    *view = ix;
    if (strcmp(ix->projection, "ALL") == 0) {
        *view = NULL;
    } else if (ix->gsi && all) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "One or more parameter values were invalid: Select type "
                            "ALL_ATTRIBUTES is not supported for global secondary index %s "
                            "because its projection type is not ALL",
                            ix->name);
    } else if (!ix->gsi && (all || r->proj != NULL || r->count_only)) {
        *view = NULL; /* COUNT: a filter may read any attribute */
    }
    return 0;
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
    ddb_index ix = {0};
    const ddb_index *view = NULL;
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
    if (index != NULL &&
        (ddb_index_info(x, table, index, &ix) != 0 || index_view(x, &r, &ix, &view) != 0)) {
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
    rv = respond(x, &r, page, view);
out:
    ddb_index_fini(&ix);
    lapse_page_free(page);
    free(pk_json);
    free(sk_json);
    free(sk2_json);
    reader_fini(&r);
    return rv;
}

/* ---- Scan of an index ---- */

/* Base pages one Scan of an index reads at most when they hold none of the
 * index's items (a sparse GSI): 16 of liblapse's 1 MiB pages, after which
 * the answer is empty with a LastEvaluatedKey of the table's keys. */
#define INDEX_SCAN_ROUNDS 16

/* The table's keys of ExclusiveStartKey (esk, borrowed) as the base scan's
 * start key into *out (caller frees). */
static int index_start(ddb_ctx *x, const ddb_index *ix, json_t *esk, lapse_item **out)
{
    *out = NULL;
    if (esk == NULL) {
        return 0;
    }
    json_t *k = json_object();
    const char *names[2] = {ix->tpk, ix->tsk};
    int rv = 0;
    for (int i = 0; i < 2 && rv == 0; i++) {
        json_t *v = names[i] != NULL ? json_object_get(esk, names[i]) : NULL;
        if (names[i] != NULL && v == NULL) {
            rv = ddb_req_fail(x, 400, "ValidationException",
                              "The provided starting key is invalid: it lacks the table's key "
                              "attribute %s",
                              names[i]);
        } else if (v != NULL) {
            json_object_set(k, names[i], v);
        }
    }
    if (rv == 0) {
        rv = ddb_req_item(x, k, "ExclusiveStartKey", out);
    }
    json_decref(k);
    return rv;
}

/* Scan of index: liblapse scans tables, so this scans the table's
 * partitions (the segment's) and keeps the items the index holds, each as
 * its projection shows it, until Limit of them are read or the table ends
 * (docs/dynamodb-api.md, "Scan of an index"). */
static int scan_index(ddb_ctx *x, json_t *req, reader *r, const char *table, const char *index,
                      lapse_scan_opts *o)
{
    ddb_index ix;
    const ddb_index *view = NULL;
    lapse_item *start = NULL;
    json_t *docs = json_array(), *lek = NULL, *esk = json_object_get(req, "ExclusiveStartKey");
    lapse_page *page = NULL;
    lapse_error err;
    int rv = -1;
    if (ddb_index_info(x, table, index, &ix) != 0) {
        goto out;
    }
    if (ix.gsi && !o->eventually_consistent) {
        ddb_req_fail(x, 400, "ValidationException",
                     "Consistent reads are not supported on global secondary indexes");
        goto out;
    }
    if (index_start(x, &ix, esk, &start) != 0 || index_view(x, r, &ix, &view) != 0) {
        goto out;
    }
    size_t held = 0;
    json_t *last_held = NULL; /* the last item held, whole (its key resumes) */
    for (int round = 0; round < INDEX_SCAN_ROUNDS; round++) {
        unsigned want = r->limit > 0 ? (unsigned)(r->limit - (long)held) : 0;
        o->limit = want;
        o->exclusive_start_key = start;
        int failed = lapse_scan(x->c, table, o, &page, &err) != 0;
        lapse_item_free(start);
        start = NULL;
        if (failed) {
            ddb_req_lapse_fail(x, &err, table);
            json_decref(last_held);
            goto out;
        }
        size_t n = lapse_page_count(page);
        for (size_t i = 0; i < n && !failed; i++) {
            json_t *doc = ddb_req_item_json(x, lapse_page_item(page, i));
            if (doc == NULL) {
                failed = 1;
            } else if (ddb_index_holds(&ix, doc)) {
                json_array_append_new(docs, view != NULL ? ddb_index_project(view, doc)
                                                         : json_incref(doc));
                held++;
                json_decref(last_held);
                last_held = json_incref(doc);
            }
            json_decref(doc);
        }
        const lapse_item *last = lapse_page_last_key(page);
        /* Stop when the table is done, Limit is reached, or a page of the
         * base ended early (its 1 MiB) after the index had items in it. */
        int stop = last == NULL || (r->limit > 0 && held >= (size_t)r->limit) ||
                   (held > 0 && (r->limit == 0 || n < want)) || round + 1 == INDEX_SCAN_ROUNDS;
        if (!failed && last != NULL && stop) {
            /* Resume after the last item of the index returned (items of the
             * table after it are read again and skipped), or after the
             * table's last key read when the index had none. */
            lek = held > 0 ? ddb_index_key(&ix, last_held) : ddb_req_item_json(x, last);
            if ((failed = lek == NULL) && held > 0) {
                ddb_req_fail(x, 500, "InternalServerError", "out of memory");
            }
        } else if (!failed && last != NULL) {
            json_t *k = ddb_req_item_json(x, last);
            failed = k == NULL || ddb_req_item(x, k, "LastEvaluatedKey", &start) != 0;
            json_decref(k);
        }
        lapse_page_free(page);
        page = NULL;
        if (failed) {
            json_decref(last_held);
            goto out;
        }
        if (stop) {
            break;
        }
    }
    json_decref(last_held);
    rv = respond_docs(x, r, docs, held, lek);
    lek = NULL;
out:
    json_decref(lek);
    json_decref(docs);
    lapse_page_free(page);
    lapse_item_free(start);
    ddb_index_fini(&ix);
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
    if (index != NULL) {
        rv = scan_index(x, req, &r, table, index, &o);
        goto out;
    }
    if (lapse_scan(x->c, table, &o, &page, &err) != 0) {
        ddb_req_lapse_fail(x, &err, table);
        goto out;
    }
    rv = respond(x, &r, page, NULL);
out:
    lapse_page_free(page);
    reader_fini(&r);
    return rv;
}
