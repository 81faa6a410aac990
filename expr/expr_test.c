/*
 * expr_test.c: the expression grammar and its evaluation without a cluster:
 * precedence, placeholders, reserved words, limits, DynamoDB's comparison
 * rules, updates (arithmetic, if_not_exists, list_append, nested paths, ADD,
 * DELETE, REMOVE) and projections.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "expr.h"

static json_t *J(const char *s)
{
    json_error_t e;
    json_t *v = json_loads(s, 0, &e);
    if (v == NULL) {
        fail_msg("bad fixture %s: %s", s, e.text);
    }
    return v;
}

static const char *VALUES =
    "{\":one\":{\"N\":\"1\"},\":five\":{\"N\":\"5\"},\":ten\":{\"N\":\"10\"},"
    "\":x\":{\"S\":\"x\"},\":ab\":{\"S\":\"ab\"},\":l\":{\"L\":[{\"N\":\"9\"}]},"
    "\":t\":{\"S\":\"N\"},\":big\":{\"N\":\"99999999999999999999999999999999999999\"},"
    "\":frac\":{\"N\":\"0.25\"},\":ss\":{\"SS\":[\"a\",\"b\"]}}";
static const char *ITEM =
    "{\"pk\":{\"S\":\"k\"},\"n\":{\"N\":\"5\"},\"s\":{\"S\":\"abc\"},"
    "\"status\":{\"S\":\"on\"},"
    "\"m\":{\"M\":{\"a\":{\"L\":[{\"N\":\"1\"},{\"M\":{\"c\":{\"S\":\"deep\"}}}]}}},"
    "\"tags\":{\"SS\":[\"a\",\"c\"]}}";

/* Evaluates condition text on ITEM with VALUES and #st -> status: 1, 0, or
 * -1 (parse or evaluation error, message into err). */
static int cond(const char *text, char *err)
{
    json_t *names = J("{\"#st\":\"status\",\"#m\":\"m\"}"), *values = J(VALUES), *item = J(ITEM);
    expr_ctx x;
    expr_ctx_init(&x, names, values);
    expr_node *c;
    int rv = expr_parse_condition(&x, "ConditionExpression", text, strlen(text), &c);
    if (rv == 0) {
        rv = expr_eval(&x, c, item);
    }
    if (err != NULL) {
        snprintf(err, 512, "%s", x.err);
    }
    expr_ctx_fini(&x);
    json_decref(names);
    json_decref(values);
    json_decref(item);
    return rv;
}

static void assert_err(const char *text, const char *want)
{
    char err[512];
    int rv = cond(text, err);
    if (rv != -1 || strstr(err, want) == NULL) {
        fail_msg("%s: got %d \"%s\", want an error with \"%s\"", text, rv, err, want);
    }
}

static void test_conditions(void **state)
{
    (void)state;
    assert_int_equal(cond("n = :five", NULL), 1);
    assert_int_equal(cond("n = :one", NULL), 0);
    assert_int_equal(cond("n <> :one", NULL), 1);
    assert_int_equal(cond("n < :ten AND n > :one", NULL), 1);
    assert_int_equal(cond("n BETWEEN :one AND :five", NULL), 1);
    assert_int_equal(cond("n BETWEEN :ten AND :ten", NULL), 0);
    assert_int_equal(cond("n IN (:one, :ten, :five)", NULL), 1);
    assert_int_equal(cond("n IN (:one)", NULL), 0);
    /* Different types are neither equal nor ordered. */
    assert_int_equal(cond("s < :five", NULL), 0);
    assert_int_equal(cond("s >= :five", NULL), 0);
    assert_int_equal(cond("nothing = :five", NULL), 0);
    assert_int_equal(cond("nothing <> :five", NULL), 1);
    /* Precedence: NOT over AND over OR; parentheses override. */
    assert_int_equal(cond("n = :one OR n = :five AND s = :x", NULL), 0);
    assert_int_equal(cond("(n = :one OR n = :five) AND NOT s = :x", NULL), 1);
    assert_int_equal(cond("NOT n = :one AND n = :five", NULL), 1);
    /* Keywords in any case. */
    assert_int_equal(cond("n = :five and not (s = :x or s = :ab)", NULL), 1);
    /* Functions. */
    assert_int_equal(cond("attribute_exists(m.a[1].c)", NULL), 1);
    assert_int_equal(cond("attribute_exists(m.a[2])", NULL), 0);
    assert_int_equal(cond("attribute_not_exists(zz)", NULL), 1);
    assert_int_equal(cond("attribute_type(n, :t)", NULL), 1);
    assert_int_equal(cond("begins_with(s, :ab)", NULL), 1);
    assert_int_equal(cond("begins_with(s, :x)", NULL), 0);
    assert_int_equal(cond("contains(s, :x)", NULL), 0);
    assert_int_equal(cond("contains(tags, :x)", NULL), 0);
    assert_int_equal(cond("size(s) = :five", NULL), 0);
    assert_int_equal(cond("size(m.a) < :five", NULL), 1);
    /* Placeholders and nested paths. */
    assert_int_equal(cond("#st = :x", NULL), 0);
    assert_int_equal(cond("#m.a[0] = :one", NULL), 1);
}

static void test_refusals(void **state)
{
    (void)state;
    assert_err("status = :x", "reserved keyword: status");
    assert_err("a.Size = :x", "reserved keyword: Size");
    assert_err("n = :nope", "attribute value: :nope");
    assert_err("#nope = :x", "attribute name: #nope");
    assert_err("n = ", "Syntax error");
    assert_err("n == :one", "Syntax error");
    assert_err("n = :one AND", "<EOF>");
    assert_err("frobnicate(n)", "Invalid function name; function: frobnicate");
    assert_err("begins_with(n)", "number of operands");
    assert_err("if_not_exists(n, :one)", "not allowed");
    assert_err("attribute_type(n, :x)", "Invalid attribute type name");
    assert_err("", "can not be empty");
    assert_err("n = :one \x01", "Syntax error");
    char deep[256] = "";
    for (int i = 0; i < 40; i++) {
        strcat(deep, "(");
    }
    strcat(deep, "n = :one");
    for (int i = 0; i < 40; i++) {
        strcat(deep, ")");
    }
    assert_err(deep, "nested too deeply");
    char nots[2048] = "";
    for (int i = 0; i < 200; i++) {
        strcat(nots, "NOT ");
    }
    strcat(nots, "n = :one");
    assert_err(nots, "nested too deeply");
    char many[4000] = "n = :one";
    for (int i = 0; i < 320; i++) {
        strcat(many, " OR n=:one");
    }
    assert_err(many, "too many operators");
    char *huge = malloc(5000);
    memset(huge, 'a', 4999);
    huge[4999] = '\0';
    assert_err(huge, "maximum allowed size");
    free(huge);
    char path[400] = "m";
    for (int i = 0; i < 40; i++) {
        strcat(path, ".m");
    }
    strcat(path, " = :one");
    assert_err(path, "nested too deeply");
}

/* Applies update text to ITEM; returns the new item (caller decrefs) or
 * NULL with the message in err. */
static json_t *update(const char *text, char *err)
{
    json_t *values = J(VALUES), *item = J(ITEM);
    expr_ctx x;
    expr_ctx_init(&x, NULL, values);
    expr_action *a;
    int rv = expr_parse_update(&x, text, strlen(text), &a);
    if (rv == 0) {
        rv = expr_apply_update(&x, a, item);
    }
    snprintf(err, 512, "%s", x.err);
    expr_ctx_fini(&x);
    json_decref(values);
    if (rv != 0) {
        json_decref(item);
        return NULL;
    }
    return item;
}

static void assert_attr(json_t *item, const char *name, const char *want)
{
    char *got = json_dumps(json_object_get(item, name), JSON_COMPACT | JSON_SORT_KEYS);
    if (got == NULL || strcmp(got, want) != 0) {
        fail_msg("%s: got %s, want %s", name, got ? got : "(absent)", want);
    }
    free(got);
}

static void test_updates(void **state)
{
    (void)state;
    char err[512];
    json_t *it =
        update("SET n = n + :one, s = :x, z = if_not_exists(z, :ten), q = :frac - :one", err);
    assert_non_null(it);
    assert_attr(it, "n", "{\"N\":\"6\"}");
    assert_attr(it, "s", "{\"S\":\"x\"}");
    assert_attr(it, "z", "{\"N\":\"10\"}");
    assert_attr(it, "q", "{\"N\":\"-0.75\"}");
    json_decref(it);
    it = update("SET m.a[1].c = :x, m.a[5] = :one, m.b = list_append(:l, :l) REMOVE s", err);
    assert_non_null(it);
    assert_attr(it, "m",
                "{\"M\":{\"a\":{\"L\":[{\"N\":\"1\"},{\"M\":{\"c\":{\"S\":\"x\"}}},{\"N\":\"1\"}]},"
                "\"b\":{\"L\":[{\"N\":\"9\"},{\"N\":\"9\"}]}}}");
    assert_null(json_object_get(it, "s"));
    json_decref(it);
    it = update("ADD n :five, fresh :one, tags :ss", err);
    assert_non_null(it);
    assert_attr(it, "n", "{\"N\":\"10\"}");
    assert_attr(it, "fresh", "{\"N\":\"1\"}");
    assert_attr(it, "tags", "{\"SS\":[\"a\",\"c\",\"b\"]}");
    json_decref(it);
    it = update("DELETE tags :ss", err);
    assert_non_null(it);
    assert_attr(it, "tags", "{\"SS\":[\"c\"]}");
    json_decref(it);
    it = update("REMOVE m.a[0]", err);
    assert_non_null(it);
    assert_attr(it, "m", "{\"M\":{\"a\":{\"L\":[{\"M\":{\"c\":{\"S\":\"deep\"}}}]}}}");
    json_decref(it);

    assert_null(update("SET n = n + :big", err));
    assert_non_null(strstr(err, "38"));
    assert_null(update("SET s = s + :one", err));
    assert_non_null(strstr(err, "operand type: S"));
    assert_null(update("SET n = nothing", err));
    assert_non_null(strstr(err, "does not exist"));
    assert_null(update("SET nothing.a = :one", err));
    assert_non_null(strstr(err, "invalid for update"));
    assert_null(update("SET n = :one REMOVE n", err));
    assert_non_null(strstr(err, "overlap"));
    assert_null(update("SET m.a = :one, m.a[0] = :one", err));
    assert_non_null(strstr(err, "overlap"));
    assert_null(update("SET n = :one SET s = :x", err));
    assert_non_null(strstr(err, "only be used once"));
    assert_null(update("ADD s :x", err));
    assert_non_null(strstr(err, "operator: ADD"));
    assert_null(update("SET n = :one,", err));
    assert_non_null(strstr(err, "Syntax error"));
}

static void test_projection_and_unused(void **state)
{
    (void)state;
    json_t *names = J("{\"#a\":\"a\",\"#unused\":\"u\"}"), *item = J(ITEM);
    expr_ctx x;
    expr_ctx_init(&x, names, NULL);
    expr_node *p;
    const char *text = "n, m.#a[1].c, nothing";
    assert_int_equal(expr_parse_projection(&x, text, strlen(text), &p), 0);
    json_t *out = expr_project(p, item);
    char *got = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(got, "{\"m\":{\"M\":{\"a\":{\"L\":[{\"M\":{\"c\":{\"S\":\"deep\"}}}]}}},"
                             "\"n\":{\"N\":\"5\"}}");
    free(got);
    json_decref(out);
    assert_int_equal(expr_check_unused(&x), -1);
    assert_non_null(strstr(x.err, "#unused"));
    expr_ctx_fini(&x);
    json_decref(names);
    json_decref(item);
}

static void test_value_checks(void **state)
{
    (void)state;
    static const char *const bad[] = {"{\"S\":5}",
                                      "{\"N\":\"1x\"}",
                                      "{\"B\":\"!!\"}",
                                      "{\"BOOL\":1}",
                                      "{\"NULL\":false}",
                                      "{\"SS\":[]}",
                                      "{\"SS\":[\"a\",\"a\"]}",
                                      "{\"NS\":[\"1\",\"1.0\"]}",
                                      "{\"L\":[{\"S\":1}]}",
                                      "{\"M\":{\"a\":{}}}",
                                      "{\"X\":\"a\"}",
                                      "{\"S\":\"a\",\"N\":\"1\"}",
                                      "[]"};
    char err[200];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *v = J(bad[i]);
        if (expr_value_check(v, err, sizeof err) != -1 || err[0] == '\0') {
            fail_msg("%s was accepted", bad[i]);
        }
        json_decref(v);
    }
    json_t *good =
        J("{\"M\":{\"a\":{\"L\":[{\"NS\":[\"1\",\"2\"]},{\"B\":\"AAE=\"},{\"NULL\":true}]}}}");
    assert_int_equal(expr_value_check(good, err, sizeof err), 0);
    json_decref(good);
    /* Too deep. */
    char deep[2000] = "";
    for (int i = 0; i < 40; i++) {
        strcat(deep, "{\"L\":[");
    }
    strcat(deep, "{\"N\":\"1\"}");
    for (int i = 0; i < 40; i++) {
        strcat(deep, "]}");
    }
    json_t *d = J(deep);
    assert_int_equal(expr_value_check(d, err, sizeof err), -1);
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conditions),   cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_updates),      cmocka_unit_test(test_projection_and_unused),
        cmocka_unit_test(test_value_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
