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

/* ---- the text writer against jansson's dump of the same document ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static unsigned rnd(unsigned n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

/* Bytes that may or may not be UTF-8: plain text, the characters JSON
 * escapes, valid sequences of every length, and broken ones. */
static size_t random_text(char *out, size_t cap)
{
    static const char *const parts[] = {"a",
                                        "Id",
                                        " ",
                                        "\"",
                                        "\\",
                                        "/",
                                        "\n",
                                        "\t",
                                        "\b",
                                        "\f",
                                        "\r",
                                        "\x01",
                                        "\x1f",
                                        "\x7f",
                                        "\xc3\xa9",
                                        "\xe2\x82\xac",
                                        "\xf0\x9f\x98\x80",
                                        "\xef\xbf\xbd",
                                        "\xed\x9f\xbf",
                                        "\xff",
                                        "\xc0\xaf",
                                        "\xc3",
                                        "\xe2\x82",
                                        "\xf0\x9f\x98",
                                        "\xed\xa0\x80",
                                        "\xf4\x90\x80\x80",
                                        "\xe0\x80\xaf",
                                        "\xf0\x80\x80\xaf",
                                        "\x80",
                                        "\xf5\x80\x80\x80"};
    size_t n = 0, k = rnd(6);
    for (size_t i = 0; i < k; i++) {
        const char *p = parts[rnd(sizeof parts / sizeof parts[0])];
        size_t len = strlen(p);
        if (n + len + 1 < cap) {
            memcpy(out + n, p, len);
            n += len;
        }
    }
    if (rnd(8) == 0 && n + 1 < cap) {
        out[n++] = '\0'; /* a NUL inside an S value */
    }
    return n;
}

static void random_value(attr_value *v, int depth)
{
    static const char *const numbers[] = {"0", "-1", "2.5E3", "123456789012345678901234567890"};
    char text[64];
    unsigned kind = rnd(depth >= 3 ? 6 : 9);
    size_t n;
    switch (kind) {
    case 0:
        n = random_text(text, sizeof text);
        assert_int_equal(item_value_init_bytes(v, ATTR_S, text, n), 0);
        return;
    case 1: {
        const char *num = numbers[rnd(4)];
        assert_int_equal(item_value_init_bytes(v, ATTR_N, num, strlen(num)), 0);
        return;
    }
    case 2:
        n = random_text(text, sizeof text);
        assert_int_equal(item_value_init_bytes(v, ATTR_B, text, n), 0);
        return;
    case 3:
        item_value_init_bool(v, (int)rnd(2));
        return;
    case 4:
        item_value_init_null(v);
        return;
    case 5: {
        attr_type t = rnd(2) ? ATTR_SS : ATTR_BS;
        item_value_init_set(v, t);
        for (unsigned i = 0, k = 1 + rnd(3); i < k; i++) {
            attr_value e;
            snprintf(text, sizeof text, "e%u", i);
            assert_int_equal(item_value_init_bytes(&e, item_set_elem_type(t), text, strlen(text)),
                             0);
            assert_int_equal(item_value_set_add(v, &e), 0);
        }
        return;
    }
    case 6:
    case 7:
        item_value_init_list(v);
        for (unsigned i = 0, k = rnd(4); i < k; i++) {
            attr_value e;
            random_value(&e, depth + 1);
            assert_int_equal(item_value_list_append(v, &e), 0);
        }
        return;
    default:
        item_value_init_map(v);
        for (unsigned i = 0, k = rnd(4); i < k; i++) {
            attr_value e;
            snprintf(text, sizeof text, "m%u", i);
            random_value(&e, depth + 1);
            assert_int_equal(item_value_map_set(v, text, &e), 0);
        }
        return;
    }
}

/* Both formats of it: the same text, or both refused (NULL). */
static void expect_same_text(const item *it)
{
    char *text = ddbjson_format_item(it);
    json_t *doc = ddbjson_item_to_json(it);
    char *want = doc != NULL ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if ((text == NULL) != (want == NULL) || (text != NULL && strcmp(text, want) != 0)) {
        fail_msg("writer %s, jansson %s", text ? text : "(null)", want ? want : "(null)");
    }
    free(text);
    free(want);
    json_decref(doc);
}

static void writer_matches_jansson(void **state)
{
    (void)state;
    int refused = 0;
    for (int round = 0; round < 3000; round++) {
        item *it = item_new();
        assert_non_null(it);
        for (unsigned i = 0, k = rnd(5); i < k; i++) {
            char name[64];
            size_t n = rnd(4) == 0 ? random_text(name, sizeof name) : 0;
            if (n == 0 || memchr(name, 0, n) != NULL) {
                n = (size_t)snprintf(name, sizeof name, "a%u", i);
            }
            name[n] = '\0';
            attr_value v;
            random_value(&v, 1);
            if (item_set(it, name, &v) != 0) {
                item_value_fini(&v);
            }
        }
        char *text = ddbjson_format_item(it);
        refused += text == NULL;
        free(text);
        expect_same_text(it);
        item_free(it);
    }
    /* Some names were not UTF-8, which both refuse; most items went out. */
    assert_true(refused > 0 && refused < 1500);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(values_decoded),
        cmocka_unit_test(parse_value_api),
        cmocka_unit_test(rejections),
        cmocka_unit_test(nesting_limit),
        cmocka_unit_test(format_odd_values),
        cmocka_unit_test(writer_matches_jansson),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
