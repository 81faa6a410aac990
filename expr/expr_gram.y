/*
 * expr_gram.y: the grammar of DynamoDB's expressions, turned into an
 * LALR(1) parser by lemon at build time. One parser serves every kind of
 * expression: expr_parse.c sends a START_* token first to say which.
 * Condition precedence (DynamoDB's): comparators, IN, BETWEEN and functions
 * bind tightest, then NOT, AND, OR; parentheses override.
 */
%name exprParse
%token_prefix TK_
%token_type { expr_tok }
%extra_argument { expr_pstate *ps }
%stack_size 100
%include {
#include <assert.h>
#include <stdlib.h>
#include "expr_int.h"
}
%syntax_error { expr_syntax_error(ps, yymajor, TOKEN); }
%stack_overflow { expr_fail(ps->x, "The expression is nested too deeply"); }

%token START_COND START_UPDATE START_PROJ.
%left OR.
%left AND.
%right NOT.
%nonassoc EQ NE LT LE GT GE BETWEEN IN.
%left PLUS MINUS.
%token LPAREN RPAREN LBRACK RBRACK COMMA DOT SIZE SET REMOVE ADD DELETE HASHNAME VALUE INT NAME.

%start_symbol top
top ::= START_COND cond(C). { ps->cond = C; }
top ::= START_UPDATE clauses.
top ::= START_PROJ plist(L). { ps->proj = L; }

%type cond { expr_node * }
%type operand { expr_node * }
%type oplist { expr_node * }
%type path { expr_node * }
%type plist { expr_node * }
%type upval { expr_node * }
%type upop { expr_node * }
%type uplist { expr_node * }
%type comp { int }

cond(R) ::= cond(A) OR cond(B). { R = expr_mk(ps, EXPR_OR, 0, A, B, NULL); }
cond(R) ::= cond(A) AND cond(B). { R = expr_mk(ps, EXPR_AND, 0, A, B, NULL); }
cond(R) ::= NOT cond(A). { R = expr_mk(ps, EXPR_NOT, 0, A, NULL, NULL); }
cond(R) ::= LPAREN cond(A) RPAREN. { R = A; }
cond(R) ::= operand(A) comp(O) operand(B). [EQ] { R = expr_mk(ps, EXPR_CMP, O, A, B, NULL); }
cond(R) ::= operand(A) BETWEEN operand(B) AND operand(C).
    { R = expr_mk(ps, EXPR_BETWEEN, 0, A, B, C); }
cond(R) ::= operand(A) IN LPAREN oplist(L) RPAREN. { R = expr_mk(ps, EXPR_IN, 0, A, L, NULL); }
cond(R) ::= NAME(F) LPAREN oplist(L) RPAREN. { R = expr_mk_func(ps, F, L, 0); }

comp(R) ::= EQ. { R = EXPR_EQ; }
comp(R) ::= NE. { R = EXPR_NE; }
comp(R) ::= LT. { R = EXPR_LT; }
comp(R) ::= LE. { R = EXPR_LE; }
comp(R) ::= GT. { R = EXPR_GT; }
comp(R) ::= GE. { R = EXPR_GE; }

operand(R) ::= path(P). { R = P; }
operand(R) ::= VALUE(V). { R = expr_mk_value(ps, V); }
operand(R) ::= SIZE LPAREN path(P) RPAREN. { R = expr_mk(ps, EXPR_SIZE, 0, P, NULL, NULL); }

oplist(R) ::= operand(A). { R = A; }
oplist(R) ::= oplist(L) COMMA operand(A). { R = expr_append(L, A); }

path(R) ::= NAME(N). { R = expr_mk_path(ps, NULL, N, 0); }
path(R) ::= HASHNAME(N). { R = expr_mk_path(ps, NULL, N, 1); }
path(R) ::= path(P) DOT NAME(N). { R = expr_mk_path(ps, P, N, 0); }
path(R) ::= path(P) DOT HASHNAME(N). { R = expr_mk_path(ps, P, N, 1); }
path(R) ::= path(P) LBRACK INT(I) RBRACK. { R = expr_mk_index(ps, P, I); }

plist(R) ::= path(P). { R = P; }
plist(R) ::= plist(L) COMMA path(P). { R = expr_append(L, P); }

clauses ::= clause.
clauses ::= clauses clause.
clause ::= setkw setlist.
clause ::= removekw removelist.
clause ::= addkw addlist.
clause ::= deletekw addlist.
setkw ::= SET. { expr_begin_clause(ps, EXPR_SET); }
removekw ::= REMOVE. { expr_begin_clause(ps, EXPR_REMOVE); }
addkw ::= ADD. { expr_begin_clause(ps, EXPR_ADD); }
deletekw ::= DELETE. { expr_begin_clause(ps, EXPR_DELETE); }

setlist ::= setaction.
setlist ::= setlist COMMA setaction.
setaction ::= path(P) EQ upval(V). { expr_add_action(ps, P, V); }
removelist ::= path(P). { expr_add_action(ps, P, NULL); }
removelist ::= removelist COMMA path(P). { expr_add_action(ps, P, NULL); }
addlist ::= path(P) VALUE(V). { expr_add_action(ps, P, expr_mk_value(ps, V)); }
addlist ::= addlist COMMA path(P) VALUE(V). { expr_add_action(ps, P, expr_mk_value(ps, V)); }

upval(R) ::= upop(A). { R = A; }
upval(R) ::= upop(A) PLUS upop(B). { R = expr_mk(ps, EXPR_PLUS, 0, A, B, NULL); }
upval(R) ::= upop(A) MINUS upop(B). { R = expr_mk(ps, EXPR_MINUS, 0, A, B, NULL); }
upop(R) ::= path(P). { R = P; }
upop(R) ::= VALUE(V). { R = expr_mk_value(ps, V); }
upop(R) ::= NAME(F) LPAREN uplist(L) RPAREN. { R = expr_mk_func(ps, F, L, 1); }
uplist(R) ::= upval(A). { R = A; }
uplist(R) ::= uplist(L) COMMA upval(A). { R = expr_append(L, A); }
