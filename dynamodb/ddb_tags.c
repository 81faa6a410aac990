/*
 * ddb_tags.c: table tags in the gateway's document of the table
 * (ddb_tags.h).
 */
#include "ddb_tags.h"

#include <stdlib.h>
#include <string.h>

#include "ddb_meta.h"

/* UTF-8 characters in s. */
static size_t chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++) {
        n += ((unsigned char)*s & 0xC0) != 0x80;
    }
    return n;
}

int ddb_tags_read(ddb_ctx *x, json_t *arr, json_t *tags)
{
    size_t i;
    json_t *t;
    if (!json_is_array(arr)) {
        return ddb_req_fail(x, 400, "SerializationException", "Tags must be a list");
    }
    json_array_foreach(arr, i, t)
    {
        const char *k, *v;
        if (!json_is_object(t) || ddb_req_string(x, t, "Key", 1, &k) != 0 ||
            ddb_req_string(x, t, "Value", 1, &v) != 0) {
            return json_is_object(t) ? -1
                                     : ddb_req_fail(x, 400, "SerializationException",
                                                    "each tag is an object {Key, Value}");
        }
        size_t kn = chars(k), vn = chars(v);
        if (kn < 1 || kn > 128 || vn > 256) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "1 validation error detected: a tag's Key must be 1 to 128 "
                                "characters and its Value at most 256 (key '%.128s')",
                                k);
        }
        if (strncmp(k, "aws:", 4) == 0) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "User-defined tag keys cannot start with the reserved prefix "
                                "aws: (%.128s)",
                                k);
        }
        json_object_set_new(tags, k, json_string(v));
    }
    return 0;
}

/* The table an ARN of this gateway's form names
 * (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME), into name (256 bytes). */
static int arn_table(ddb_ctx *x, json_t *req, char *name)
{
    const char *arn;
    if (ddb_req_string(x, req, "ResourceArn", 1, &arn) != 0) {
        return -1;
    }
    static const char prefix[] = "arn:aws:dynamodb:";
    const char *p = strncmp(arn, prefix, sizeof prefix - 1) == 0 ? arn + sizeof prefix - 1 : NULL;
    p = p != NULL ? strchr(p, ':') : NULL;     /* after the region */
    p = p != NULL ? strchr(p + 1, ':') : NULL; /* after the account */
    if (p == NULL || strncmp(p + 1, "table/", 6) != 0 || strchr(p + 7, '/') != NULL ||
        strlen(p + 7) < 3 || strlen(p + 7) > 255) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "Invalid TableArn: Invalid ResourceArn provided as input %.300s", arn);
    }
    strcpy(name, p + 7);
    return 0;
}

/* The creation time of table (its key in the gateway's documents), or -1
 * with x's error set (ResourceNotFoundException when there is none). */
static int created_of(ddb_ctx *x, const char *table, int64_t *created)
{
    char *json = NULL;
    lapse_error err;
    if (lapse_describe_table(x->c, table, &json, &err) != 0) {
        return ddb_req_lapse_fail(x, &err, table);
    }
    json_t *doc = json_loads(json, 0, NULL);
    lapse_free(json);
    *created =
        (int64_t)json_integer_value(json_object_get(json_object_get(doc, "Table"), "CreatedAtMs"));
    json_decref(doc);
    return 0;
}

typedef struct change {
    json_t *add;  /* borrowed: tags to set */
    json_t *keys; /* borrowed: keys to remove */
} change;

static int apply(ddb_ctx *x, json_t *doc, void *arg)
{
    const change *c = arg;
    json_t *tags = json_object_get(doc, "Tags");
    if (tags == NULL) {
        json_object_set_new(doc, "Tags", tags = json_object());
    }
    if (c->add != NULL) {
        json_object_update(tags, c->add);
    }
    size_t i;
    json_t *k;
    json_array_foreach(c->keys, i, k)
    {
        json_object_del(tags, json_string_value(k));
    }
    if (json_object_size(tags) > DDB_TAGS_MAX) {
        return ddb_req_fail(x, 400, "LimitExceededException",
                            "The number of tags of a resource exceeds the limit of %d",
                            DDB_TAGS_MAX);
    }
    if (json_object_size(tags) == 0) {
        json_object_del(doc, "Tags");
    }
    return 0;
}

int ddb_tags_tag(ddb_ctx *x, json_t *req)
{
    char table[256];
    json_t *arr, *add = json_object();
    int64_t created;
    int rv = -1;
    if (arn_table(x, req, table) != 0 || ddb_req_array(x, req, "Tags", 1, &arr) != 0 ||
        ddb_tags_read(x, arr, add) != 0 || created_of(x, table, &created) != 0) {
        goto out;
    }
    change c = {.add = add, .keys = NULL};
    if ((rv = ddb_meta_update(x, table, created, apply, &c)) == 0) {
        x->out = json_object();
    }
out:
    json_decref(add);
    return rv;
}

int ddb_tags_untag(ddb_ctx *x, json_t *req)
{
    char table[256];
    json_t *keys;
    int64_t created;
    if (arn_table(x, req, table) != 0 || ddb_req_array(x, req, "TagKeys", 1, &keys) != 0) {
        return -1;
    }
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        if (!json_is_string(k)) {
            return ddb_req_fail(x, 400, "SerializationException", "TagKeys holds strings");
        }
    }
    if (created_of(x, table, &created) != 0) {
        return -1;
    }
    change c = {.add = NULL, .keys = keys};
    if (ddb_meta_update(x, table, created, apply, &c) != 0) {
        return -1;
    }
    x->out = json_object();
    return 0;
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int ddb_tags_list(ddb_ctx *x, json_t *req)
{
    char table[256];
    const char *next;
    int64_t created;
    json_t *doc = NULL;
    if (arn_table(x, req, table) != 0 || ddb_req_string(x, req, "NextToken", 0, &next) != 0 ||
        created_of(x, table, &created) != 0 || ddb_meta_get(x, table, created, &doc) != 0) {
        return -1;
    }
    json_t *tags = json_object_get(doc, "Tags"), *out = json_array();
    size_t n = json_object_size(tags), i = 0;
    const char **keys = calloc(n ? n : 1, sizeof *keys);
    const char *k;
    json_t *v;
    if (keys == NULL) {
        json_decref(doc);
        json_decref(out);
        return ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    json_object_foreach(tags, k, v)
    {
        keys[i++] = k;
    }
    qsort(keys, n, sizeof *keys, cmp_keys); /* all in one page, by key */
    for (i = 0; i < n; i++) {
        json_array_append_new(
            out, json_pack("{s:s,s:O}", "Key", keys[i], "Value", json_object_get(tags, keys[i])));
    }
    free(keys);
    json_decref(doc);
    x->out = json_pack("{s:o}", "Tags", out);
    return 0;
}
