/*
 * expr_parse.c: the parse driver (lexer tokens into the lemon parser) and
 * the grammar's actions: placeholders resolved, reserved words, limits and
 * DynamoDB's static checks (function arity, overlapping update paths).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr_gram.h"
#include "expr_int.h"

void expr_ctx_init(expr_ctx *x, json_t *names, json_t *values)
{
    memset(x, 0, sizeof *x);
    arena_init(&x->ar);
    x->names = names;
    x->values = values;
    x->used_names = json_object();
    x->used_values = json_object();
}

void expr_ctx_fini(expr_ctx *x)
{
    arena_fini(&x->ar);
    json_decref(x->used_names);
    json_decref(x->used_values);
    x->used_names = x->used_values = NULL;
}

void expr_fail(expr_ctx *x, const char *fmt, ...)
{
    if (x->failed) {
        return;
    }
    x->failed = 1;
    int n = snprintf(x->err, sizeof x->err, "Invalid %s: ", x->what ? x->what : "expression");
    if (n < 0 || (size_t)n >= sizeof x->err) {
        n = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err + n, sizeof x->err - (size_t)n, fmt, ap);
    va_end(ap);
    /* Messages quote the input: keep them ASCII so they are valid JSON text
     * whatever byte was quoted or cut. */
    for (char *p = x->err; *p; p++) {
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) {
            *p = '?';
        }
    }
}

static expr_node *node(expr_pstate *ps, expr_kind kind)
{
    if (ps->x->failed) {
        return NULL;
    }
    expr_node *n = arena_alloc(&ps->x->ar, sizeof *n);
    if (n == NULL) {
        expr_fail(ps->x, "out of memory");
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->kind = kind;
    return n;
}

expr_node *expr_mk(expr_pstate *ps, expr_kind kind, int op, expr_node *a, expr_node *b,
                   expr_node *c)
{
    if (a == NULL || (kind != EXPR_NOT && kind != EXPR_SIZE && b == NULL) ||
        (kind == EXPR_BETWEEN && c == NULL)) {
        return NULL; /* an operand failed */
    }
    if (++ps->x->nodes > EXPR_MAX_NODES) {
        expr_fail(ps->x, "The expression contains too many operators; the limit is %d",
                  EXPR_MAX_NODES);
        return NULL;
    }
    if (kind == EXPR_SIZE && a->kind != EXPR_PATH) {
        expr_fail(ps->x, "size() takes a document path");
        return NULL;
    }
    expr_node *n = node(ps, kind);
    if (n != NULL) {
        n->op = op;
        n->a = a;
        n->b = b;
        n->c = c;
    }
    return n;
}

expr_node *expr_mk_value(expr_pstate *ps, expr_tok t)
{
    expr_ctx *x = ps->x;
    if (x->failed) {
        return NULL;
    }
    char key[256];
    snprintf(key, sizeof key, "%.*s", (int)(t.len < 255 ? t.len : 255), t.s);
    json_t *v = x->values ? json_object_get(x->values, key) : NULL;
    if (v == NULL) {
        expr_fail(x,
                  "An expression attribute value used in expression is not defined; "
                  "attribute value: %s",
                  key);
        return NULL;
    }
    json_object_set_new(x->used_values, key, json_true());
    expr_node *n = node(ps, EXPR_VALUE);
    if (n != NULL) {
        n->value = v;
    }
    return n;
}

static expr_elem **path_tail(expr_node *path, int *depth)
{
    expr_elem **e = &path->path;
    *depth = 0;
    while (*e != NULL) {
        e = &(*e)->next;
        (*depth)++;
    }
    return e;
}

static expr_elem *elem(expr_pstate *ps, expr_node **path)
{
    if (ps->x->failed) {
        return NULL;
    }
    if (*path == NULL && (*path = node(ps, EXPR_PATH)) == NULL) {
        return NULL;
    }
    int depth;
    expr_elem **tail = path_tail(*path, &depth);
    if (depth >= EXPR_MAX_DEPTH) {
        expr_fail(ps->x, "The document path is nested too deeply; the limit is %d levels",
                  EXPR_MAX_DEPTH);
        return NULL;
    }
    expr_elem *e = arena_alloc(&ps->x->ar, sizeof *e);
    if (e == NULL) {
        expr_fail(ps->x, "out of memory");
        return NULL;
    }
    memset(e, 0, sizeof *e);
    *tail = e;
    return e;
}

expr_node *expr_mk_path(expr_pstate *ps, expr_node *path, expr_tok t, int hash)
{
    expr_ctx *x = ps->x;
    if (x->failed) {
        return NULL;
    }
    const char *name;
    if (hash) {
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(t.len < 255 ? t.len : 255), t.s);
        json_t *v = x->names ? json_object_get(x->names, key) : NULL;
        if (v == NULL || !json_is_string(v)) {
            expr_fail(x,
                      "An expression attribute name used in the document path is not defined; "
                      "attribute name: %s",
                      key);
            return NULL;
        }
        json_object_set_new(x->used_names, key, json_true());
        name = json_string_value(v);
    } else {
        if (expr_reserved(t.s, t.len)) {
            expr_fail(x, "Attribute name is a reserved keyword; reserved keyword: %.*s", (int)t.len,
                      t.s);
            return NULL;
        }
        if ((name = arena_strndup(&x->ar, t.s, t.len)) == NULL) {
            expr_fail(x, "out of memory");
            return NULL;
        }
    }
    expr_elem *e = elem(ps, &path);
    if (e == NULL) {
        return NULL;
    }
    e->name = name;
    return path;
}

expr_node *expr_mk_index(expr_pstate *ps, expr_node *path, expr_tok digits)
{
    if (path == NULL || ps->x->failed) {
        return NULL;
    }
    if (digits.len > 9) {
        expr_fail(ps->x, "List index is too large: %.*s", (int)(digits.len < 40 ? digits.len : 40),
                  digits.s);
        return NULL;
    }
    expr_elem *e = elem(ps, &path);
    if (e == NULL) {
        return NULL;
    }
    e->index = strtol(digits.s, NULL, 10);
    return path;
}

expr_node *expr_append(expr_node *list, expr_node *n)
{
    if (list == NULL || n == NULL) {
        return NULL;
    }
    expr_node *p = list;
    while (p->next != NULL) {
        p = p->next;
    }
    p->next = n;
    return list;
}

static int count(const expr_node *l)
{
    int n = 0;
    for (; l != NULL; l = l->next) {
        n++;
    }
    return n;
}

expr_node *expr_mk_func(expr_pstate *ps, expr_tok name, expr_node *args, int update)
{
    static const struct {
        const char *name;
        int kind; /* EXPR_FUNC (with op) or an update kind */
        int op, nargs, update;
    } fns[] = {
        {"attribute_exists", EXPR_FUNC, EXPR_FN_ATTRIBUTE_EXISTS, 1, 0},
        {"attribute_not_exists", EXPR_FUNC, EXPR_FN_ATTRIBUTE_NOT_EXISTS, 1, 0},
        {"attribute_type", EXPR_FUNC, EXPR_FN_ATTRIBUTE_TYPE, 2, 0},
        {"begins_with", EXPR_FUNC, EXPR_FN_BEGINS_WITH, 2, 0},
        {"contains", EXPR_FUNC, EXPR_FN_CONTAINS, 2, 0},
        {"if_not_exists", EXPR_IF_NOT_EXISTS, 0, 2, 1},
        {"list_append", EXPR_LIST_APPEND, 0, 2, 1},
    };
    expr_ctx *x = ps->x;
    if (args == NULL || x->failed) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        if (strlen(fns[i].name) != name.len || memcmp(fns[i].name, name.s, name.len) != 0) {
            continue;
        }
        if (fns[i].update != update) {
            expr_fail(x, "The function is not allowed in %s; function: %s",
                      update ? "an update expression" : "a condition", fns[i].name);
            return NULL;
        }
        if (count(args) != fns[i].nargs) {
            expr_fail(x,
                      "Incorrect number of operands for operator or function; operator or "
                      "function: %s, number of operands: %d",
                      fns[i].name, count(args));
            return NULL;
        }
        if ((fns[i].kind == EXPR_FUNC || fns[i].kind == EXPR_IF_NOT_EXISTS) &&
            args->kind != EXPR_PATH) {
            expr_fail(x, "Operator or function requires a document path; operator or function: %s",
                      fns[i].name);
            return NULL;
        }
        if (++x->nodes > EXPR_MAX_NODES) {
            expr_fail(x, "The expression contains too many operators; the limit is %d",
                      EXPR_MAX_NODES);
            return NULL;
        }
        expr_node *n = node(ps, fns[i].kind);
        if (n != NULL) {
            n->op = fns[i].op;
            n->a = args;
            n->b = args->next;
        }
        return n;
    }
    expr_fail(x, "Invalid function name; function: %.*s", (int)(name.len < 64 ? name.len : 64),
              name.s);
    return NULL;
}

void expr_begin_clause(expr_pstate *ps, expr_action_kind kind)
{
    static const char *const names[] = {"SET", "REMOVE", "ADD", "DELETE"};
    if (ps->clauses_seen & (1u << kind)) {
        expr_fail(ps->x, "The \"%s\" section can only be used once in an update expression;",
                  names[kind]);
    }
    ps->clauses_seen |= 1u << kind;
    ps->clause = kind;
}

void expr_add_action(expr_pstate *ps, expr_node *path, expr_node *value)
{
    expr_ctx *x = ps->x;
    if (path == NULL || x->failed || (ps->clause != EXPR_REMOVE && value == NULL)) {
        return;
    }
    expr_action *a = arena_alloc(&x->ar, sizeof *a);
    if (a == NULL) {
        expr_fail(x, "out of memory");
        return;
    }
    memset(a, 0, sizeof *a);
    a->kind = ps->clause;
    a->path = path;
    a->value = value;
    expr_action **tail = &ps->actions;
    while (*tail != NULL) {
        tail = &(*tail)->next;
    }
    *tail = a;
}

void expr_syntax_error(expr_pstate *ps, int major, expr_tok t)
{
    expr_ctx *x = ps->x;
    if (x->failed) {
        return;
    }
    if (major == 0) {
        expr_fail(x, "Syntax error; token: \"<EOF>\", near the end");
        return;
    }
    if (major != TK_NAME && major != TK_VALUE && major != TK_HASHNAME && major != TK_INT &&
        expr_reserved(t.s, t.len)) {
        /* A keyword of the grammar where a name belongs: a = SET. */
        expr_fail(x, "Attribute name is a reserved keyword; reserved keyword: %.*s", (int)t.len,
                  t.s);
        return;
    }
    int len = t.len > 40 ? 40 : (int)t.len;
    const char *near = t.s - ps->lex->start > 20 ? t.s - 20 : ps->lex->start;
    expr_fail(x, "Syntax error; token: \"%.*s\", near: \"%.*s\"", len, t.s, (int)(t.s - near) + len,
              near);
}

/* ---- the driver ---- */

static int parse(expr_ctx *x, const char *what, int start, const char *text, size_t len,
                 expr_pstate *ps)
{
    x->what = what;
    x->failed = 0;
    x->err[0] = '\0';
    x->nodes = 0;
    if (len == 0) {
        expr_fail(x, "The expression can not be empty;");
        return -1;
    }
    if (len > EXPR_MAX_LEN) {
        expr_fail(x,
                  "Expression size has exceeded the maximum allowed size; expression size: %zu, "
                  "limit: %d",
                  len, EXPR_MAX_LEN);
        return -1;
    }
    char *copy = arena_strndup(&x->ar, text, len); /* re2c reads up to the NUL */
    void *p = exprParseAlloc(malloc);
    if (copy == NULL || p == NULL) {
        exprParseFree(p, free);
        expr_fail(x, "out of memory");
        return -1;
    }
    expr_lex lex = {.cur = copy, .lim = copy + len, .start = copy};
    memset(ps, 0, sizeof *ps);
    ps->x = x;
    ps->lex = &lex;
    expr_tok t = {copy, 0};
    exprParse(p, start, t, ps);
    for (;;) {
        int major = expr_lex_next(&lex, x, &t);
        if (major < 0 || x->failed) {
            break;
        }
        exprParse(p, major, t, ps);
        if (major == 0 || x->failed) {
            break;
        }
    }
    exprParseFree(p, free);
    if (!x->failed && ps->cond == NULL && ps->proj == NULL && ps->actions == NULL) {
        expr_fail(x, "Syntax error; the expression is incomplete");
    }
    return x->failed ? -1 : 0;
}

int expr_parse_condition(expr_ctx *x, const char *what, const char *text, size_t len,
                         expr_node **out)
{
    expr_pstate ps;
    *out = NULL;
    if (parse(x, what, TK_START_COND, text, len, &ps) != 0) {
        return -1;
    }
    *out = ps.cond;
    return 0;
}

int expr_parse_projection(expr_ctx *x, const char *text, size_t len, expr_node **out)
{
    expr_pstate ps;
    *out = NULL;
    if (parse(x, "ProjectionExpression", TK_START_PROJ, text, len, &ps) != 0) {
        return -1;
    }
    *out = ps.proj;
    return 0;
}

/* Returns 1 when one path is a prefix of the other (or equal). */
static int overlap(const expr_elem *a, const expr_elem *b)
{
    for (; a != NULL && b != NULL; a = a->next, b = b->next) {
        if ((a->name == NULL) != (b->name == NULL)) {
            return 0;
        }
        if (a->name != NULL ? strcmp(a->name, b->name) != 0 : a->index != b->index) {
            return 0;
        }
    }
    return 1;
}

int expr_parse_update(expr_ctx *x, const char *text, size_t len, expr_action **out)
{
    expr_pstate ps;
    *out = NULL;
    if (parse(x, "UpdateExpression", TK_START_UPDATE, text, len, &ps) != 0) {
        return -1;
    }
    for (const expr_action *a = ps.actions; a != NULL; a = a->next) {
        for (const expr_action *b = a->next; b != NULL; b = b->next) {
            if (overlap(a->path->path, b->path->path)) {
                char pa[256], pb[256];
                expr_path_format(a->path->path, pa, sizeof pa);
                expr_path_format(b->path->path, pb, sizeof pb);
                expr_fail(x,
                          "Two document paths overlap with each other; must remove or rewrite "
                          "one of these paths; path one: [%s], path two: [%s]",
                          pa, pb);
                return -1;
            }
        }
    }
    *out = ps.actions;
    return 0;
}

int expr_check_unused(expr_ctx *x)
{
    json_t *sets[2] = {x->names, x->values}, *used[2] = {x->used_names, x->used_values};
    static const char *const what[] = {"ExpressionAttributeNames", "ExpressionAttributeValues"};
    for (int i = 0; i < 2; i++) {
        const char *key;
        json_t *v;
        if (sets[i] == NULL) {
            continue;
        }
        if (json_object_size(sets[i]) == 0) {
            snprintf(x->err, sizeof x->err, "%s must not be empty", what[i]);
            x->failed = 1;
            return -1;
        }
        json_object_foreach(sets[i], key, v)
        {
            if (json_object_get(used[i], key) == NULL) {
                snprintf(x->err, sizeof x->err,
                         "Value provided in %s unused in expressions: keys: {%.200s}", what[i],
                         key);
                x->failed = 1;
                return -1;
            }
        }
    }
    return 0;
}

void expr_path_format(const expr_elem *p, char *out, size_t outlen)
{
    size_t n = 0;
    out[0] = '\0';
    for (; p != NULL && n < outlen; p = p->next) {
        int w = p->name ? snprintf(out + n, outlen - n, "%s%s", n ? "." : "", p->name)
                        : snprintf(out + n, outlen - n, "[%ld]", p->index);
        if (w < 0) {
            break;
        }
        n += (size_t)w;
    }
}
