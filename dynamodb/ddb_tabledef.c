/*
 * ddb_tabledef.c: CreateTable's key schemas and indexes (ddb_tabledef.h).
 */
#include "ddb_tabledef.h"

#include <stdlib.h>
#include <string.h>

/* The type ('S', 'N' or 'B') AttributeDefinitions gives name, or 0 with the
 * error set. */
static char attr_type(ddb_ctx *x, json_t *defs, const char *name)
{
    size_t i;
    json_t *d;
    json_array_foreach(defs, i, d)
    {
        const char *n = json_string_value(json_object_get(d, "AttributeName"));
        const char *t = json_string_value(json_object_get(d, "AttributeType"));
        if (n != NULL && strcmp(n, name) == 0) {
            if (t == NULL || strlen(t) != 1 || strchr("SNB", t[0]) == NULL) {
                ddb_req_fail(x, 400, "ValidationException",
                             "AttributeDefinitions: AttributeType of %s must be S, N or B", name);
                return 0;
            }
            return t[0];
        }
    }
    ddb_req_fail(x, 400, "ValidationException",
                 "One or more parameter values were invalid: Some index key attributes are not "
                 "defined in AttributeDefinitions. Keys: [%s]",
                 name);
    return 0;
}

/* Reads a KeySchema (one HASH, at most one RANGE) into *pk and *sk (NULL:
 * none), with their types from defs. Returns 0 or -1 with the error set. */
int ddb_tabledef_key_schema(ddb_ctx *x, json_t *ks, json_t *defs, const char *what, const char **pk,
                            char *pkt, const char **sk, char *skt)
{
    *pk = *sk = NULL;
    size_t i;
    json_t *k;
    if (!json_is_array(ks) || json_array_size(ks) < 1 || json_array_size(ks) > 2) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "%s: KeySchema must list one HASH key and at most one RANGE key", what);
    }
    json_array_foreach(ks, i, k)
    {
        const char *n = json_string_value(json_object_get(k, "AttributeName"));
        const char *role = json_string_value(json_object_get(k, "KeyType"));
        if (n == NULL || role == NULL) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "%s: each KeySchema element needs AttributeName and KeyType", what);
        }
        if (strcmp(role, "HASH") == 0 && *pk == NULL && i == 0) {
            *pk = n;
            if ((*pkt = attr_type(x, defs, n)) == 0) {
                return -1;
            }
        } else if (strcmp(role, "RANGE") == 0 && *sk == NULL && i == 1) {
            *sk = n;
            if ((*skt = attr_type(x, defs, n)) == 0) {
                return -1;
            }
        } else {
            return ddb_req_fail(x, 400, "ValidationException",
                                "%s: KeySchema must be one HASH key, then at most one RANGE key",
                                what);
        }
    }
    return 0;
}

/* DynamoDB's limit on NonKeyAttributes, counted over all of a table's
 * indexes. */
#define NON_KEY_MAX 100

/* Reads an index's Projection: ALL, KEYS_ONLY, or INCLUDE with
 * NonKeyAttributes, which the nodes keep as ALL and projections (an object)
 * records by index name for the gateway to apply (docs/dynamodb-api.md,
 * "What the gateway keeps"). *nonkey counts NonKeyAttributes over the
 * table. */
static int projection(ddb_ctx *x, const char *name, json_t *proj, json_t *projections,
                      size_t *nonkey, lapse_projection *out)
{
    const char *ptype = json_string_value(json_object_get(proj, "ProjectionType"));
    json_t *attrs = json_object_get(proj, "NonKeyAttributes");
    if (ptype == NULL || strcmp(ptype, "ALL") == 0) {
        *out = LAPSE_PROJECT_ALL;
    } else if (strcmp(ptype, "KEYS_ONLY") == 0) {
        *out = LAPSE_PROJECT_KEYS;
    } else if (strcmp(ptype, "INCLUDE") == 0) {
        *out = LAPSE_PROJECT_ALL;
    } else {
        return ddb_req_fail(x, 400, "ValidationException",
                            "1 validation error detected: Value '%.40s' at 'projection."
                            "projectionType' of index %s failed to satisfy constraint: Member "
                            "must satisfy enum value set: [ALL, KEYS_ONLY, INCLUDE]",
                            ptype, name);
    }
    int include = ptype != NULL && strcmp(ptype, "INCLUDE") == 0;
    if (!include && attrs != NULL) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "One or more parameter values were invalid: ProjectionType is %s, "
                            "but NonKeyAttributes is specified (index %s)",
                            ptype != NULL ? ptype : "ALL", name);
    }
    if (!include) {
        return 0;
    }
    if (!json_is_array(attrs) || json_array_size(attrs) == 0) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "One or more parameter values were invalid: ProjectionType is INCLUDE, "
                            "but NonKeyAttributes is not specified or empty (index %s)",
                            name);
    }
    size_t i, j;
    json_t *a;
    json_array_foreach(attrs, i, a)
    {
        const char *an = json_string_value(a);
        if (an == NULL || an[0] == '\0' || strlen(an) > 255) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "NonKeyAttributes of index %s: each is an attribute name of 1 to "
                                "255 characters",
                                name);
        }
        for (j = 0; j < i; j++) {
            if (strcmp(json_string_value(json_array_get(attrs, j)), an) == 0) {
                return ddb_req_fail(x, 400, "ValidationException",
                                    "One or more parameter values were invalid: Duplicate "
                                    "NonKeyAttribute %s in index %s",
                                    an, name);
            }
        }
    }
    if ((*nonkey += json_array_size(attrs)) > NON_KEY_MAX) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "One or more parameter values were invalid: Number of projected "
                            "attributes in all indexes exceeds limit of %d",
                            NON_KEY_MAX);
    }
    json_object_set_new(
        projections, name,
        json_pack("{s:s,s:O}", "ProjectionType", "INCLUDE", "NonKeyAttributes", attrs));
    return 0;
}

/* Reads LocalSecondaryIndexes or GlobalSecondaryIndexes into defs (caller
 * frees *out), INCLUDE projections into projections. */
int ddb_tabledef_indexes(ddb_ctx *x, json_t *arr, json_t *defs, int gsi, lapse_index_def **out,
                         size_t *n, json_t *projections, size_t *nonkey)
{
    *out = NULL;
    *n = 0;
    if (arr == NULL || json_array_size(arr) == 0) {
        return 0;
    }
    if ((*out = calloc(json_array_size(arr), sizeof **out)) == NULL) {
        return ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    size_t i;
    json_t *ix;
    json_array_foreach(arr, i, ix)
    {
        lapse_index_def *d = &(*out)[i];
        const char *name = json_string_value(json_object_get(ix, "IndexName"));
        json_t *proj = json_object_get(ix, "Projection");
        const char *pk, *sk;
        char pkt = 0, skt = 0;
        if (name == NULL) {
            return ddb_req_fail(x, 400, "ValidationException", "an index has no IndexName");
        }
        if (ddb_tabledef_key_schema(x, json_object_get(ix, "KeySchema"), defs, name, &pk, &pkt, &sk,
                                    &skt) != 0) {
            return -1;
        }
        d->name = name;
        if (projection(x, name, proj, projections, nonkey, &d->projection) != 0) {
            return -1;
        }
        if (gsi) {
            d->partition_key = pk;
            d->partition_key_type = pkt;
            d->sort_key = sk;
            d->sort_key_type = skt;
        } else {
            /* An LSI repeats the table's HASH key; Lapse takes only its sort key. */
            if (sk == NULL) {
                return ddb_req_fail(x, 400, "ValidationException",
                                    "local secondary index %s needs a RANGE key", name);
            }
            d->sort_key = sk;
            d->sort_key_type = skt;
        }
    }
    *n = json_array_size(arr);
    return 0;
}
