/* ddbjson_test: DynamoDB JSON parse/format round trips and every rejection,
 * with error messages that name the attribute. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "ddbjson.h"
#include "lapse_err.h"

static item *parse_ok(const char *text)
{
    item *it = NULL;
    char err[256] = "";
    int rv = ddbjson_parse_item(text, strlen(text), &it, err, sizeof(err));
    if (rv != 0) {
        fail_msg("parse %s: %s (%s)", text, lapse_strerror(rv), err);
    }
    return it;
}

static void expect_reject(const char *text, const char *reason)
{
    item *it = NULL;
    char err[256] = "";
    int rv = ddbjson_parse_item(text, strlen(text), &it, err, sizeof(err));
    if (rv != LAPSE_EINVAL) {
        fail_msg("parse %s: got %s, want rejection", text, lapse_strerror(rv));
    }
    assert_null(it);
    if (strstr(err, reason) == NULL) {
        fail_msg("parse %s: reason \"%s\" lacks \"%s\"", text, err, reason);
    }
}

/* Formatting is compact, keeps attribute order, and re-parses to the same. */
static void round_trip(void **state)
{
    (void)state;
    const char *texts[] = {
        "{\"UserName\":{\"S\":\"user1\"},\"ExpirationTime\":{\"N\":\"1461938400\"}}",
        "{\"z\":{\"N\":\"-12.50\"},\"a\":{\"B\":\"AAH/AA==\"},\"m\":{\"BOOL\":false},"
        "\"n\":{\"NULL\":true}}",
        "{\"Tags\":{\"L\":[{\"S\":\"x\"},{\"N\":\"1E+100\"},{\"L\":[]},{\"M\":{}}]},"
        "\"Addr\":{\"M\":{\"City\":{\"S\":\"Z\xc3\xbc"
        "rich\"},\"Zip\":{\"N\":\"8000\"},"
        "\"Geo\":{\"M\":{\"lat\":{\"N\":\"47.37\"}}}}}}",
        "{\"nul\":{\"S\":\"a\\u0000b\"},\"empty\":{\"S\":\"\"},\"eb\":{\"B\":\"\"}}",
        "{\"ss\":{\"SS\":[\"b\",\"a\"]},\"ns\":{\"NS\":[\"1.50\",\"-2\"]},"
        "\"bs\":{\"BS\":[\"AAE=\",\"Ag==\"]},\"in\":{\"L\":[{\"SS\":[\"x\"]}]}}",
        "{}",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        item *it = parse_ok(texts[i]);
        char *out = ddbjson_format_item(it);
        assert_non_null(out);
        assert_string_equal(out, texts[i]);
        item *back = parse_ok(out);
        assert_true(item_eq(it, back));
        free(out);
        item_free(back);
        item_free(it);
    }
    /* whitespace is accepted; output is compact */
    item *it = parse_ok(" { \"a\" : { \"S\" : \"b\" } } ");
    char *out = ddbjson_format_item(it);
    assert_string_equal(out, "{\"a\":{\"S\":\"b\"}}");
    free(out);
    item_free(it);
}

static void values_decoded(void **state)
{
    (void)state;
    item *it = parse_ok("{\"b\":{\"B\":\"AAH/AA==\"},\"s\":{\"S\":\"a\\u0000b\"},"
                        "\"n\":{\"N\":\"007.50\"},\"t\":{\"BOOL\":true}}");
    const attr_value *b = item_get(it, "b");
    assert_int_equal(b->type, ATTR_B);
    assert_int_equal(b->u.bytes.len, 4);
    assert_memory_equal(b->u.bytes.ptr, "\x00\x01\xff\x00", 4);
    const attr_value *s = item_get(it, "s");
    assert_int_equal(s->u.bytes.len, 3);
    assert_memory_equal(s->u.bytes.ptr, "a\0b", 3);
    assert_string_equal(item_get(it, "n")->u.bytes.ptr, "007.50"); /* kept as given */
    assert_int_equal(item_get(it, "t")->u.boolean, 1);
    item_free(it);

    /* base64 of every length mod 3 */
    const char *b64[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    for (size_t i = 0; i < 7; i++) {
        char text[128];
        snprintf(text, sizeof(text), "{\"B\":\"%s\"}", b64[i]);
        attr_value v;
        char err[256];
        assert_int_equal(ddbjson_parse_value(text, strlen(text), &v, err, sizeof(err)), 0);
        assert_int_equal(v.u.bytes.len, strlen(plain[i]));
        assert_memory_equal(v.u.bytes.ptr, plain[i], strlen(plain[i]));
        char *out = ddbjson_format_value(&v);
        assert_string_equal(out, text);
        free(out);
        item_value_fini(&v);
    }
}

static void parse_value_api(void **state)
{
    (void)state;
    attr_value v;
    char err[256] = "";
    assert_int_equal(ddbjson_parse_value("{\"N\":\"5\"}", 9, &v, err, sizeof(err)), 0);
    assert_int_equal(v.type, ATTR_N);
    item_value_fini(&v);
    assert_int_equal(ddbjson_parse_value("{\"N\":5}", 7, &v, err, sizeof(err)), LAPSE_EINVAL);
    assert_non_null(strstr(err, "N value must be a JSON string"));
    assert_int_equal(v.type, ATTR_NULL);
    assert_int_equal(ddbjson_parse_value("\"x\"", 3, &v, err, sizeof(err)), LAPSE_EINVAL);
    /* the jansson forms */
    json_t *j = NULL;
    assert_int_equal(ddbjson_parse_value("{\"L\":[{\"NULL\":true}]}", 21, &v, err, sizeof(err)), 0);
    j = ddbjson_value_to_json(&v);
    assert_non_null(j);
    assert_true(json_is_array(json_object_get(j, "L")));
    json_decref(j);
    item_value_fini(&v);
}

static void rejections(void **state)
{
    (void)state;
    expect_reject("[1]", "must be a JSON object");
    expect_reject("\"str\"", "invalid JSON");
    expect_reject("{\"a\":{\"S\":\"x\"}", "invalid JSON");
    expect_reject("{\"a\":\"x\"}", "attribute \"a\": value must be an object");
    expect_reject("{\"a\":{}}", "attribute \"a\": value must have exactly one type key, has 0");
    expect_reject("{\"a\":{\"S\":\"x\",\"N\":\"1\"}}", "exactly one type key, has 2");
    expect_reject("{\"a\":{\"X\":\"1\"}}", "unknown type \"X\"");
    expect_reject("{\"a\":{\"s\":\"1\"}}", "unknown type \"s\"");
    expect_reject("{\"a\":{\"SS\":[]}}", "attribute \"a\": an empty set is not allowed (SS)");
    expect_reject("{\"a\":{\"SS\":[\"x\",\"x\"]}}", "SS value contains duplicates (\"x\" twice)");
    expect_reject("{\"a\":{\"NS\":[\"1\",\"1.00\"]}}", "NS value contains duplicates");
    expect_reject("{\"a\":{\"NS\":[\"1\",\"x\"]}}",
                  "attribute \"a[1]\": N value \"x\" is not a number");
    expect_reject("{\"a\":{\"BS\":[\"AA==\",\"AA==\"]}}", "BS value contains duplicates");
    expect_reject("{\"a\":{\"BS\":[\"!!\"]}}", "not valid base64");
    expect_reject("{\"a\":{\"SS\":\"x\"}}", "SS value must be a JSON array of strings");
    expect_reject("{\"a\":{\"SS\":[1]}}", "S value must be a JSON string");
    expect_reject("{\"Age\":{\"N\":\"abc\"}}",
                  "attribute \"Age\": N value \"abc\" is not a number");
    expect_reject("{\"Age\":{\"N\":\"1E200\"}}", "too large");
    expect_reject("{\"Age\":{\"N\":\"1234567890123456789012345678901234567890\"}}",
                  "38 significant digits");
    expect_reject("{\"Age\":{\"N\":12}}", "N value must be a JSON string");
    expect_reject("{\"a\":{\"S\":1}}", "S value must be a JSON string");
    expect_reject("{\"Pic\":{\"B\":\"abc\"}}", "attribute \"Pic\": B value is not valid base64");
    expect_reject("{\"Pic\":{\"B\":\"ab!=\"}}", "not valid base64");
    expect_reject("{\"Pic\":{\"B\":\"a===\"}}", "not valid base64");
    expect_reject("{\"Pic\":{\"B\":\"Zg=a\"}}", "not valid base64");
    expect_reject("{\"Pic\":{\"B\":\"Zh==\"}}", "not valid base64"); /* stray bits */
    expect_reject("{\"Pic\":{\"B\":\"Zg==Zg==\"}}", "not valid base64");
    expect_reject("{\"n\":{\"NULL\":false}}", "attribute \"n\": NULL value must be true");
    expect_reject("{\"n\":{\"NULL\":1}}", "NULL value must be true");
    expect_reject("{\"b\":{\"BOOL\":\"true\"}}", "BOOL value must be true or false");
    expect_reject("{\"l\":{\"L\":{}}}", "L value must be a JSON array");
    expect_reject("{\"m\":{\"M\":[]}}", "M value must be a JSON object");
    expect_reject("{\"a\":{\"S\":\"x\"},\"a\":{\"S\":\"y\"}}", "duplicate attribute name");
    expect_reject("{\"m\":{\"M\":{\"k\":{\"S\":\"x\"},\"k\":{\"S\":\"y\"}}}}",
                  "duplicate attribute name");
    expect_reject("{\"\":{\"S\":\"x\"}}", "empty attribute name");
    expect_reject("{\"a\\u0000b\":{\"S\":\"x\"}}", "NUL");
    /* errors deep inside name the path */
    expect_reject("{\"Tags\":{\"L\":[{\"S\":\"x\"},{\"M\":{\"Color\":{\"N\":\"red\"}}}]}}",
                  "attribute \"Tags[1].Color\": N value \"red\" is not a number");
}

static char *nested(int depth)
{
    /* {"a": {"L":[ {"L":[ ... {"NULL":true} ... ]} ]}} with depth levels */
    size_t cap = (size_t)depth * 16 + 64;
    char *s = malloc(cap);
    size_t k = (size_t)snprintf(s, cap, "{\"a\":");
    for (int i = 1; i < depth; i++) {
        k += (size_t)snprintf(s + k, cap - k, "{\"L\":[");
    }
    k += (size_t)snprintf(s + k, cap - k, "{\"NULL\":true}");
    for (int i = 1; i < depth; i++) {
        k += (size_t)snprintf(s + k, cap - k, "]}");
    }
    snprintf(s + k, cap - k, "}");
    return s;
}

static void nesting_limit(void **state)
{
    (void)state;
    char *ok = nested(ITEM_MAX_DEPTH);
    item *it = parse_ok(ok);
    char *out = ddbjson_format_item(it);
    assert_string_equal(out, ok);
    free(out);
    item_free(it);
    free(ok);
    char *deep = nested(ITEM_MAX_DEPTH + 1);
    expect_reject(deep, "nesting deeper than 32 levels");
    free(deep);
}

static void format_odd_values(void **state)
{
    (void)state;
    /* S values from the C API need not be UTF-8: output stays valid JSON */
    item *it = item_new();
    attr_value v;
    assert_int_equal(item_value_init_bytes(&v, ATTR_S,
                                           "a\xff"
                                           "b",
                                           3),
                     0);
    assert_int_equal(item_set(it, "s", &v), 0);
    char *out = ddbjson_format_item(it);
    assert_non_null(out);
    assert_string_equal(out, "{\"s\":{\"S\":\"a\xef\xbf\xbd"
                             "b\"}}");
    free(out);
    item_free(it);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),      cmocka_unit_test(values_decoded),
        cmocka_unit_test(parse_value_api), cmocka_unit_test(rejections),
        cmocka_unit_test(nesting_limit),   cmocka_unit_test(format_odd_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
