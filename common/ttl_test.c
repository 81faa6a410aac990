/*
 * ttl_test: DynamoDB's eligibility rules: every type, a missing attribute,
 * fractions, the five-year guard's edge, offsets and the boundary millisecond;
 * and ttl_eval_encoded judging the encoded item exactly as ttl_eval does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ddbjson.h"
#include "lapse_err.h"
#include "ttl.h"

static const int64_t NOW_S = 1800000000; /* 2027-01-15 */

static ttl_rule rule(int64_t offset_s, int guard_years)
{
    ttl_rule r;
    memset(&r, 0, sizeof(r));
    strcpy(r.attribute, "ExpirationTime");
    r.offset_s = offset_s;
    r.guard_years = guard_years;
    return r;
}

static ttl_verdict eval_json(const ttl_rule *r, const char *json, int64_t now_ms, int64_t *due)
{
    item *it = NULL;
    char err[256];
    if (ddbjson_parse_item(json, strlen(json), &it, err, sizeof(err)) != 0) {
        fail_msg("bad JSON %s: %s", json, err);
    }
    clock_wall now = {now_ms};
    ttl_verdict v = ttl_eval(r, it, now, due);
    /* Every case also checks that the encoded form judges the same. */
    buf b;
    buf_init(&b);
    assert_int_equal(item_encode(it, &b), 0);
    ttl_verdict ve = TTL_VERDICT_COUNT;
    int64_t due_e = -1;
    assert_int_equal(ttl_eval_encoded(r, b.data, b.len, now, &ve, &due_e), 0);
    assert_int_equal(ve, v);
    if (v == TTL_ELIGIBLE && due != NULL) {
        assert_int_equal(due_e, *due);
    }
    buf_fini(&b);
    item_free(it);
    return v;
}

static void test_only_top_level_numbers_are_eligible(void **state)
{
    (void)state;
    ttl_rule r = rule(0, 5);
    int64_t due = 0;
    int64_t now = NOW_S * 1000;
    assert_int_equal(eval_json(&r, "{\"ExpirationTime\":{\"N\":\"1800000100\"}}", now, &due),
                     TTL_ELIGIBLE);
    assert_int_equal(due, 1800000100LL * 1000);
    assert_int_equal(eval_json(&r, "{\"Other\":{\"N\":\"1800000100\"}}", now, &due), TTL_MISSING);
    const char *not_numbers[] = {
        "{\"ExpirationTime\":{\"S\":\"1800000100\"}}",
        "{\"ExpirationTime\":{\"B\":\"AAEC\"}}",
        "{\"ExpirationTime\":{\"BOOL\":true}}",
        "{\"ExpirationTime\":{\"NULL\":true}}",
        "{\"ExpirationTime\":{\"L\":[{\"N\":\"1800000100\"}]}}",
        "{\"ExpirationTime\":{\"M\":{\"ExpirationTime\":{\"N\":\"1800000100\"}}}}",
    };
    for (size_t i = 0; i < sizeof(not_numbers) / sizeof(not_numbers[0]); i++) {
        assert_int_equal(eval_json(&r, not_numbers[i], now, &due), TTL_NOT_NUMBER);
    }
    /* Attribute names are case-sensitive. */
    assert_int_equal(eval_json(&r, "{\"expirationtime\":{\"N\":\"1800000100\"}}", now, &due),
                     TTL_MISSING);
}

static void test_fractions_truncate_and_due_instant_is_strict(void **state)
{
    (void)state;
    ttl_rule r = rule(0, 5);
    int64_t due = 0;
    int64_t now = NOW_S * 1000;
    assert_int_equal(eval_json(&r, "{\"ExpirationTime\":{\"N\":\"1800000000.999\"}}", now, &due),
                     TTL_ELIGIBLE);
    assert_int_equal(due, NOW_S * 1000);
    assert_int_equal(eval_json(&r, "{\"ExpirationTime\":{\"N\":\"1.8E9\"}}", now, &due),
                     TTL_ELIGIBLE);
    assert_int_equal(due, 1800000000LL * 1000);
    /* Due at T.000: not expired at T.000, expired one millisecond later. */
    clock_wall at = {NOW_S * 1000}, after = {NOW_S * 1000 + 1}, before = {NOW_S * 1000 - 1};
    assert_false(ttl_is_expired(due, before));
    assert_false(ttl_is_expired(due, at));
    assert_true(ttl_is_expired(due, after));
}

static void test_five_year_guard_edge(void **state)
{
    (void)state;
    ttl_rule r = rule(0, 5);
    int64_t due = 0;
    int64_t now = NOW_S * 1000 + 500;
    int64_t edge = NOW_S - 5 * TTL_SECONDS_PER_YEAR;
    char json[128];
    snprintf(json, sizeof(json), "{\"ExpirationTime\":{\"N\":\"%lld\"}}", (long long)edge);
    assert_int_equal(eval_json(&r, json, now, &due), TTL_ELIGIBLE);
    snprintf(json, sizeof(json), "{\"ExpirationTime\":{\"N\":\"%lld\"}}", (long long)edge - 1);
    assert_int_equal(eval_json(&r, json, now, &due), TTL_TOO_OLD);
    /* Zero, negatives and huge negatives are all too old. */
    assert_int_equal(eval_json(&r, "{\"ExpirationTime\":{\"N\":\"0\"}}", now, &due), TTL_TOO_OLD);
    assert_int_equal(eval_json(&r, "{\"ExpirationTime\":{\"N\":\"-5\"}}", now, &due), TTL_TOO_OLD);
    assert_int_equal(eval_json(&r, "{\"ExpirationTime\":{\"N\":\"-1E100\"}}", now, &due),
                     TTL_TOO_OLD);
    /* A per-table guard of one year moves the edge. */
    ttl_rule one = rule(0, 1);
    snprintf(json, sizeof(json), "{\"ExpirationTime\":{\"N\":\"%lld\"}}",
             (long long)(NOW_S - 2 * TTL_SECONDS_PER_YEAR));
    assert_int_equal(eval_json(&one, json, now, &due), TTL_TOO_OLD);
    assert_int_equal(eval_json(&r, json, now, &due), TTL_ELIGIBLE);
    /* Milliseconds read as seconds: eligible, due in the far future. */
    assert_int_equal(eval_json(&r, "{\"ExpirationTime\":{\"N\":\"1800000000000\"}}", now, &due),
                     TTL_ELIGIBLE);
    assert_false(ttl_is_expired(due, (clock_wall){now}));
    assert_int_equal(eval_json(&r, "{\"ExpirationTime\":{\"N\":\"1E100\"}}", now, &due),
                     TTL_OUT_OF_RANGE);
}

static void test_offset_delays_the_due_instant(void **state)
{
    (void)state;
    ttl_rule r = rule(3600, 5);
    int64_t due = 0;
    assert_int_equal(
        eval_json(&r, "{\"ExpirationTime\":{\"N\":\"1800000000\"}}", NOW_S * 1000, &due),
        TTL_ELIGIBLE);
    assert_int_equal(due, (NOW_S + 3600) * 1000);
    assert_false(ttl_is_expired(due, (clock_wall){(NOW_S + 3600) * 1000}));
    assert_true(ttl_is_expired(due, (clock_wall){(NOW_S + 3600) * 1000 + 1}));
    /* The guard applies to the stored value, not value + offset. */
    ttl_rule big = rule(10 * TTL_SECONDS_PER_YEAR, 5);
    char json[128];
    snprintf(json, sizeof(json), "{\"ExpirationTime\":{\"N\":\"%lld\"}}",
             (long long)(NOW_S - 6 * TTL_SECONDS_PER_YEAR));
    assert_int_equal(eval_json(&big, json, NOW_S * 1000, &due), TTL_TOO_OLD);
}

static void test_verdict_names_are_stable(void **state)
{
    (void)state;
    assert_string_equal(ttl_verdict_name(TTL_ELIGIBLE), "eligible");
    assert_string_equal(ttl_verdict_name(TTL_MISSING), "missing");
    assert_string_equal(ttl_verdict_name(TTL_NOT_NUMBER), "not_a_number");
    assert_string_equal(ttl_verdict_name(TTL_TOO_OLD), "too_old");
    assert_string_equal(ttl_verdict_name(TTL_OUT_OF_RANGE), "out_of_range");
    assert_string_equal(ttl_verdict_name((ttl_verdict)99), "unknown");
    /* Guard 0 is the default of five years; no attribute: nothing expires. */
    ttl_rule dflt = rule(0, 0);
    char json[128];
    snprintf(json, sizeof(json), "{\"ExpirationTime\":{\"N\":\"%lld\"}}",
             (long long)(NOW_S - 4 * TTL_SECONDS_PER_YEAR));
    assert_int_equal(eval_json(&dflt, json, NOW_S * 1000, NULL), TTL_ELIGIBLE);
    snprintf(json, sizeof(json), "{\"ExpirationTime\":{\"N\":\"%lld\"}}",
             (long long)(NOW_S - 6 * TTL_SECONDS_PER_YEAR));
    assert_int_equal(eval_json(&dflt, json, NOW_S * 1000, NULL), TTL_TOO_OLD);
    dflt.attribute[0] = '\0';
    assert_int_equal(eval_json(&dflt, json, NOW_S * 1000, NULL), TTL_MISSING);
}

/* ttl_eval_encoded and ttl_eval agree on random items under random rules:
 * the TTL attribute of every type (N of every shape: negative, fractions,
 * exponents, near the guard, far beyond int64), absent, or only nested, with
 * other attributes around it; and a corrupted copy is ECORRUPT exactly when
 * item_decode rejects it. */
static uint64_t rng = 88172645463325252ULL;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void set_n(item *it, const char *name, const char *text)
{
    attr_value v;
    assert_int_equal(item_value_init_bytes(&v, ATTR_N, text, strlen(text)), 0);
    assert_int_equal(item_set(it, name, &v), 0);
}

static void random_number(char *out, size_t outlen)
{
    int64_t base = NOW_S + (int64_t)(rnd() % 400000000) - 200000000; /* +-6 years */
    switch (rnd() % 8) {
    case 0:
        snprintf(out, outlen, "%lld", (long long)base);
        break;
    case 1:
        snprintf(out, outlen, "%lld.%03d", (long long)base, (int)(rnd() % 1000));
        break;
    case 2:
        snprintf(out, outlen, "-%lld", (long long)(rnd() % 10000000000ULL));
        break;
    case 3:
        snprintf(out, outlen, "%lld000", (long long)base); /* milliseconds */
        break;
    case 4:
        snprintf(out, outlen, "%dE%d", (int)(rnd() % 100), (int)(rnd() % 30));
        break;
    case 5:
        snprintf(out, outlen, "1%030d", 0); /* beyond int64 */
        break;
    case 6:
        snprintf(out, outlen, "0.%d", (int)(rnd() % 1000));
        break;
    default:
        snprintf(out, outlen, "%lld",
                 (long long)(NOW_S - 5 * TTL_SECONDS_PER_YEAR + (int64_t)(rnd() % 5) -
                             2)); /* guard edge */
        break;
    }
}

static void test_encoded_agrees_on_random_items(void **state)
{
    (void)state;
    char num[64];
    for (int round = 0; round < 20000; round++) {
        ttl_rule r = rule((int64_t)(rnd() % 3) * (int64_t)(rnd() % 100000), (int)(rnd() % 4));
        if (rnd() % 50 == 0) {
            r.attribute[0] = 0; /* no attribute: everything is missing */
        }
        item *it = item_new();
        assert_non_null(it);
        int others = (int)(rnd() % 6);
        for (int k = 0; k < others; k++) {
            char name[16];
            snprintf(name, sizeof(name), "A%d", k);
            random_number(num, sizeof(num));
            set_n(it, name, num);
        }
        attr_value v;
        random_number(num, sizeof(num));
        switch (rnd() % 7) {
        case 0:
        case 1:
        case 2:
            set_n(it, "ExpirationTime", num);
            break;
        case 3:
            assert_int_equal(item_value_init_bytes(&v, ATTR_S, num, strlen(num)), 0);
            assert_int_equal(item_set(it, "ExpirationTime", &v), 0);
            break;
        case 4: {
            attr_value m, inner;
            item_value_init_map(&m);
            assert_int_equal(item_value_init_bytes(&inner, ATTR_N, num, strlen(num)), 0);
            assert_int_equal(item_value_map_set(&m, "ExpirationTime", &inner), 0);
            assert_int_equal(item_set(it, rnd() % 2 ? "ExpirationTime" : "Nested", &m), 0);
            break;
        }
        case 5:
            item_value_init_bool(&v, 1);
            assert_int_equal(item_set(it, "ExpirationTime", &v), 0);
            break;
        default:
            set_n(it, "expirationtime", num); /* case differs: missing */
            break;
        }
        clock_wall now = {NOW_S * 1000 + (int64_t)(rnd() % 2000000000) - 1000000000};
        int64_t due = -1, due_e = -2;
        ttl_verdict want = ttl_eval(&r, it, now, &due);
        buf b;
        buf_init(&b);
        assert_int_equal(item_encode(it, &b), 0);
        ttl_verdict got = TTL_VERDICT_COUNT;
        assert_int_equal(ttl_eval_encoded(&r, b.data, b.len, now, &got, &due_e), 0);
        assert_int_equal(got, want);
        if (want == TTL_ELIGIBLE) {
            assert_int_equal(due_e, due);
        }
        /* One corrupted byte: ECORRUPT exactly when item_decode says so. */
        size_t pos = (size_t)(rnd() % b.len);
        b.data[pos] ^= (uint8_t)(1u << (rnd() % 8));
        item *back = NULL;
        int drv = item_decode(b.data, b.len, &back);
        int erv = ttl_eval_encoded(&r, b.data, b.len, now, &got, &due_e);
        assert_int_equal(erv, drv);
        if (drv == 0) {
            ttl_verdict w2 = ttl_eval(&r, back, now, &due);
            assert_int_equal(got, w2);
            if (w2 == TTL_ELIGIBLE) {
                assert_int_equal(due_e, due);
            }
            item_free(back);
        }
        buf_fini(&b);
        item_free(it);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_only_top_level_numbers_are_eligible),
        cmocka_unit_test(test_fractions_truncate_and_due_instant_is_strict),
        cmocka_unit_test(test_five_year_guard_edge),
        cmocka_unit_test(test_offset_delays_the_due_instant),
        cmocka_unit_test(test_verdict_names_are_stable),
        cmocka_unit_test(test_encoded_agrees_on_random_items),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
