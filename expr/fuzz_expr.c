/*
 * fuzz_expr.c: libFuzzer target for the expression parser (expr.h), which
 * reads every ConditionExpression, UpdateExpression, ProjectionExpression,
 * FilterExpression and KeyConditionExpression a client sends. Each input is
 * parsed as all three kinds with fixed names (#a, #b) and values (:n, :s,
 * :l, :m): a parse either fails with a message or yields a tree that
 * evaluates and applies without crashing on a small item.
 *
 * Built and run by cmake/fuzz-run.sh (ctest fuzz_expr_test, make fuzz) with
 * clang -fsanitize=fuzzer,address; its corpus is expr/fuzz/corpus/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_expr: invariant failed: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)
{
    json_t *names = json_pack("{s:s,s:s}", "#a", "a", "#b", "b");
    json_t *values = json_loads("{\":n\":{\"N\":\"1\"},\":s\":{\"S\":\"x\"},"
                                "\":l\":{\"L\":[{\"N\":\"2\"}]},\":m\":{\"M\":{}}}",
                                0, NULL);
    json_t *item = json_loads("{\"a\":{\"N\":\"5\"},\"b\":{\"M\":{\"c\":{\"L\":[{\"S\":\"y\"}]}}},"
                              "\"s\":{\"S\":\"xyz\"},\"l\":{\"L\":[]}}",
                              0, NULL);
    must(names && values && item, "fixtures");
    expr_ctx x;
    expr_ctx_init(&x, names, values);
    expr_node *c = NULL, *p = NULL;
    expr_action *u = NULL;
    if (expr_parse_condition(&x, "ConditionExpression", (const char *)d, n, &c) == 0) {
        must(c != NULL, "a parsed condition has a tree");
        int r = expr_eval(&x, c, item);
        must(r == 0 || r == 1 || (r == -1 && x.err[0] != '\0'), "evaluation result");
    } else {
        must(x.err[0] != '\0', "a failed parse says why");
    }
    if (expr_parse_update(&x, (const char *)d, n, &u) == 0) {
        json_t *copy = json_deep_copy(item);
        int r = expr_apply_update(&x, u, copy);
        must(r == 0 || x.err[0] != '\0', "a failed update says why");
        json_decref(copy);
    } else {
        must(x.err[0] != '\0', "a failed parse says why");
    }
    if (expr_parse_projection(&x, (const char *)d, n, &p) == 0) {
        json_t *out = expr_project(p, item);
        must(out != NULL, "projection");
        json_decref(out);
    }
    expr_ctx_fini(&x);
    /* The input as a value: a well-formed one must evaluate and apply
     * under every function and operator without crashing. */
    json_t *v = json_loadb((const char *)d, n, 0, NULL);
    char err[200];
    if (v != NULL && expr_value_check(v, err, sizeof err) == 0) {
        json_t *vals = json_pack("{s:O}", ":v", v);
        static const char *const conds[] = {
            "a = :v OR a < :v OR :v BETWEEN a AND s OR a IN (:v, :v) OR contains(:v, :v)",
            "begins_with(s, :v) OR contains(b.c, :v) OR size(l) > :v OR attribute_type(a, :v)",
            "contains(l, :v) OR begins_with(:v, :v) OR b.c[0] >= :v"};
        static const char *const ups[] = {"SET a = a + :v",  "SET l = list_append(l, :v)",
                                          "ADD a :v",        "DELETE q :v",
                                          "SET b.c[3] = :v", "SET z = if_not_exists(z, :v) - :v"};
        for (size_t i = 0; i < sizeof conds / sizeof conds[0]; i++) {
            expr_ctx_init(&x, NULL, vals);
            if (expr_parse_condition(&x, "ConditionExpression", conds[i], strlen(conds[i]), &c) ==
                0) {
                int r = expr_eval(&x, c, item);
                must(r >= -1 && r <= 1, "evaluation of a value");
            }
            expr_ctx_fini(&x);
        }
        for (size_t i = 0; i < sizeof ups / sizeof ups[0]; i++) {
            expr_ctx_init(&x, NULL, vals);
            if (expr_parse_update(&x, ups[i], strlen(ups[i]), &u) == 0) {
                json_t *copy = json_deep_copy(item);
                int r = expr_apply_update(&x, u, copy);
                must(r == 0 || x.err[0] != '\0', "a failed update with a value says why");
                json_decref(copy);
            }
            expr_ctx_fini(&x);
        }
        json_decref(vals);
    }
    json_decref(v);
    json_decref(names);
    json_decref(values);
    json_decref(item);
    return 0;
}
