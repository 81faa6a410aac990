/*
 * expr_int.h: what the generated lexer (expr_lex.re) and parser
 * (expr_gram.y) share with expr_parse.c. Private to expr/.
 */
#ifndef LAPSE_EXPR_INT_H
#define LAPSE_EXPR_INT_H

#include <stddef.h>

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

/* The generated parser (lemon). */
void *exprParseAlloc(void *(*malloc_fn)(size_t));
void exprParse(void *p, int major, expr_tok minor, expr_pstate *ps);
void exprParseFree(void *p, void (*free_fn)(void *));

#endif
