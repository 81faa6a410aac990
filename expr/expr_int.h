/*
 * expr_int.h: what the generated lexer (expr_lex.re) and parser
 * (expr_gram.y) share with expr_parse.c. Private to expr/.
 */
#ifndef LAPSE_EXPR_INT_H
#define LAPSE_EXPR_INT_H

#include <stddef.h>

#include "../common/number.h"
#include "expr.h"

/* A token: its text in the (NUL-terminated) input copy. */
typedef struct expr_tok {
    const char *s;
    size_t len;
} expr_tok;

/* The lexer over a NUL-terminated copy of the input of length lim - start. */
typedef struct expr_lex {
    const char *cur, *lim, *start;
    int depth; /* open parentheses */
} expr_lex;

/* The parser's state, passed to every grammar action. */
typedef struct expr_pstate {
    expr_ctx *x;
    expr_lex *lex;
    expr_node *cond;         /* condition result */
    expr_node *proj;         /* projection result */
    expr_action *actions;    /* update result, in order */
    unsigned clauses_seen;   /* bit per expr_action_kind */
    expr_action_kind clause; /* the clause being read */
} expr_pstate;

/* Returns the next token's type (a TK_ code of expr_gram.h, 0 at the end,
 * -1 on a lexical error with x->err set) and its text in *t. */
int expr_lex_next(expr_lex *l, expr_ctx *x, expr_tok *t);

/* Returns 1 when s[0..len) is one of DynamoDB's reserved words (any case). */
int expr_reserved(const char *s, size_t len);

/* Sets x->err to "Invalid <what>: <message>" unless already failed. */
void expr_fail(expr_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Grammar actions (expr_parse.c). Each returns NULL after a failure. */
expr_node *expr_mk(expr_pstate *ps, expr_kind kind, int op, expr_node *a, expr_node *b,
                   expr_node *c);
expr_node *expr_mk_value(expr_pstate *ps, expr_tok t);
expr_node *expr_mk_path(expr_pstate *ps, expr_node *path, expr_tok name, int hash);
expr_node *expr_mk_index(expr_pstate *ps, expr_node *path, expr_tok digits);
expr_node *expr_mk_func(expr_pstate *ps, expr_tok name, expr_node *args, int update);
expr_node *expr_append(expr_node *list, expr_node *n);
void expr_begin_clause(expr_pstate *ps, expr_action_kind kind);
void expr_add_action(expr_pstate *ps, expr_node *path, expr_node *value);
void expr_syntax_error(expr_pstate *ps, int major, expr_tok t);

/* Values (expr_value.c), shared by the evaluation files. */
/* The type name of a typed value ({"S":"x"} -> "S"), or "" when malformed. */
const char *expr_vtype(json_t *v);
/* The body of a typed value (borrowed), or NULL. */
json_t *expr_vbody(json_t *v);
/* An N value as a number: 0, or -1 when it is not one. */
int expr_num_of(json_t *v, number *n);
/* a + b (a - b with neg_b) exactly, as a new {"N":...}; NULL with x->err. */
json_t *expr_num_add(expr_ctx *x, json_t *va, json_t *vb, int neg_b);
/* 1 for the set types SS, NS, BS. */
int expr_is_set(const char *t);
/* Equality of two scalar bodies of type t. */
int expr_scalar_equal(const char *t, json_t *a, json_t *b);
/* A B body decoded (caller frees) with its length, or NULL. */
uint8_t *expr_bytes_of(json_t *body, size_t *n);
/* Order of two N, S or B values: 0 with *cmp, or -1 when not comparable. */
int expr_order(json_t *a, json_t *b, int *cmp);
/* An operand's value (expr_eval.c): a new reference, or NULL when absent
 * (or on error, with x->failed). */
json_t *expr_operand(expr_ctx *x, const expr_node *n, json_t *item);

/* The generated parser (lemon). */
void *exprParseAlloc(void *(*malloc_fn)(size_t));
void exprParse(void *p, int major, expr_tok minor, expr_pstate *ps);
void exprParseFree(void *p, void (*free_fn)(void *));

#endif
