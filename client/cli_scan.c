/*
 * cli_scan.c: the multi-item commands: query (of the table or, with --index,
 * of an LSI or GSI) and scan (one item per line, paging until done or --limit
 * items printed) and batch-put (items from stdin, one per line, sent
 * LAPSE_BATCH_MAX at a time).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define PROGRESS_EVERY 10000

/* Prints a page's items, at most *left of them when limit is set. */
static int print_page(cli_ctx *ctx, const lapse_page *p, unsigned limit, unsigned *printed)
{
    for (size_t i = 0; i < lapse_page_count(p); i++) {
        if (limit > 0 && *printed >= limit) {
            break;
        }
        int rv = cli_print(ctx, lapse_item_to_json(lapse_page_item(p, i)));
        if (rv != CLI_OK) {
            return rv;
        }
        (*printed)++;
    }
    return CLI_OK;
}

static const struct {
    const char *name;
    lapse_sk_op op;
} sk_ops[] = {
    {"eq", LAPSE_SK_EQ},
    {"lt", LAPSE_SK_LT},
    {"le", LAPSE_SK_LE},
    {"gt", LAPSE_SK_GT},
    {"ge", LAPSE_SK_GE},
    {"between", LAPSE_SK_BETWEEN},
    {"begins_with", LAPSE_SK_BEGINS_WITH},
};

/* Fills the sort key part of o from --sk-op, --sk, --sk2. */
static int query_sk_flags(cli_ctx *ctx, const cli_args *a, lapse_query_opts *o)
{
    const char *op = cli_flag(a, "--sk-op");
    o->sk_json = cli_flag(a, "--sk");
    o->sk2_json = cli_flag(a, "--sk2");
    if (op == NULL) {
        if (o->sk_json != NULL || o->sk2_json != NULL) {
            return cli_usage(ctx, "--sk and --sk2 need --sk-op");
        }
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof sk_ops / sizeof sk_ops[0]; i++) {
        if (strcmp(op, sk_ops[i].name) == 0) {
            o->sk_op = sk_ops[i].op;
        }
    }
    if (o->sk_op == LAPSE_SK_NONE) {
        return cli_usage(ctx, "unknown --sk-op \"%s\"", op);
    }
    if (o->sk_json == NULL) {
        return cli_usage(ctx, "--sk-op %s needs --sk VALUE_JSON", op);
    }
    if ((o->sk_op == LAPSE_SK_BETWEEN) != (o->sk2_json != NULL)) {
        return cli_usage(ctx, o->sk2_json == NULL ? "--sk-op between needs --sk2 VALUE_JSON"
                                                  : "--sk2 goes with --sk-op between only");
    }
    return CLI_OK;
}

int cli_query(cli_ctx *ctx, int argc, char **argv)
{
    static const char *const valued[] = {"--key",   "--sk-op", "--sk", "--sk2",
                                         "--limit", "--index", NULL};
    static const char *const switches[] = {"--reverse", "--hide-expired", NULL};
    lapse_query_opts o = {0};
    lapse_item *key = NULL, *next = NULL;
    const char *pk_name = NULL;
    char *pk_json = NULL;
    lapse_error err;
    unsigned limit = 0, printed = 0;
    cli_args a;
    int rv;

    if ((rv = cli_parse(ctx, argc, argv, 1, valued, switches, &a)) != CLI_OK ||
        (rv = query_sk_flags(ctx, &a, &o)) != CLI_OK) {
        return rv;
    }
    const char *v = cli_flag(&a, "--key");
    if (v == NULL) {
        return cli_usage(ctx, "--key PK_JSON is required");
    }
    if ((v = cli_flag(&a, "--index")) != NULL && v[0] == '\0') {
        return cli_usage(ctx, "--index wants an index name");
    }
    if ((v = cli_flag(&a, "--limit")) != NULL &&
        (rv = cli_uint(ctx, "--limit", v, &limit)) != CLI_OK) {
        return rv;
    }
    o.reverse = cli_flag(&a, "--reverse") != NULL;
    o.hide_expired = cli_flag(&a, "--hide-expired") != NULL;
    if ((rv = cli_item_arg(ctx, "--key", cli_flag(&a, "--key"), &key)) != CLI_OK) {
        goto out;
    }
    /* PK_JSON is a one-attribute item: {"UserName":{"S":"user1"}}. */
    if (lapse_item_count(key) != 1) {
        fprintf(stderr, "lapse: query: --key wants exactly one attribute, e.g. "
                        "{\"UserName\":{\"S\":\"user1\"}}\n");
        rv = CLI_ERROR;
        goto out;
    }
    pk_name = lapse_item_name(key, 0);
    if ((pk_json = lapse_item_get_json(key, pk_name)) == NULL) {
        fprintf(stderr, "lapse: query: out of memory\n");
        rv = CLI_ERROR;
        goto out;
    }
    o.partition_key_json = pk_json;
    o.partition_key_name = pk_name;
    if ((rv = cli_connect(ctx)) != CLI_OK) {
        goto out;
    }
    do {
        lapse_page *p = NULL;
        o.limit = limit > 0 ? limit - printed : 0;
        o.exclusive_start_key = next;
        if (lapse_query_index(ctx->c, a.pos[0], cli_flag(&a, "--index"), &o, &p, &err) != 0) {
            rv = cli_fail(ctx, &err);
            goto out;
        }
        rv = print_page(ctx, p, limit, &printed);
        lapse_item_free(next);
        next = lapse_page_last_key(p) != NULL ? lapse_item_dup(lapse_page_last_key(p)) : NULL;
        lapse_page_free(p);
    } while (rv == CLI_OK && next != NULL && (limit == 0 || printed < limit));
out:
    lapse_item_free(key);
    lapse_item_free(next);
    lapse_free(pk_json);
    return rv;
}

int cli_scan(cli_ctx *ctx, int argc, char **argv)
{
    static const char *const valued[] = {"--limit", NULL};
    static const char *const switches[] = {"--hide-expired", NULL};
    lapse_scan_opts o = {0};
    lapse_item *next = NULL;
    lapse_error err;
    unsigned limit = 0, printed = 0;
    cli_args a;
    int rv;

    if ((rv = cli_parse(ctx, argc, argv, 1, valued, switches, &a)) != CLI_OK) {
        return rv;
    }
    o.hide_expired = cli_flag(&a, "--hide-expired") != NULL;
    const char *v = cli_flag(&a, "--limit");
    if (v != NULL && (rv = cli_uint(ctx, "--limit", v, &limit)) != CLI_OK) {
        return rv;
    }
    if ((rv = cli_connect(ctx)) != CLI_OK) {
        return rv;
    }
    do {
        lapse_page *p = NULL;
        o.limit = limit > 0 ? limit - printed : 0;
        o.exclusive_start_key = next;
        if (lapse_scan(ctx->c, a.pos[0], &o, &p, &err) != 0) {
            rv = cli_fail(ctx, &err);
            break;
        }
        rv = print_page(ctx, p, limit, &printed);
        lapse_item_free(next);
        next = lapse_page_last_key(p) != NULL ? lapse_item_dup(lapse_page_last_key(p)) : NULL;
        lapse_page_free(p);
    } while (rv == CLI_OK && next != NULL && (limit == 0 || printed < limit));
    lapse_item_free(next);
    return rv;
}

/* ------------------------------------------------------------------------ */
/* batch-put                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct batch {
    lapse_item *items[LAPSE_BATCH_MAX];
    size_t n;
    size_t written; /* items acknowledged so far */
    size_t next_progress;
} batch;

static void batch_clear(batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        lapse_item_free(b->items[i]);
    }
    b->n = 0;
}

static int batch_flush(cli_ctx *ctx, const char *table, batch *b)
{
    lapse_error err;
    if (b->n == 0) {
        return CLI_OK;
    }
    if (lapse_batch_write(ctx->c, table, b->items, b->n, NULL, 0, &err) != 0) {
        fprintf(stderr, "lapse: batch-put: %s (%zu items written before this batch)\n", err.message,
                b->written);
        return CLI_ERROR;
    }
    b->written += b->n;
    batch_clear(b);
    if (b->written >= b->next_progress) {
        fprintf(stderr, "lapse: batch-put: %zu items written\n", b->written);
        b->next_progress = (b->written / PROGRESS_EVERY + 1) * PROGRESS_EVERY;
    }
    return CLI_OK;
}

static int blank(const char *s)
{
    return s[strspn(s, " \t\r\n")] == '\0';
}

int cli_batch_put(cli_ctx *ctx, int argc, char **argv)
{
    static batch b; /* 8 KB of pointers: keep it off the stack */
    lapse_error err;
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    cli_args a;
    int rv;

    if ((rv = cli_parse(ctx, argc, argv, 1, NULL, NULL, &a)) != CLI_OK ||
        (rv = cli_connect(ctx)) != CLI_OK) {
        return rv;
    }
    b.next_progress = PROGRESS_EVERY;
    while (getline(&line, &cap, stdin) != -1) {
        lineno++;
        if (blank(line)) {
            continue;
        }
        lapse_item *it = NULL;
        if (lapse_item_from_json(&it, line, &err) != 0 ||
            lapse_check_item(ctx->c, a.pos[0], it, 0, &err) != 0) {
            fprintf(stderr, "lapse: batch-put: line %zu: %s (%zu items written before it)\n",
                    lineno, err.message, b.written);
            lapse_item_free(it);
            rv = CLI_ERROR;
            goto out;
        }
        b.items[b.n++] = it;
        if (b.n == LAPSE_BATCH_MAX && (rv = batch_flush(ctx, a.pos[0], &b)) != CLI_OK) {
            goto out;
        }
    }
    if (ferror(stdin)) {
        fprintf(stderr, "lapse: batch-put: cannot read stdin\n");
        rv = CLI_ERROR;
        goto out;
    }
    if ((rv = batch_flush(ctx, a.pos[0], &b)) != CLI_OK) {
        goto out;
    }
    printf("{\"ItemsWritten\":%zu}\n", b.written);
out:
    batch_clear(&b);
    free(line);
    return rv;
}
