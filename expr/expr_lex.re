/*
 * expr_lex.re: the lexer of DynamoDB expressions, turned into C by re2c at
 * build time. Keywords are case-insensitive ('...' in re2c); every other
 * word is a NAME, which the parser checks against the reserved words.
 * The input is a NUL-terminated copy; a NUL before the end is an error.
 */
#include "expr_gram.h"
#include "expr_int.h"

int expr_lex_next(expr_lex *l, expr_ctx *x, expr_tok *t)
{
    const char *YYMARKER = NULL;
    (void)YYMARKER;
    for (;;) {
        t->s = l->cur;
        /*!re2c
        re2c:define:YYCTYPE = "unsigned char";
        re2c:define:YYCURSOR = l->cur;
        re2c:yyfill:enable = 0;

        word = [a-zA-Z_][a-zA-Z0-9_]*;

        "\x00" {
            if (l->cur - 1 != l->lim) {
                expr_fail(x, "Syntax error; invalid character at offset %d",
                          (int)(l->cur - 1 - l->start));
                return -1;
            }
            l->cur--;
            t->len = 0;
            return 0;
        }
        [ \t\r\n]+ { continue; }
        "(" {
            if (++l->depth > EXPR_MAX_DEPTH) {
                expr_fail(x, "The expression is nested too deeply; the limit is %d levels",
                          EXPR_MAX_DEPTH);
                return -1;
            }
            t->len = 1;
            return TK_LPAREN;
        }
        ")" { l->depth--; t->len = 1; return TK_RPAREN; }
        "[" { t->len = 1; return TK_LBRACK; }
        "]" { t->len = 1; return TK_RBRACK; }
        "," { t->len = 1; return TK_COMMA; }
        "." { t->len = 1; return TK_DOT; }
        "=" { t->len = 1; return TK_EQ; }
        "<>" { t->len = 2; return TK_NE; }
        "<" { t->len = 1; return TK_LT; }
        "<=" { t->len = 2; return TK_LE; }
        ">" { t->len = 1; return TK_GT; }
        ">=" { t->len = 2; return TK_GE; }
        "+" { t->len = 1; return TK_PLUS; }
        "-" { t->len = 1; return TK_MINUS; }
        'AND' { t->len = 3; return TK_AND; }
        'OR' { t->len = 2; return TK_OR; }
        'NOT' { t->len = 3; return TK_NOT; }
        'BETWEEN' { t->len = 7; return TK_BETWEEN; }
        'IN' { t->len = 2; return TK_IN; }
        'SET' { t->len = 3; return TK_SET; }
        'REMOVE' { t->len = 6; return TK_REMOVE; }
        'ADD' { t->len = 3; return TK_ADD; }
        'DELETE' { t->len = 6; return TK_DELETE; }
        'SIZE' { t->len = 4; return TK_SIZE; }
        "#" [a-zA-Z0-9_]+ { t->len = (size_t)(l->cur - t->s); return TK_HASHNAME; }
        ":" [a-zA-Z0-9_]+ { t->len = (size_t)(l->cur - t->s); return TK_VALUE; }
        [0-9]+ { t->len = (size_t)(l->cur - t->s); return TK_INT; }
        word { t->len = (size_t)(l->cur - t->s); return TK_NAME; }
        * {
            expr_fail(x, "Syntax error; token: \"%c\", near offset %d", *t->s,
                      (int)(t->s - l->start)); /* expr_fail masks a non-ASCII byte */
            return -1;
        }
        */
    }
}
