/*
 * ddb_tables.c: table and TTL operations on liblapse's admin calls, and the
 * translation of lapse_describe_table's document into DynamoDB's
 * TableDescription.
 */
#include "ddb_tables.h"

#include "ddb_meta.h"
#include "ddb_size.h"
#include "ddb_tabledef.h"
#include "ddb_tags.h"

#include <stdlib.h>
#include <string.h>

/* ======================= TableDescription ======================= */

/* DynamoDB's TableDescription of a table from liblapse's description (the
 * document lapse_describe_table returns), status as given, with the index
 * projections of meta (the gateway's document of the table, borrowed; NULL:
 * none) over the nodes' (an INCLUDE index is ALL on the nodes). NULL with
 * the error set on a document it cannot read. */
static json_t *table_description(ddb_ctx *x, const char *lapse_json, const char *status,
                                 json_t *meta)
{
    json_t *projections = json_object_get(meta, "Projections");
    json_t *doc = json_loads(lapse_json, 0, NULL);
    json_t *t = json_object_get(doc, "Table");
    const char *name = json_string_value(json_object_get(t, "TableName"));
    if (name == NULL) {
        json_decref(doc);
        ddb_req_fail(x, 500, "InternalServerError", "unreadable table description");
        return NULL;
    }
    json_t *d = json_object();
    char arn[600];
    snprintf(arn, sizeof arn, "arn:aws:dynamodb:%s:000000000000:table/%s", x->region, name);
    json_object_set_new(d, "TableName", json_string(name));
    json_object_set_new(d, "TableStatus", json_string(status));
    json_object_set_new(d, "TableArn", json_string(arn));
    json_object_set(d, "KeySchema", json_object_get(t, "KeySchema"));
    json_object_set(d, "AttributeDefinitions", json_object_get(t, "AttributeDefinitions"));
    json_object_set_new(d, "ProvisionedThroughput",
                        json_pack("{s:i,s:i,s:i}", "NumberOfDecreasesToday", 0, "ReadCapacityUnits",
                                  0, "WriteCapacityUnits", 0));
    json_object_set_new(d, "BillingModeSummary",
                        json_pack("{s:s}", "BillingMode", "PAY_PER_REQUEST"));
    json_object_set_new(d, "TableSizeBytes", json_integer(0));
    json_object_set_new(d, "ItemCount", json_integer(0));

    static const char *const kinds[] = {"LocalSecondaryIndexes", "GlobalSecondaryIndexes"};
    for (int k = 0; k < 2; k++) {
        json_t *in = json_object_get(t, kinds[k]);
        if (!json_is_array(in) || json_array_size(in) == 0) {
            continue;
        }
        json_t *arr = json_array();
        size_t i;
        json_t *ix;
        json_array_foreach(in, i, ix)
        {
            json_t *o = json_object();
            const char *ixname = json_string_value(json_object_get(ix, "IndexName"));
            json_object_set(o, "IndexName", json_object_get(ix, "IndexName"));
            json_object_set(o, "KeySchema", json_object_get(ix, "KeySchema"));
            json_t *given = ixname != NULL ? json_object_get(projections, ixname) : NULL;
            json_object_set(o, "Projection",
                            given != NULL ? given : json_object_get(ix, "Projection"));
            json_object_set_new(o, "IndexArn",
                                json_sprintf("%s/index/%s", arn, ixname ? ixname : ""));
            if (k == 1) {
                json_object_set_new(o, "IndexStatus", json_string("ACTIVE"));
            }
            json_object_set_new(o, "IndexSizeBytes", json_integer(0));
            json_object_set_new(o, "ItemCount", json_integer(0));
            json_array_append_new(arr, o);
        }
        json_object_set_new(d, kinds[k], arr);
    }
    json_int_t created = json_integer_value(json_object_get(t, "CreatedAtMs"));
    if (created > 0) {
        json_object_set_new(d, "CreationDateTime", json_real((double)created / 1000.0));
    }
    json_t *stream = json_object_get(t, "StreamSpecification");
    if (json_is_true(json_object_get(stream, "StreamEnabled"))) {
        const char *view = json_string_value(json_object_get(stream, "StreamViewType"));
        /* A stream turned on after CreateTable is labelled by that moment. */
        json_int_t since = json_integer_value(json_object_get(stream, "SinceMs"));
        char sarn[600], label[32];
        ddb_req_stream_arn(x, name, (int64_t)(since > 0 ? since : created), sarn, sizeof sarn,
                           label, sizeof label);
        json_object_set_new(d, "StreamSpecification",
                            json_pack("{s:b,s:s}", "StreamEnabled", 1, "StreamViewType",
                                      view != NULL ? view : "NEW_AND_OLD_IMAGES"));
        json_object_set_new(d, "LatestStreamArn", json_string(sarn));
        json_object_set_new(d, "LatestStreamLabel", json_string(label));
    } else if (json_object_get(stream, "Generation") != NULL ||
               json_object_get(stream, "SinceMs") != NULL) {
        /* Turned off by UpdateTable: DynamoDB keeps saying so. The stream
         * itself is gone (docs/dynamodb-api.md), so no LatestStreamArn. */
        json_object_set_new(d, "StreamSpecification", json_pack("{s:b}", "StreamEnabled", 0));
    }
    json_decref(doc);
    return d;
}

/* ======================= CreateTable ======================= */

static const char *const create_unsupported[] = {"SSESpecification", "TableClass", "ResourcePolicy",
                                                 NULL};

/* Records the gateway's document of a table just created (meta: its INCLUDE
 * projections and its tags); when that fails the table is deleted again, so a table is
 * never left without what its CreateTable asked for. */
static int create_meta(ddb_ctx *x, const char *table, const char *lapse_json, json_t *meta)
{
    json_t *doc = json_loads(lapse_json, 0, NULL);
    int64_t created =
        (int64_t)json_integer_value(json_object_get(json_object_get(doc, "Table"), "CreatedAtMs"));
    json_decref(doc);
    if (ddb_meta_put(x, table, created, meta) == 0) {
        return 0;
    }
    lapse_error err;
    lapse_delete_table(x->c, table, &err);
    return -1;
}

/* The StreamViewType of a StreamSpecification that turns a stream on
 * (absent: NEW_AND_OLD_IMAGES) into *view; 0, or -1 with x's error set. */
static int stream_view_of(ddb_ctx *x, json_t *stream, int *view)
{
    const char *name;
    if (ddb_req_string(x, stream, "StreamViewType", 0, &name) != 0) {
        return -1;
    }
    *view = LAPSE_STREAM_NEW_AND_OLD_IMAGES;
    if (name != NULL && (*view = lapse_stream_view_parse(name)) < 0) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "1 validation error detected: Value '%.64s' at "
                            "'streamSpecification.streamViewType' failed to satisfy constraint: "
                            "Member must satisfy enum value set: [NEW_IMAGE, OLD_IMAGE, "
                            "NEW_AND_OLD_IMAGES, KEYS_ONLY]",
                            name);
    }
    return 0;
}

int ddb_tables_create(ddb_ctx *x, json_t *req)
{
    lapse_table_def def = {0};
    lapse_index_def *lsi = NULL, *gsi = NULL;
    json_t *ks, *defs, *jl, *jg, *stream;
    lapse_error err;
    char *json = NULL;
    int rv = -1;
    size_t nonkey = 0;
    json_t *meta = json_object(), *projections = json_object(), *tags = NULL;

    if (ddb_req_unsupported(x, req, "CreateTable", create_unsupported) != 0 ||
        ddb_req_string(x, req, "TableName", 1, &def.name) != 0 ||
        ddb_req_array(x, req, "KeySchema", 1, &ks) != 0 ||
        ddb_req_array(x, req, "AttributeDefinitions", 1, &defs) != 0 ||
        ddb_req_array(x, req, "LocalSecondaryIndexes", 0, &jl) != 0 ||
        ddb_req_array(x, req, "GlobalSecondaryIndexes", 0, &jg) != 0 ||
        ddb_req_object(x, req, "StreamSpecification", 0, &stream) != 0 ||
        ddb_req_array(x, req, "Tags", 0, &tags) != 0 ||
        ddb_tabledef_key_schema(x, ks, defs, "table", &def.partition_key, &def.partition_key_type,
                                &def.sort_key, &def.sort_key_type) != 0 ||
        ddb_tabledef_indexes(x, jl, defs, 0, &lsi, &def.nlsi, projections, &nonkey) != 0 ||
        ddb_tabledef_indexes(x, jg, defs, 1, &gsi, &def.ngsi, projections, &nonkey) != 0) {
        goto out;
    }
    def.lsi = lsi;
    def.gsi = gsi;
    if (stream != NULL && ddb_req_bool(x, stream, "StreamEnabled", 1, &def.stream) != 0) {
        goto out;
    }
    if (def.stream && stream_view_of(x, stream, &def.stream_view) != 0) {
        goto out;
    }
    if (tags != NULL) {
        json_t *t = json_object();
        json_object_set_new(meta, "Tags", t);
        if (ddb_tags_read(x, tags, t) != 0) {
            goto out;
        }
        if (json_object_size(t) > DDB_TAGS_MAX) {
            ddb_req_fail(x, 400, "ValidationException",
                         "One or more parameter values were invalid: more than %d Tags",
                         DDB_TAGS_MAX);
            goto out;
        }
        if (json_object_size(t) == 0) {
            json_object_del(meta, "Tags");
        }
    }
    if (json_object_size(projections) > 0) {
        json_object_set(meta, "Projections", projections);
    }
    if (lapse_create_table_json(x->c, &def, &json, &err) != 0) {
        ddb_req_lapse_fail(x, &err, def.name);
        goto out;
    }
    if (json_object_size(meta) > 0 && create_meta(x, def.name, json, meta) != 0) {
        goto out;
    }
    json_t *d = table_description(x, json, "ACTIVE", meta);
    if (d != NULL) {
        x->out = json_pack("{s:o}", "TableDescription", d);
        rv = 0;
    }
out:
    json_decref(meta);
    json_decref(projections);
    lapse_free(json);
    free(lsi);
    free(gsi);
    return rv;
}

/* ======================= DescribeTable, ListTables, DeleteTable ======================= */

/* The gateway's document of a table from its liblapse description into
 * *meta (caller owns; NULL when the table cannot have one): read only when
 * an index is ALL on the nodes, which an INCLUDE index is. */
static int table_meta(ddb_ctx *x, const char *table, const char *lapse_json, json_t **meta)
{
    json_t *doc = json_loads(lapse_json, 0, NULL), *t = json_object_get(doc, "Table");
    int any = 0, rv = 0;
    static const char *const kinds[] = {"LocalSecondaryIndexes", "GlobalSecondaryIndexes"};
    for (int k = 0; k < 2 && !any; k++) {
        size_t i;
        json_t *ix;
        json_array_foreach(json_object_get(t, kinds[k]), i, ix)
        {
            const char *p = json_string_value(
                json_object_get(json_object_get(ix, "Projection"), "ProjectionType"));
            any = any || (p != NULL && strcmp(p, "ALL") == 0);
        }
    }
    *meta = NULL;
    if (any) {
        rv = ddb_meta_get(x, table, (int64_t)json_integer_value(json_object_get(t, "CreatedAtMs")),
                          meta);
    }
    json_decref(doc);
    return rv;
}

/* Reads TableName from req into *table and describes that table as in
 * status: 0 with the description in *d (caller owns it), else -1 with x's
 * error set. */
static int describe_named(ddb_ctx *x, json_t *req, const char *status, const char **table,
                          json_t **d)
{
    char *json = NULL;
    lapse_error err;
    if (ddb_req_string(x, req, "TableName", 1, table) != 0) {
        return -1;
    }
    if (lapse_describe_table(x->c, *table, &json, &err) != 0) {
        return ddb_req_lapse_fail(x, &err, *table);
    }
    json_t *meta = NULL;
    int rv = table_meta(x, *table, json, &meta);
    *d = rv == 0 ? table_description(x, json, status, meta) : NULL;
    json_decref(meta);
    lapse_free(json);
    return *d != NULL ? 0 : -1;
}

int ddb_tables_describe(ddb_ctx *x, json_t *req)
{
    const char *table;
    json_t *d;
    if (describe_named(x, req, "ACTIVE", &table, &d) != 0) {
        return -1;
    }
    /* Only DescribeTable sizes the table and its indexes (ddb_size.h); the
     * other answers carrying a TableDescription keep DynamoDB's figures of
     * a moment ago, here 0, as CreateTable's does. */
    ddb_size sz;
    double created_s = json_number_value(json_object_get(d, "CreationDateTime"));
    ddb_size_get(x, table, (int64_t)(created_s * 1000.0 + 0.5), &sz);
    json_object_set_new(d, "ItemCount", json_integer((json_int_t)sz.table.items));
    json_object_set_new(d, "TableSizeBytes", json_integer((json_int_t)sz.table.bytes));
    for (size_t k = 0; k < sz.nindexes; k++) {
        const lapse_index_size_info *ix = &sz.indexes[k];
        const char *kind = ix->global ? "GlobalSecondaryIndexes" : "LocalSecondaryIndexes";
        json_t *arr = json_object_get(d, kind), *o;
        size_t i;
        json_array_foreach(arr, i, o)
        {
            const char *name = json_string_value(json_object_get(o, "IndexName"));
            if (name != NULL && strcmp(name, ix->name) == 0) {
                json_object_set_new(o, "ItemCount", json_integer((json_int_t)ix->size.items));
                json_object_set_new(o, "IndexSizeBytes", json_integer((json_int_t)ix->size.bytes));
            }
        }
    }
    ddb_size_fini(&sz);
    x->out = json_pack("{s:o}", "Table", d);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

json_t *ddb_tables_names(ddb_ctx *x)
{
    char *json = NULL;
    lapse_error err;
    if (lapse_list_tables(x->c, &json, &err) != 0) {
        ddb_req_lapse_fail(x, &err, NULL);
        return NULL;
    }
    json_t *doc = json_loads(json, 0, NULL);
    lapse_free(json);
    json_t *names = json_incref(json_object_get(doc, "TableNames"));
    json_decref(doc);
    size_t n = json_array_size(names);
    const char **v = calloc(n ? n : 1, sizeof *v);
    json_t *sorted = json_array();
    int bad = !json_is_array(names) || v == NULL || sorted == NULL;
    for (size_t i = 0; !bad && i < n; i++) {
        bad = (v[i] = json_string_value(json_array_get(names, i))) == NULL;
    }
    if (!bad) {
        qsort(v, n, sizeof *v, cmp_names); /* DynamoDB pages in name order */
    }
    for (size_t i = 0; !bad && i < n; i++) {
        if (strcmp(v[i], DDB_META_TABLE) != 0) { /* the gateway's own (ddb_meta.h) */
            bad = json_array_append_new(sorted, json_string(v[i])) != 0;
        }
    }
    free(v);
    json_decref(names);
    if (bad) {
        json_decref(sorted);
        ddb_req_fail(x, 500, "InternalServerError", "unreadable table list");
        return NULL;
    }
    return sorted;
}

int ddb_tables_list(ddb_ctx *x, json_t *req)
{
    const char *start;
    long limit = 100;
    json_t *names;
    if (ddb_req_string(x, req, "ExclusiveStartTableName", 0, &start) != 0 ||
        ddb_req_int(x, req, "Limit", 1, 100, &limit) != 0 ||
        (names = ddb_tables_names(x)) == NULL) {
        return -1;
    }
    size_t n = json_array_size(names), i = 0;
    json_t *out = json_array();
    while (i < n && start != NULL &&
           strcmp(json_string_value(json_array_get(names, i)), start) <= 0) {
        i++;
    }
    for (; i < n && json_array_size(out) < (size_t)limit; i++) {
        json_array_append(out, json_array_get(names, i));
    }
    x->out = json_pack("{s:o}", "TableNames", out);
    if (i < n && json_array_size(out) > 0) {
        json_object_set(x->out, "LastEvaluatedTableName", json_array_get(names, i - 1));
    }
    json_decref(names);
    return 0;
}

int ddb_tables_delete(ddb_ctx *x, json_t *req)
{
    const char *table;
    json_t *d;
    lapse_error err;
    /* DynamoDB answers with the table's description as it goes. */
    if (describe_named(x, req, "DELETING", &table, &d) != 0) {
        return -1;
    }
    if (lapse_delete_table(x->c, table, &err) != 0) {
        json_decref(d);
        return ddb_req_lapse_fail(x, &err, table);
    }
    /* The gateway's document goes with the table (keyed by its creation
     * time, a leftover is never read again: best effort). */
    json_t *created = json_object_get(d, "CreationDateTime");
    if (created != NULL) {
        ddb_ctx scratch = *x;
        json_t *none = json_object();
        int64_t ms = (int64_t)(json_real_value(created) * 1000.0 + 0.5);
        ddb_meta_put(&scratch, table, ms, none);
        json_decref(none);
    }
    x->out = json_pack("{s:o}", "TableDescription", d);
    return 0;
}

/* ======================= TTL ======================= */

/* TimeToLiveDescription from lapse_describe_ttl: *status and *attr borrowed
 * from *doc (caller json_decref's it). */
static int ttl_state(ddb_ctx *x, const char *table, json_t **doc, json_t **desc)
{
    char *json = NULL;
    lapse_error err;
    if (lapse_describe_ttl(x->c, table, &json, &err) != 0) {
        return ddb_req_lapse_fail(x, &err, table);
    }
    *doc = json_loads(json, 0, NULL);
    lapse_free(json);
    *desc = json_object_get(*doc, "TimeToLiveDescription");
    if (!json_is_string(json_object_get(*desc, "TimeToLiveStatus"))) {
        json_decref(*doc);
        *doc = NULL;
        return ddb_req_fail(x, 500, "InternalServerError", "unreadable TTL description");
    }
    return 0;
}

int ddb_tables_update_ttl(ddb_ctx *x, json_t *req)
{
    const char *table, *attr;
    json_t *spec, *doc, *desc;
    int enabled = 0;
    lapse_error err;
    if (ddb_req_string(x, req, "TableName", 1, &table) != 0 ||
        ddb_req_object(x, req, "TimeToLiveSpecification", 1, &spec) != 0 ||
        ddb_req_bool(x, spec, "Enabled", 1, &enabled) != 0 ||
        ddb_req_string(x, spec, "AttributeName", 1, &attr) != 0) {
        return -1;
    }
    if (attr[0] == '\0' || strlen(attr) > 255) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "TimeToLiveSpecification.AttributeName must be 1 to 255 characters");
    }
    if (ttl_state(x, table, &doc, &desc) != 0) {
        return -1;
    }
    const char *status = json_string_value(json_object_get(desc, "TimeToLiveStatus"));
    const char *cur = json_string_value(json_object_get(desc, "AttributeName"));
    int rv = 0;
    /* DynamoDB's rules, with its messages. */
    if (enabled && strcmp(status, "DISABLED") != 0) {
        rv = ddb_req_fail(x, 400, "ValidationException",
                          strcmp(status, "ENABLED") == 0 ? "TimeToLive is already enabled"
                                                         : "Time to live has been modified "
                                                           "multiple times within a fixed "
                                                           "interval");
    } else if (!enabled && strcmp(status, "ENABLED") != 0 && strcmp(status, "ENABLING") != 0) {
        rv = ddb_req_fail(x, 400, "ValidationException", "TimeToLive is already disabled");
    } else if (!enabled && cur != NULL && strcmp(cur, attr) != 0) {
        rv = ddb_req_fail(x, 400, "ValidationException",
                          "TimeToLive is active on a different AttributeName: current "
                          "AttributeName is %s",
                          cur);
    }
    json_decref(doc);
    if (rv != 0) {
        return rv;
    }
    lapse_ttl_spec ts = {.action = enabled ? LAPSE_TTL_ENABLE : LAPSE_TTL_DISABLE,
                         .attribute = enabled ? attr : NULL};
    if (lapse_update_ttl(x->c, table, &ts, NULL, &err) != 0) {
        return ddb_req_lapse_fail(x, &err, table);
    }
    x->out = json_pack("{s:{s:b,s:s}}", "TimeToLiveSpecification", "Enabled", enabled,
                       "AttributeName", attr);
    return 0;
}

int ddb_tables_describe_ttl(ddb_ctx *x, json_t *req)
{
    const char *table;
    json_t *doc, *desc;
    if (ddb_req_string(x, req, "TableName", 1, &table) != 0 ||
        ttl_state(x, table, &doc, &desc) != 0) {
        return -1;
    }
    json_t *d = json_object();
    json_object_set(d, "TimeToLiveStatus", json_object_get(desc, "TimeToLiveStatus"));
    /* DynamoDB names the attribute only while TTL is on or changing. */
    if (strcmp(json_string_value(json_object_get(desc, "TimeToLiveStatus")), "DISABLED") != 0 &&
        json_is_string(json_object_get(desc, "AttributeName"))) {
        json_object_set(d, "AttributeName", json_object_get(desc, "AttributeName"));
    }
    json_decref(doc);
    x->out = json_pack("{s:o}", "TimeToLiveDescription", d);
    return 0;
}

/* ======================= UpdateTable ======================= */

static const char *const update_unsupported[] = {"GlobalSecondaryIndexUpdates",
                                                 "ReplicaUpdates",
                                                 "SSESpecification",
                                                 "TableClass",
                                                 "DeletionProtectionEnabled",
                                                 "ResourcePolicy",
                                                 NULL};

/* Capacity settings: accepted and kept nowhere (every Lapse table is
 * on-demand); checked as DynamoDB checks them. */
static int capacity(ddb_ctx *x, json_t *req, int *given)
{
    const char *mode;
    json_t *pt;
    long r = 0, w = 0;
    if (ddb_req_string(x, req, "BillingMode", 0, &mode) != 0 ||
        ddb_req_object(x, req, "ProvisionedThroughput", 0, &pt) != 0) {
        return -1;
    }
    if (mode != NULL && strcmp(mode, "PAY_PER_REQUEST") != 0 && strcmp(mode, "PROVISIONED") != 0) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "1 validation error detected: Value '%.40s' at 'billingMode' failed to "
                            "satisfy constraint: Member must satisfy enum value set: "
                            "[PROVISIONED, PAY_PER_REQUEST]",
                            mode);
    }
    if (pt != NULL && (ddb_req_int(x, pt, "ReadCapacityUnits", 1, 40000000000L, &r) != 0 ||
                       ddb_req_int(x, pt, "WriteCapacityUnits", 1, 40000000000L, &w) != 0)) {
        return -1;
    }
    *given = mode != NULL || pt != NULL;
    return 0;
}

int ddb_tables_update(ddb_ctx *x, json_t *req)
{
    const char *table;
    json_t *stream, *d, *defs;
    int given = 0, enable = 0, view = LAPSE_STREAM_NEW_AND_OLD_IMAGES;
    if (ddb_req_unsupported(x, req, "UpdateTable", update_unsupported) != 0 ||
        ddb_req_array(x, req, "AttributeDefinitions", 0, &defs) != 0 ||
        capacity(x, req, &given) != 0 ||
        ddb_req_object(x, req, "StreamSpecification", 0, &stream) != 0 ||
        (stream != NULL && ddb_req_bool(x, stream, "StreamEnabled", 1, &enable) != 0) ||
        (stream != NULL && enable && stream_view_of(x, stream, &view) != 0)) {
        return -1;
    }
    if (!given && stream == NULL) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "At least one of ProvisionedThroughput, BillingMode, "
                            "UpdateStreamEnabled, GlobalSecondaryIndexUpdates or "
                            "SSESpecification or ReplicaUpdates is required");
    }
    if (describe_named(x, req, "ACTIVE", &table, &d) != 0) {
        return -1;
    }
    if (stream != NULL) {
        /* DynamoDB's answers when nothing would change (checked again by the
         * coordinator, which answers EEXISTS / ESTATE to a racing change). */
        int has = json_object_get(d, "LatestStreamArn") != NULL;
        json_decref(d);
        if (enable == has) {
            return ddb_req_fail(x, 400, "ValidationException", "%s: %s",
                                enable ? "Table already has an enabled stream"
                                       : "Table does not have a stream to disable",
                                table);
        }
        lapse_error err;
        int rv = lapse_update_stream(x->c, table, enable, (lapse_stream_view)view, &err);
        if (rv == LAPSE_EEXISTS || rv == LAPSE_ESTATE) {
            return ddb_req_fail(x, 400, "ValidationException", "%s: %s",
                                rv == LAPSE_EEXISTS ? "Table already has an enabled stream"
                                                    : "Table does not have a stream to disable",
                                table);
        }
        if (rv != 0) {
            return ddb_req_lapse_fail(x, &err, table);
        }
        /* DynamoDB answers UPDATING while the stream changes; Lapse's
         * change is in place when the call returns (the nodes have the map). */
        if (describe_named(x, req, "ACTIVE", &table, &d) != 0) {
            return -1;
        }
    }
    x->out = json_pack("{s:o}", "TableDescription", d);
    return 0;
}
