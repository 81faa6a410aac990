/*
 * ddb_index.c: one secondary index as the gateway sees it (ddb_index.h).
 */
#include "ddb_index.h"

#include "ddb_meta.h"

#include <stdlib.h>
#include <string.h>

int ddb_index_info(ddb_ctx *x, const char *table, const char *index, ddb_index *ix)
{
    lapse_error err;
    memset(ix, 0, sizeof *ix);
    ix->name = index;
    int rv = lapse_index_describe(x->c, table, index, &ix->li, &err);
    char pk[LAPSE_KEY_NAME_MAX + 1], sk[LAPSE_KEY_NAME_MAX + 1];
    if (rv == LAPSE_ENOTFOUND && lapse_key_schema(x->c, table, NULL, pk, sk, NULL, NULL) == 0) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "The table does not have the specified index: %.255s", index);
    }
    if (rv != 0) {
        return ddb_req_lapse_fail(x, &err, table);
    }
    const lapse_index_info *li = &ix->li;
    ix->tpk = li->table_pk;
    ix->tsk = li->table_sk[0] != '\0' ? li->table_sk : NULL;
    ix->ipk = li->pk;
    ix->isk = li->sk[0] != '\0' ? li->sk : NULL;
    ix->ipk_type = li->pk_type;
    ix->isk_type = li->sk_type;
    ix->gsi = li->is_gsi;
    ix->projection = li->projection == LAPSE_PROJECT_KEYS ? "KEYS_ONLY" : "ALL";
    if (li->projection == LAPSE_PROJECT_KEYS) {
        return 0;
    }
    /* ALL on the nodes: INCLUDE when the gateway's document says so. */
    if (ddb_meta_get(x, table, li->table_created_ms, &ix->meta) != 0) {
        return -1;
    }
    json_t *proj = json_object_get(json_object_get(ix->meta, "Projections"), index);
    const char *given = json_string_value(json_object_get(proj, "ProjectionType"));
    if (given != NULL && strcmp(given, "INCLUDE") == 0) {
        ix->projection = "INCLUDE";
        ix->non_key = json_object_get(proj, "NonKeyAttributes");
    }
    return 0;
}

void ddb_index_fini(ddb_index *ix)
{
    json_decref(ix->meta);
    ix->meta = NULL;
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
