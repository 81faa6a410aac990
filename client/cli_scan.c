/*
 * cli_scan.c: the multi-item commands: query (of the table or, with --index,
 * of an LSI or GSI) and scan (one item per line, paging until done or --limit
 * items printed) and batch-put (items from stdin, one per line, sent
 * LAPSE_BATCH_MAX at a time).
 */
#include <stdint.h>
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

/* --limit N into *limit, when given (else *limit stays 0: no limit). N is
 * at least 1, as DynamoDB's Limit: 0 would otherwise read every item.
 * CLI_OK or CLI_USAGE (reported). */
static int limit_flag(cli_ctx *ctx, const cli_args *a, unsigned *limit)
{
    const char *v = cli_flag(a, "--limit");
    int rv = v != NULL ? cli_uint(ctx, "--limit", v, limit) : CLI_OK;
    if (rv == CLI_OK && v != NULL && *limit == 0) {
        return cli_usage(ctx, "--limit must be at least 1");
    }
    return rv;
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

/* Fills the sort key part of o from --sk-op, --sk, --sk2 (whose values may
 * be "-" or "@FILE", cli_json_text). */
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
    int rv = cli_json_text(ctx, "--sk", o->sk_json, &o->sk_json);
    if (rv == CLI_OK && o->sk2_json != NULL) {
        rv = cli_json_text(ctx, "--sk2", o->sk2_json, &o->sk2_json);
    }
    return rv;
}

int cli_query(cli_ctx *ctx, int argc, char **argv)
{
    static const char *const valued[] = {"--key",   "--sk-op", "--sk", "--sk2",
                                         "--limit", "--index", NULL};
    static const char *const switches[] = {"--reverse", "--hide-expired", "--eventually-consistent",
                                           NULL};
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
    if ((rv = limit_flag(ctx, &a, &limit)) != CLI_OK) {
        return rv;
    }
    o.reverse = cli_flag(&a, "--reverse") != NULL;
    o.hide_expired = cli_flag(&a, "--hide-expired") != NULL;
    o.eventually_consistent = cli_flag(&a, "--eventually-consistent") != NULL;
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

/* ---- scan ---- */

/* A node that did not answer during a scan: its first error and the
 * partitions left unread because of it. */
typedef struct unread_node {
    uint32_t node_id;
    char why[sizeof(((lapse_error *)0)->message)];
    char parts[256]; /* "3, 7, 12, ..." (cut short with "...") */
    unsigned count;
} unread_node;

/* The scan's progress over the partitions. */
typedef struct scan_state {
    const char *table;
    lapse_scan_opts o;
    unsigned limit, printed;
    unread_node *unread; /* one per node that failed, at most nparts */
    size_t nunread;
} scan_state;

static int node_gone(int code)
{
    return code == LAPSE_ETIMEDOUT || code == LAPSE_EUNAVAILABLE;
}

/* The unread record of node_id, or NULL when it has not failed. */
static unread_node *unread_of(scan_state *st, uint32_t node_id)
{
    for (size_t i = 0; i < st->nunread; i++) {
        if (st->unread[i].node_id == node_id) {
            return &st->unread[i];
        }
    }
    return NULL;
}

static void note_unread(unread_node *u, uint32_t part)
{
    size_t len = strlen(u->parts);
    if (len + 16 < sizeof u->parts) {
        snprintf(u->parts + len, sizeof u->parts - len, "%s%u", u->count ? ", " : "",
                 (unsigned)part);
    } else if (strcmp(u->parts + len - 3, "...") != 0) {
        snprintf(u->parts + len, sizeof u->parts - len, ", ...");
    }
    u->count++;
}

/* Prints partition part (of n) page by page until it is done or the limit
 * is reached. CLI_OK; CLI_ERROR (reported) for an error other than its node
 * not answering; for that, *gone is set and err says why. */
static int scan_partition(cli_ctx *ctx, scan_state *st, uint32_t part, size_t n, int *gone,
                          lapse_error *err)
{
    lapse_item *next = NULL;
    int rv = CLI_OK;
    *gone = 0;
    st->o.segment = part;
    st->o.total_segments = (unsigned)n;
    do {
        lapse_page *p = NULL;
        st->o.limit = st->limit > 0 ? st->limit - st->printed : 0;
        st->o.exclusive_start_key = next;
        if (lapse_scan(ctx->c, st->table, &st->o, &p, err) != 0) {
            *gone = node_gone(err->code);
            rv = *gone ? CLI_OK : cli_fail(ctx, err);
            break;
        }
        rv = print_page(ctx, p, st->limit, &st->printed);
        lapse_item_free(next);
        next = lapse_page_last_key(p) != NULL ? lapse_item_dup(lapse_page_last_key(p)) : NULL;
        lapse_page_free(p);
    } while (rv == CLI_OK && next != NULL && (st->limit == 0 || st->printed < st->limit));
    lapse_item_free(next);
    return rv;
}

/*
 * The table is read partition by partition, in order, so that a node that
 * does not answer costs its own partitions only: what the others hold is
 * printed, the first of its partitions waits out the timeout, the rest of
 * them are skipped at once, and at the end each such node is named with
 * the partitions left unread (exit 1).
 */
int cli_scan(cli_ctx *ctx, int argc, char **argv)
{
    static const char *const valued[] = {"--limit", NULL};
    static const char *const switches[] = {"--hide-expired", "--eventually-consistent", NULL};
    scan_state st = {0};
    uint32_t *owners = NULL;
    size_t n = 0;
    lapse_error err;
    cli_args a;
    int rv;

    if ((rv = cli_parse(ctx, argc, argv, 1, valued, switches, &a)) != CLI_OK ||
        (rv = limit_flag(ctx, &a, &st.limit)) != CLI_OK || (rv = cli_connect(ctx)) != CLI_OK) {
        return rv;
    }
    st.table = a.pos[0];
    st.o.hide_expired = cli_flag(&a, "--hide-expired") != NULL;
    st.o.eventually_consistent = cli_flag(&a, "--eventually-consistent") != NULL;
    if (lapse_partition_owners(ctx->c, st.table, &owners, &n, &err) != 0) {
        return cli_fail(ctx, &err);
    }
    if ((st.unread = calloc(n ? n : 1, sizeof *st.unread)) == NULL) {
        fprintf(stderr, "lapse: %s: out of memory\n", ctx->cmd);
        lapse_free(owners);
        return CLI_ERROR;
    }
    unsigned unread = 0;
    for (uint32_t part = 0; part < n && (st.limit == 0 || st.printed < st.limit); part++) {
        unread_node *u = unread_of(&st, owners[part]);
        int gone = 0;
        if (u == NULL && (rv = scan_partition(ctx, &st, part, n, &gone, &err)) != CLI_OK) {
            break;
        }
        if (gone) {
            u = &st.unread[st.nunread++];
            u->node_id = owners[part];
            snprintf(u->why, sizeof u->why, "%s", err.message);
        }
        if (u != NULL) {
            note_unread(u, part);
            unread++;
        }
    }
    for (size_t i = 0; rv == CLI_OK && i < st.nunread; i++) {
        const unread_node *u = &st.unread[i];
        fprintf(stderr, "lapse: %s: node %u: %u partition%s not read (%s): %s\n", ctx->cmd,
                (unsigned)u->node_id, u->count, u->count > 1 ? "s" : "", u->parts, u->why);
    }
    if (rv == CLI_OK && unread > 0) {
        fprintf(stderr, "lapse: %s: incomplete: %u of %zu partitions of \"%s\" not read\n",
                ctx->cmd, unread, n, st.table);
        rv = CLI_ERROR;
    }
    free(st.unread);
    lapse_free(owners);
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
