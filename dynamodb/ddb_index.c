/*
 * ddb_index.c: one secondary index as the gateway sees it (ddb_index.h).
 */
#include "ddb_index.h"

#include "ddb_meta.h"

#include <stdlib.h>
#include <string.h>

/* The HASH and RANGE names of a KeySchema array (borrowed; NULL: none). */
static void key_names(json_t *ks, const char **hash, const char **range)
{
    size_t i;
    json_t *k;
    *hash = *range = NULL;
    json_array_foreach(ks, i, k)
    {
        const char *n = json_string_value(json_object_get(k, "AttributeName"));
        const char *role = json_string_value(json_object_get(k, "KeyType"));
        if (n != NULL && role != NULL) {
            *(strcmp(role, "HASH") == 0 ? hash : range) = n;
        }
    }
}

static char type_of(json_t *defs, const char *name)
{
    size_t i;
    json_t *d;
    json_array_foreach(defs, i, d)
    {
        const char *n = json_string_value(json_object_get(d, "AttributeName"));
        const char *t = json_string_value(json_object_get(d, "AttributeType"));
        if (n != NULL && t != NULL && strcmp(n, name) == 0) {
            return t[0];
        }
    }
    return 0;
}

int ddb_index_info(ddb_ctx *x, const char *table, const char *index, ddb_index *ix)
{
    char *json = NULL;
    lapse_error err;
    memset(ix, 0, sizeof *ix);
    ix->name = index;
    if (lapse_describe_table(x->c, table, &json, &err) != 0) {
        return ddb_req_lapse_fail(x, &err, table);
    }
    ix->doc = json_loads(json, 0, NULL);
    lapse_free(json);
    json_t *t = json_object_get(ix->doc, "Table");
    json_t *defs = json_object_get(t, "AttributeDefinitions");
    key_names(json_object_get(t, "KeySchema"), &ix->tpk, &ix->tsk);
    if (ix->tpk == NULL) {
        return ddb_req_fail(x, 500, "InternalServerError", "unreadable table description");
    }
    static const char *const kinds[] = {"LocalSecondaryIndexes", "GlobalSecondaryIndexes"};
    for (int k = 0; k < 2; k++) {
        size_t i;
        json_t *d;
        json_array_foreach(json_object_get(t, kinds[k]), i, d)
        {
            const char *name = json_string_value(json_object_get(d, "IndexName"));
            if (name == NULL || strcmp(name, index) != 0) {
                continue;
            }
            json_t *proj = json_object_get(d, "Projection");
            key_names(json_object_get(d, "KeySchema"), &ix->ipk, &ix->isk);
            ix->gsi = k == 1;
            ix->projection = json_string_value(json_object_get(proj, "ProjectionType"));
            ix->non_key = json_object_get(proj, "NonKeyAttributes");
            if (ix->ipk == NULL || ix->projection == NULL) {
                return ddb_req_fail(x, 500, "InternalServerError", "unreadable index description");
            }
            ix->ipk_type = type_of(defs, ix->ipk);
            ix->isk_type = ix->isk != NULL ? type_of(defs, ix->isk) : 0;
            if (strcmp(ix->projection, "ALL") != 0) {
                return 0;
            }
            int64_t created = (int64_t)json_integer_value(json_object_get(t, "CreatedAtMs"));
            if (ddb_meta_get(x, table, created, &ix->meta) != 0) {
                return -1;
            }
            proj = json_object_get(json_object_get(ix->meta, "Projections"), index);
            if (proj != NULL) {
                ix->projection = json_string_value(json_object_get(proj, "ProjectionType"));
                ix->non_key = json_object_get(proj, "NonKeyAttributes");
            }
            if (ix->projection == NULL) {
                return ddb_req_fail(x, 500, "InternalServerError", "unreadable index projection");
            }
            return 0;
        }
    }
    return ddb_req_fail(x, 400, "ValidationException",
                        "The table does not have the specified index: %.255s", index);
}

void ddb_index_fini(ddb_index *ix)
{
    json_decref(ix->doc);
    json_decref(ix->meta);
    ix->doc = ix->meta = NULL;
}

/* Whether doc has attribute name with DynamoDB type letter type. */
static int has_typed(json_t *doc, const char *name, char type)
{
    json_t *v = json_object_get(doc, name);
    const char tag[2] = {type, '\0'};
    return json_is_object(v) && json_object_size(v) == 1 && json_object_get(v, tag) != NULL;
}

int ddb_index_holds(const ddb_index *ix, json_t *doc)
{
    return has_typed(doc, ix->ipk, ix->ipk_type) &&
           (ix->isk == NULL || has_typed(doc, ix->isk, ix->isk_type));
}

static void copy_attr(json_t *to, json_t *from, const char *name)
{
    json_t *v = name != NULL ? json_object_get(from, name) : NULL;
    if (v != NULL) {
        json_object_set(to, name, v);
    }
}

json_t *ddb_index_key(const ddb_index *ix, json_t *doc)
{
    json_t *k = json_object();
    if (k != NULL) {
        copy_attr(k, doc, ix->tpk);
        copy_attr(k, doc, ix->tsk);
        copy_attr(k, doc, ix->ipk);
        copy_attr(k, doc, ix->isk);
    }
    return k;
}

json_t *ddb_index_project(const ddb_index *ix, json_t *doc)
{
    if (strcmp(ix->projection, "ALL") == 0) {
        return json_incref(doc);
    }
    json_t *out = ddb_index_key(ix, doc);
    size_t i;
    json_t *a;
    json_array_foreach(ix->non_key, i, a)
    {
        copy_attr(out, doc, json_string_value(a));
    }
    return out;
}
