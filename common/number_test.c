/* number_test: DynamoDB number parsing, normalization, comparison and
 * formatting edge cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lapse_err.h"
#include "number.h"

static number parse_ok(const char *s)
{
    number n;
    char err[128] = "";
    int rv = number_parse(s, strlen(s), &n, err, sizeof(err));
    if (rv != 0) {
        fail_msg("number_parse(\"%s\"): %s (%s)", s, lapse_strerror(rv), err);
    }
    return n;
}

static void expect_reject(const char *s, const char *why)
{
    number n;
    char err[128] = "";
    int rv = number_parse(s, strlen(s), &n, err, sizeof(err));
    if (rv != LAPSE_EINVAL) {
        fail_msg("number_parse(\"%s\") accepted, expected rejection", s);
    }
    if (why != NULL && strstr(err, why) == NULL) {
        fail_msg("number_parse(\"%s\") reason \"%s\" lacks \"%s\"", s, err, why);
    }
    assert_int_equal(number_validate(s, strlen(s)), LAPSE_EINVAL);
}

static void expect_format(const char *in, const char *want)
{
    number n = parse_ok(in);
    char out[64];
    number_format(&n, out, sizeof(out));
    if (strcmp(out, want) != 0) {
        fail_msg("format(\"%s\") = \"%s\", want \"%s\"", in, out, want);
    }
    /* the formatted text parses back to the same number */
    number m = parse_ok(out);
    assert_int_equal(number_cmp(&n, &m), 0);
}

static void significant_digit_limit(void **state)
{
    (void)state;
    /* 38 significant digits accepted, 39 rejected */
    parse_ok("12345678901234567890123456789012345678");
    expect_reject("123456789012345678901234567890123456789", "38 significant digits");
    parse_ok("-0.12345678901234567890123456789012345678");
    /* leading and trailing zeros are not significant */
    parse_ok("000012345678901234567890123456789012345678000000");
    parse_ok("1234567890123456789012345678901234567.8000");
    expect_reject("1.00000000000000000000000000000000000001", "38 significant digits");
    number n = parse_ok("100000000000000000000000000000000000000000000");
    assert_int_equal(n.ndigits, 1);
    assert_int_equal(n.exp, 45);
}

static void magnitude_limits(void **state)
{
    (void)state;
    parse_ok("1E-130");
    parse_ok("-1E-130");
    parse_ok("0.0001E-126");
    expect_reject("1E-131", "too small");
    expect_reject("0.9E-130", "too small");
    parse_ok("9.9999999999999999999999999999999999999E+125");
    parse_ok("-9.9999999999999999999999999999999999999E+125");
    expect_reject("1E126", "too large");
    expect_reject("10E125", "too large");
    expect_reject("1E999999999999999999999", "too large");
    expect_reject("1E-999999999999999999999", "too small");
    /* zero is fine whatever its exponent */
    number z = parse_ok("0E999999");
    assert_int_equal(z.ndigits, 0);
}

static void spellings(void **state)
{
    (void)state;
    number n = parse_ok("-0");
    assert_int_equal(n.ndigits, 0);
    assert_int_equal(n.neg, 0);
    n = parse_ok(".5");
    assert_int_equal(n.exp, 0);
    assert_int_equal(n.ndigits, 1);
    assert_int_equal(n.digits[0], '5');
    n = parse_ok("5.");
    assert_int_equal(n.exp, 1);
    n = parse_ok("1e5");
    assert_int_equal(n.exp, 6);
    n = parse_ok("1E+5");
    assert_int_equal(n.exp, 6);
    n = parse_ok("-2.50e-3");
    assert_int_equal(n.neg, 1);
    assert_int_equal(n.exp, -2);
    assert_int_equal(n.ndigits, 2);
    assert_memory_equal(n.digits, "25", 2);
    n = parse_ok("1002");
    assert_int_equal(n.ndigits, 4);
    assert_memory_equal(n.digits, "1002", 4);
}

static void garbage(void **state)
{
    (void)state;
    const char *bad[] = {"",      "-",    ".",     "abc",      "1a",  "1e",   "1e+",
                         "e5",    "1..2", "1.2.3", "+5",       " 5",  "5 ",   "--5",
                         "1e5.5", "0x10", "NaN",   "Infinity", "1,5", "1e--5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        expect_reject(bad[i], NULL);
    }
    /* an embedded NUL ends nothing: the length is authoritative */
    number n;
    assert_int_equal(number_parse("12\0003", 4, &n, NULL, 0), LAPSE_EINVAL);
}

static void compare(void **state)
{
    (void)state;
    /* strictly increasing */
    const char *order[] = {"-1E125",
                           "-100",
                           "-12.5",
                           "-12.4999",
                           "-1",
                           "-0.5",
                           "-1E-130",
                           "0",
                           "1E-130",
                           "0.001",
                           "0.5",
                           "1",
                           "1.0000000001",
                           "2",
                           "10",
                           "12.5",
                           "99",
                           "100",
                           "9.9999999999999999999999999999999999999E+125"};
    size_t n = sizeof(order) / sizeof(order[0]);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            number a = parse_ok(order[i]), b = parse_ok(order[j]);
            int c = number_cmp(&a, &b);
            int want = i < j ? -1 : (i > j ? 1 : 0);
            if ((c < 0 ? -1 : c > 0 ? 1 : 0) != want) {
                fail_msg("number_cmp(%s, %s) = %d, want %d", order[i], order[j], c, want);
            }
        }
    }
    number a = parse_ok("1.50"), b = parse_ok("15E-1");
    assert_int_equal(number_cmp(&a, &b), 0);
    a = parse_ok("-0");
    b = parse_ok("0.000");
    assert_int_equal(number_cmp(&a, &b), 0);
}

static void format(void **state)
{
    (void)state;
    expect_format("0", "0");
    expect_format("-0.0", "0");
    expect_format("12.50", "12.5");
    expect_format("-12.5", "-12.5");
    expect_format("0.001", "0.001");
    expect_format("1e3", "1000");
    expect_format("007", "7");
    expect_format(".5", "0.5");
    expect_format("1E100", "1E+100");
    expect_format("-1.5E-100", "-1.5E-100");
    expect_format("1E-130", "1E-130");
    expect_format("1E49", "10000000000000000000000000000000000000000000000000");
    expect_format("1E50", "1E+50");
    expect_format("9.9999999999999999999999999999999999999E+125",
                  "9.9999999999999999999999999999999999999E+125");
}

static void to_i64(void **state)
{
    (void)state;
    struct {
        const char *in;
        int64_t want;
    } ok[] = {{"0", 0},
              {"1461938400", 1461938400},
              {"1461938400.999", 1461938400},
              {"-1.9", -1},
              {"0.9", 0},
              {"-0.9", 0},
              {"1E3", 1000},
              {"9223372036854775807", INT64_MAX},
              {"-9223372036854775808", INT64_MIN},
              {"1E-130", 0}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        number n = parse_ok(ok[i].in);
        int64_t v = 12345;
        assert_int_equal(number_to_i64(&n, &v), 0);
        if (v != ok[i].want) {
            fail_msg("number_to_i64(%s) = %lld", ok[i].in, (long long)v);
        }
    }
    const char *bad[] = {"9223372036854775808", "-9223372036854775809", "1E19", "1E100"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        number n = parse_ok(bad[i]);
        int64_t v;
        if (number_to_i64(&n, &v) != LAPSE_EINVAL) {
            fail_msg("number_to_i64(%s) should not fit", bad[i]);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(significant_digit_limit),
        cmocka_unit_test(magnitude_limits),
        cmocka_unit_test(spellings),
        cmocka_unit_test(garbage),
        cmocka_unit_test(compare),
        cmocka_unit_test(format),
        cmocka_unit_test(to_i64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
