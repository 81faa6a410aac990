/*
 * ddbjson.h: DynamoDB JSON, the text form of items and values, e.g.
 *   {"UserName":{"S":"user1"},"ExpirationTime":{"N":"1461938400"}}
 * B values are base64. Sets are arrays of element texts, {"SS":["a","b"]},
 * {"NS":["1","2.5"]}, {"BS":["AAE="]}: never empty, no duplicates.
 * Parsed with jansson; nothing else in Lapse parses JSON by hand. The text
 * forms are written straight into a buffer, the same text jansson dumps of
 * the document forms (ddbjson_test holds them to it).
 *
 * Thread-safe (pure functions).
 */
#ifndef LAPSE_DDBJSON_H
#define LAPSE_DDBJSON_H

#include <stddef.h>

#include "item.h"

/* Parses an item (a JSON object of typed values). Returns 0, LAPSE_EINVAL
 * (with a reason such as "attribute \"Age\": N value \"abc\" is not a number")
 * or LAPSE_ENOMEM. On success the caller frees *out with item_free. */
int ddbjson_parse_item(const char *text, size_t len, item **out, char *err, size_t errlen);
/* Parses one typed value such as {"N":"5"} into *out (caller item_value_fini).
 * Returns as ddbjson_parse_item. */
int ddbjson_parse_value(const char *text, size_t len, attr_value *out, char *err, size_t errlen);
/* Formats compact JSON with attributes in item order. Returns a malloc'd
 * string (caller frees with free()), or NULL on OOM. */
char *ddbjson_format_item(const item *it);
char *ddbjson_format_value(const attr_value *v);

/* The jansson-level forms, for building larger documents (stream records,
 * describe-table output). Returns a new reference, or NULL on OOM. */
struct json_t;
struct json_t *ddbjson_item_to_json(const item *it);
struct json_t *ddbjson_value_to_json(const attr_value *v);

#endif
