/*
 * expr.h: DynamoDB's expression language (ConditionExpression,
 * FilterExpression, KeyConditionExpression, UpdateExpression,
 * ProjectionExpression) parsed into a tree and evaluated on items in
 * DynamoDB JSON (jansson objects {"name":{"S":"..."}}).
 *
 * The grammar is generated at build time: re2c makes the lexer
 * (expr_lex.re), lemon the LALR(1) parser (expr_gram.y). Placeholders are
 * resolved while parsing: #name from ExpressionAttributeNames, :value from
 * ExpressionAttributeValues; an undefined one, an unescaped reserved word, a
 * nesting deeper than EXPR_MAX_DEPTH or an expression over EXPR_MAX_LEN
 * bytes is refused with a message in DynamoDB's words naming it.
 *
 * Thread-safety: an expr_ctx and its trees belong to one thread; the
 * functions keep no global state.
 *
 * Invariants:
 *  1. Every node and path of a tree lives in its ctx's arena and dies with
 *     expr_ctx_fini; value nodes borrow from the values object given to
 *     expr_ctx_init, which must outlive the ctx.
 *  2. A path has at least one element and starts with a name.
 *  3. A parse either returns 0 with a tree or -1 with ctx->err set and no
 *     tree; it never reads past the given length.
 */
#ifndef LAPSE_EXPR_H
#define LAPSE_EXPR_H

#include <jansson.h>
#include <stddef.h>

#include "../common/arena.h"

#define EXPR_MAX_LEN 4096  /* bytes of one expression (DynamoDB: 4 KB) */
#define EXPR_MAX_DEPTH 32  /* nested parentheses, NOT and document path depth */
#define EXPR_MAX_NODES 300 /* operators and functions in one expression */

typedef enum expr_kind {
    EXPR_OR,
    EXPR_AND,
    EXPR_NOT,
    EXPR_CMP,     /* a op b */
    EXPR_BETWEEN, /* a BETWEEN b AND c */
    EXPR_IN,      /* a IN (list...) */
    EXPR_FUNC,    /* a boolean function: fn(args) */
    EXPR_PATH,    /* a document path */
    EXPR_VALUE,   /* an ExpressionAttributeValues value */
    EXPR_SIZE,    /* size(path) */
    EXPR_PLUS,    /* update: a + b */
    EXPR_MINUS,   /* update: a - b */
    EXPR_IF_NOT_EXISTS,
    EXPR_LIST_APPEND
} expr_kind;

typedef enum expr_cmp { EXPR_EQ, EXPR_NE, EXPR_LT, EXPR_LE, EXPR_GT, EXPR_GE } expr_cmp;

typedef enum expr_fn {
    EXPR_FN_ATTRIBUTE_EXISTS,
    EXPR_FN_ATTRIBUTE_NOT_EXISTS,
    EXPR_FN_ATTRIBUTE_TYPE,
    EXPR_FN_BEGINS_WITH,
    EXPR_FN_CONTAINS
} expr_fn;

/* One element of a document path: a map key or a list index. */
typedef struct expr_elem {
    const char *name; /* NULL for an index */
    long index;
    struct expr_elem *next;
} expr_elem;

typedef struct expr_node {
    expr_kind kind;
    int op;                      /* expr_cmp for EXPR_CMP, expr_fn for EXPR_FUNC */
    struct expr_node *a, *b, *c; /* operands; IN: a and the list in b */
    struct expr_node *next;      /* the next of a list (IN, function arguments, clauses) */
    expr_elem *path;             /* EXPR_PATH */
    json_t *value;               /* EXPR_VALUE: borrowed typed value {"N":"1"} */
} expr_node;

typedef enum expr_action_kind { EXPR_SET, EXPR_REMOVE, EXPR_ADD, EXPR_DELETE } expr_action_kind;

/* One action of an UpdateExpression: path = value (SET), path (REMOVE),
 * path value (ADD, DELETE). */
typedef struct expr_action {
    expr_action_kind kind;
    expr_node *path;
    expr_node *value;
    struct expr_action *next;
} expr_action;

typedef struct expr_ctx {
    arena ar;
    json_t *names;      /* borrowed: ExpressionAttributeNames or NULL */
    json_t *values;     /* borrowed: ExpressionAttributeValues or NULL */
    json_t *used_names; /* owned: the #names used so far, as keys */
    json_t *used_values;
    const char *what; /* the expression being parsed: "ConditionExpression" */
    int nodes;        /* operators and functions in the current expression */
    int failed;
    char err[512];
} expr_ctx;

/* names and values may be NULL (absent). Borrowed until expr_ctx_fini. */
void expr_ctx_init(expr_ctx *x, json_t *names, json_t *values);
void expr_ctx_fini(expr_ctx *x);

/* Parses text[0..len) as the expression named what ("ConditionExpression",
 * "FilterExpression", "KeyConditionExpression"). Returns 0 with *out the
 * condition tree, or -1 with x->err set. */
int expr_parse_condition(expr_ctx *x, const char *what, const char *text, size_t len,
                         expr_node **out);
/* An UpdateExpression: *out the actions in order. Returns 0 or -1 with
 * x->err ("Two document paths overlap ..." for overlapping paths, "The
 * "SET" section can only be used once ..." for a repeated clause). */
int expr_parse_update(expr_ctx *x, const char *text, size_t len, expr_action **out);
/* A ProjectionExpression: *out the paths as a list of EXPR_PATH nodes
 * linked by next. Returns 0 or -1 with x->err. */
int expr_parse_projection(expr_ctx *x, const char *text, size_t len, expr_node **out);
/* After every expression of a request is parsed: returns -1 with x->err
 * when a name or value was supplied and not used (DynamoDB refuses that),
 * else 0. */
int expr_check_unused(expr_ctx *x);

/* Writes a path as text (a.b[1].c, the names resolved) into out. */
void expr_path_format(const expr_elem *p, char *out, size_t outlen);

/* ---- evaluation (expr_value.c: values and paths; expr_eval.c: conditions;
 * expr_update.c: updates and projections) ---- */

/* The value at path in item (a jansson object of typed values), borrowed,
 * or NULL when absent. */
json_t *expr_get(json_t *item, const expr_elem *path);
/* Evaluates condition c on item (NULL: no item). Returns 1 true, 0 false,
 * or -1 with x->err (an operand of the wrong type for a function such as
 * attribute_type's type name). */
int expr_eval(expr_ctx *x, const expr_node *c, json_t *item);
/* Applies actions to *item (a jansson object, replaced in place; values
 * computed from the item as it was before, as DynamoDB does). Returns 0, or
 * -1 with x->err (the ValidationException's message: an operand of the wrong
 * type, an invalid document path). */
int expr_apply_update(expr_ctx *x, const expr_action *actions, json_t *item);
/* A new object with only the projected paths of item (nested paths keep
 * their enclosing maps and lists, as DynamoDB). */
json_t *expr_project(const expr_node *paths, json_t *item);
/* Checks that v is a well-formed typed value (DynamoDB JSON: S, N (a valid
 * number), B (base64), BOOL, NULL (true), SS/NS/BS (non-empty, no
 * duplicates), L, M, nested at most EXPR_MAX_DEPTH deep). Evaluation
 * assumes it of every value it is given. Returns 0, or -1 with the reason
 * in err. */
int expr_value_check(json_t *v, char *err, size_t errlen);
/* Equality of two typed values (numbers by value, sets ignoring order). */
int expr_value_equal(json_t *a, json_t *b);

#endif
