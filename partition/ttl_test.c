/*
 * ttl_test: DynamoDB's eligibility rules: every type, a missing attribute,
 * fractions, the five-year guard's edge, offsets and the boundary millisecond.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../common/ddbjson.h"
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
    assert_int_equal(eval_json(&r, "{\"ExpirationTime\":{\"N\":\"-5\"}}", now, &due),
                     TTL_TOO_OLD);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_only_top_level_numbers_are_eligible),
        cmocka_unit_test(test_fractions_truncate_and_due_instant_is_strict),
        cmocka_unit_test(test_five_year_guard_edge),
        cmocka_unit_test(test_offset_delays_the_due_instant),
        cmocka_unit_test(test_verdict_names_are_stable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
