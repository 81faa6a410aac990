/*
 * cli_admin.c: the table and cluster commands: cluster-status, node drain and remove,
 * rebalance --dry-run,
 * create-table (with its index and stream flags), describe-table,
 * list-tables, delete-table.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Runs a call that returns a JSON document and prints it. */
typedef int (*json_call)(lapse_client *c, const char *arg, char **json, lapse_error *err);

static int print_call(cli_ctx *ctx, json_call call, const char *arg)
{
    lapse_error err;
    char *json = NULL;
    int rv = cli_connect(ctx);
    if (rv != CLI_OK) {
        return rv;
    }
    if (call(ctx->c, arg, &json, &err) != 0) {
        return cli_fail(ctx, &err);
    }
    return cli_print(ctx, json);
}

static int status_call(lapse_client *c, const char *arg, char **json, lapse_error *err)
{
    (void)arg;
    return lapse_cluster_status(c, json, err);
}

static int rebalance_call(lapse_client *c, const char *arg, char **json, lapse_error *err)
{
    (void)arg;
    return lapse_rebalance_plan(c, json, err);
}

static int list_call(lapse_client *c, const char *arg, char **json, lapse_error *err)
{
    (void)arg;
    return lapse_list_tables(c, json, err);
}

int cli_cluster_status(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int rv = cli_parse(ctx, argc, argv, 0, NULL, NULL, &a);
    return rv != CLI_OK ? rv : print_call(ctx, status_call, NULL);
}

/* lapse node drain N [--stop] | lapse node remove N [--lose-data] */
int cli_node(cli_ctx *ctx, int argc, char **argv)
{
    static const char *const switches[] = {"--stop", "--lose-data", NULL};
    cli_args a;
    int rv = cli_parse(ctx, argc, argv, 2, NULL, switches, &a);
    if (rv != CLI_OK) {
        return rv;
    }
    int remove = a.npos == 2 && strcmp(a.pos[0], "remove") == 0;
    if (a.npos != 2 || (!remove && strcmp(a.pos[0], "drain") != 0)) {
        return cli_usage(ctx, "want: node drain N [--stop], or node remove N [--lose-data]");
    }
    if (remove && cli_flag(&a, "--stop") != NULL) {
        return cli_usage(ctx, "node remove takes no --stop: a removal cannot be undone");
    }
    if (!remove && cli_flag(&a, "--lose-data") != NULL) {
        return cli_usage(ctx, "node drain takes no --lose-data: a drain moves every copy");
    }
    char *end = NULL;
    unsigned long id = strtoul(a.pos[1], &end, 10);
    if (a.pos[1][0] == '\0' || a.pos[1][0] == '-' || *end != '\0' || id == 0 || id > UINT32_MAX) {
        return cli_usage(ctx, "node id \"%s\" is not a number from 1", a.pos[1]);
    }
    if ((rv = cli_connect(ctx)) != CLI_OK) {
        return rv;
    }
    lapse_error err;
    char *json = NULL;
    unsigned flags = cli_flag(&a, "--lose-data") != NULL ? LAPSE_REMOVE_LOSE_DATA : 0;
    if ((remove ? lapse_node_remove(ctx->c, (uint32_t)id, flags, &json, &err)
                : lapse_node_drain(ctx->c, (uint32_t)id, cli_flag(&a, "--stop") != NULL, &json,
                                   &err)) != 0) {
        return cli_fail(ctx, &err);
    }
    return cli_print(ctx, json);
}

/* lapse rebalance --dry-run */
int cli_rebalance(cli_ctx *ctx, int argc, char **argv)
{
    static const char *const switches[] = {"--dry-run", NULL};
    cli_args a;
    int rv = cli_parse(ctx, argc, argv, 0, NULL, switches, &a);
    if (rv != CLI_OK) {
        return rv;
    }
    if (cli_flag(&a, "--dry-run") == NULL) {
        return cli_usage(ctx, "the coordinator rebalances on its own; --dry-run prints its plan");
    }
    return print_call(ctx, rebalance_call, NULL);
}

int cli_list_tables(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int rv = cli_parse(ctx, argc, argv, 0, NULL, NULL, &a);
    return rv != CLI_OK ? rv : print_call(ctx, list_call, NULL);
}

int cli_describe_table(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int rv = cli_parse(ctx, argc, argv, 1, NULL, NULL, &a);
    return rv != CLI_OK ? rv : print_call(ctx, lapse_describe_table, a.pos[0]);
}

int cli_delete_table(cli_ctx *ctx, int argc, char **argv)
{
    lapse_error err;
    cli_args a;
    int rv = cli_parse(ctx, argc, argv, 1, NULL, NULL, &a);
    if (rv != CLI_OK || (rv = cli_connect(ctx)) != CLI_OK) {
        return rv;
    }
    if (lapse_delete_table(ctx->c, a.pos[0], &err) != 0) {
        return cli_fail(ctx, &err);
    }
    /* DynamoDB's DeleteTable answers with the table's description; the
     * table is gone by now, so its name and final status. The name needs no
     * escaping: the coordinator only has tables named [A-Za-z0-9_.-]. */
    printf("{\"TableDescription\":{\"TableName\":\"%s\",\"TableStatus\":\"DELETED\"}}\n", a.pos[0]);
    return CLI_OK;
}

int cli_update_stream(cli_ctx *ctx, int argc, char **argv)
{
    static const char *const valued[] = {"--stream-view-type", NULL};
    static const char *const switches[] = {"--on", "--off", NULL};
    lapse_error err;
    cli_args a;
    char *json = NULL;
    int rv = cli_parse(ctx, argc, argv, 1, valued, switches, &a);
    if (rv != CLI_OK) {
        return rv;
    }
    const int on = cli_flag(&a, "--on") != NULL, off = cli_flag(&a, "--off") != NULL;
    const char *view = cli_flag(&a, "--stream-view-type");
    int v = LAPSE_STREAM_NEW_AND_OLD_IMAGES;
    if (on == off) {
        return cli_usage(ctx, "give exactly one of --on, --off");
    }
    if (view != NULL && off) {
        return cli_usage(ctx, "--stream-view-type goes with --on only");
    }
    if (view != NULL && (v = lapse_stream_view_parse(view)) < 0) {
        return cli_usage(ctx,
                         "--stream-view-type must be NEW_AND_OLD_IMAGES, KEYS_ONLY, "
                         "NEW_IMAGE or OLD_IMAGE, not \"%s\"",
                         view);
    }
    if ((rv = cli_connect(ctx)) != CLI_OK) {
        return rv;
    }
    if (lapse_update_stream(ctx->c, a.pos[0], on, (lapse_stream_view)v, &err) != 0 ||
        lapse_describe_table(ctx->c, a.pos[0], &json, &err) != 0) {
        return cli_fail(ctx, &err);
    }
    return cli_print(ctx, json);
}

/* Splits "NAME:T" (T one of S, N, B) in place into *name and *type. */
static int key_arg(cli_ctx *ctx, const char *flag, const char *text, char *buf, size_t len,
                   const char **name, char *type)
{
    const char *colon = strrchr(text, ':');
    if (colon == NULL || colon == text || strlen(colon + 1) != 1 ||
        strchr("SNB", colon[1]) == NULL) {
        return cli_usage(ctx, "%s wants NAME:S, NAME:N or NAME:B, not \"%s\"", flag, text);
    }
    if ((size_t)(colon - text) >= len) {
        return cli_usage(ctx, "%s: attribute name too long", flag);
    }
    snprintf(buf, len, "%.*s", (int)(colon - text), text);
    *name = buf;
    *type = colon[1];
    return CLI_OK;
}

/* ---- create-table's index and stream flags ---- */

/* One --lsi or --gsi, parsed; def's strings point into the buffers. */
typedef struct index_arg {
    lapse_index_def def;
    char name[512], pk[512], sk[512];
} index_arg;

/* Parses "NAME:T" (a piece of flag's value whole) into buf, *name, *type. */
static int key_piece(cli_ctx *ctx, const char *flag, const char *whole, const char *piece, size_t n,
                     char *buf, size_t len, const char **name, char *type)
{
    const char *colon = NULL;
    for (size_t i = 0; i < n; i++) {
        colon = piece[i] == ':' ? piece + i : colon;
    }
    if (colon == NULL || colon == piece || (size_t)(colon - piece) != n - 2 ||
        strchr("SNB", colon[1]) == NULL || colon[1] == '\0') {
        return cli_usage(ctx, "%s \"%s\": \"%.*s\" is not NAME:S, NAME:N or NAME:B", flag, whole,
                         (int)n, piece);
    }
    if ((size_t)(colon - piece) >= len) {
        return cli_usage(ctx, "%s \"%s\": attribute name too long", flag, whole);
    }
    snprintf(buf, len, "%.*s", (int)(colon - piece), piece);
    *name = buf;
    *type = colon[1];
    return CLI_OK;
}

/* --lsi NAME=SK:TYPE, or --gsi NAME=PK:TYPE[,SK:TYPE][,projection=all|keys]
 * [,partitions=N]. */
static int index_flag(cli_ctx *ctx, const char *flag, const char *v, int lsi, index_arg *out)
{
    memset(out, 0, sizeof *out);
    const char *eq = strchr(v, '=');
    const char *shape =
        lsi ? "NAME=SK:TYPE" : "NAME=PK:TYPE[,SK:TYPE][,projection=all|keys][,partitions=N]";
    if (eq == NULL || eq == v || eq[1] == '\0') {
        return cli_usage(ctx, "%s wants %s, not \"%s\"", flag, shape, v);
    }
    if ((size_t)(eq - v) >= sizeof out->name) {
        return cli_usage(ctx, "%s \"%s\": index name too long", flag, v);
    }
    snprintf(out->name, sizeof out->name, "%.*s", (int)(eq - v), v);
    out->def.name = out->name;
    int have_sk = 0, have_proj = 0, have_parts = 0, rv;
    const char *p = eq + 1;
    for (int k = 0;; k++) {
        size_t n = strcspn(p, ",");
        if (k == 0 || (!lsi && n > 0 && strncmp(p, "projection=", 11) != 0 &&
                       strncmp(p, "partitions=", 11) != 0)) {
            int is_pk = k == 0 && !lsi;
            if (k > 0 && have_sk) {
                return cli_usage(ctx, "%s \"%s\": more than one sort key", flag, v);
            }
            rv = key_piece(ctx, flag, v, p, n, is_pk ? out->pk : out->sk, sizeof out->pk,
                           is_pk ? &out->def.partition_key : &out->def.sort_key,
                           is_pk ? &out->def.partition_key_type : &out->def.sort_key_type);
            if (rv != CLI_OK) {
                return rv;
            }
            have_sk |= !is_pk;
        } else if (lsi) {
            return cli_usage(ctx, "%s wants %s, not \"%s\"", flag, shape, v);
        } else if (strncmp(p, "projection=", 11) == 0 && !have_proj) {
            have_proj = 1;
            if (n == 14 && strncmp(p + 11, "all", 3) == 0) {
                out->def.projection = LAPSE_PROJECT_ALL;
            } else if (n == 15 && strncmp(p + 11, "keys", 4) == 0) {
                out->def.projection = LAPSE_PROJECT_KEYS;
            } else {
                return cli_usage(ctx, "%s \"%s\": projection must be all or keys", flag, v);
            }
        } else if (strncmp(p, "partitions=", 11) == 0 && !have_parts) {
            char num[32];
            have_parts = 1;
            snprintf(num, sizeof num, "%.*s", (int)(n - 11 < sizeof num ? n - 11 : 0), p + 11);
            char label[600];
            snprintf(label, sizeof label, "%s \"%s\" partitions", flag, v);
            if ((rv = cli_uint(ctx, label, num, &out->def.partitions)) != CLI_OK) {
                return rv;
            }
            if (out->def.partitions == 0) {
                return cli_usage(ctx, "%s \"%s\": partitions must be a power of two, not 0", flag,
                                 v);
            }
        } else {
            return cli_usage(ctx, "%s \"%s\": \"%.*s\" given twice or not understood", flag, v,
                             (int)n, p);
        }
        if (p[n] == '\0') {
            break;
        }
        p += n + 1;
    }
    return CLI_OK;
}

/* Every --lsi (lsi) or --gsi, parsed. */
typedef struct index_args {
    index_arg *store;      /* owned; the parsed strings */
    lapse_index_def *defs; /* owned; n definitions pointing into store */
    size_t n;
} index_args;

static void index_args_fini(index_args *x)
{
    free(x->store);
    free(x->defs);
}

static int index_flags(cli_ctx *ctx, const cli_args *a, int lsi, index_args *out)
{
    const char *flag = lsi ? "--lsi" : "--gsi";
    size_t count = 0;
    for (int i = 0; i < a->nopt; i++) {
        count += strcmp(a->opt[i].name, flag) == 0;
    }
    if (count == 0) {
        return CLI_OK;
    }
    out->store = calloc(count, sizeof *out->store);
    out->defs = calloc(count, sizeof *out->defs);
    if (out->store == NULL || out->defs == NULL) {
        fprintf(stderr, "lapse: %s: out of memory\n", ctx->cmd);
        return CLI_ERROR;
    }
    for (int i = 0; i < a->nopt; i++) {
        if (strcmp(a->opt[i].name, flag) != 0) {
            continue;
        }
        int rv = index_flag(ctx, flag, a->opt[i].value, lsi, &out->store[out->n]);
        if (rv != CLI_OK) {
            return rv;
        }
        out->defs[out->n] = out->store[out->n].def;
        out->n++;
    }
    return CLI_OK;
}

/* "on" or "off" for flag into *out; CLI_USAGE otherwise. */
static int on_off(cli_ctx *ctx, const char *flag, const char *v, int *out)
{
    if (strcmp(v, "on") == 0 || strcmp(v, "off") == 0) {
        *out = v[1] == 'n';
        return CLI_OK;
    }
    return cli_usage(ctx, "%s wants on or off, not \"%s\"", flag, v);
}

static int stream_flags(cli_ctx *ctx, const cli_args *a, lapse_table_def *def)
{
    const char *on = cli_flag(a, "--stream");
    const char *hours = cli_flag(a, "--stream-retention-hours");
    const char *ttl = cli_flag(a, "--stream-ttl-deletes");
    const char *view = cli_flag(a, "--stream-view-type");
    int rv, ttl_on = 1;
    if (on != NULL && (rv = on_off(ctx, "--stream", on, &def->stream)) != CLI_OK) {
        return rv;
    }
    if ((hours != NULL || ttl != NULL || view != NULL) && !def->stream) {
        return cli_usage(ctx, "%s needs --stream on",
                         hours != NULL ? "--stream-retention-hours"
                         : ttl != NULL ? "--stream-ttl-deletes"
                                       : "--stream-view-type");
    }
    if (view != NULL && (def->stream_view = lapse_stream_view_parse(view)) < 0) {
        return cli_usage(ctx,
                         "--stream-view-type must be NEW_AND_OLD_IMAGES, KEYS_ONLY, NEW_IMAGE or "
                         "OLD_IMAGE, not %s",
                         view);
    }
    if (hours != NULL) {
        if ((rv = cli_uint(ctx, "--stream-retention-hours", hours, &def->stream_retention_hours)) !=
            CLI_OK) {
            return rv;
        }
        if (def->stream_retention_hours < 1 || def->stream_retention_hours > 8760) {
            return cli_usage(ctx, "--stream-retention-hours must be 1 to 8760 (a year), not %s",
                             hours);
        }
    }
    if (ttl != NULL && (rv = on_off(ctx, "--stream-ttl-deletes", ttl, &ttl_on)) != CLI_OK) {
        return rv;
    }
    def->stream_exclude_ttl_deletes = !ttl_on;
    return CLI_OK;
}

int cli_create_table(cli_ctx *ctx, int argc, char **argv)
{
    static const char *const valued[] = {"--partition-key",
                                         "--sort-key",
                                         "--partitions",
                                         "--lsi",
                                         "--gsi",
                                         "--stream",
                                         "--stream-retention-hours",
                                         "--stream-ttl-deletes",
                                         "--stream-view-type",
                                         "--replication",
                                         NULL};
    static const char *const switches[] = {"--hide-expired", NULL};
    char pk[512], sk[512];
    lapse_table_def def = {0};
    index_args lsi = {0}, gsi = {0};
    lapse_error err;
    char *json = NULL;
    cli_args a;
    int rv;

    if ((rv = cli_parse(ctx, argc, argv, 1, valued, switches, &a)) != CLI_OK) {
        return rv;
    }
    def.name = a.pos[0];
    def.hide_expired = cli_flag(&a, "--hide-expired") != NULL;
    const char *v = cli_flag(&a, "--partition-key");
    if (v == NULL) {
        return cli_usage(ctx, "--partition-key is required");
    }
    if ((rv = key_arg(ctx, "--partition-key", v, pk, sizeof pk, &def.partition_key,
                      &def.partition_key_type)) != CLI_OK) {
        return rv;
    }
    if ((v = cli_flag(&a, "--sort-key")) != NULL &&
        (rv = key_arg(ctx, "--sort-key", v, sk, sizeof sk, &def.sort_key, &def.sort_key_type)) !=
            CLI_OK) {
        return rv;
    }
    if ((v = cli_flag(&a, "--partitions")) != NULL &&
        (rv = cli_uint(ctx, "--partitions", v, &def.partitions)) != CLI_OK) {
        return rv;
    }
    if (v != NULL && def.partitions == 0) {
        return cli_usage(ctx, "--partitions must be a power of two, not 0");
    }
    if ((v = cli_flag(&a, "--replication")) != NULL &&
        (rv = cli_uint(ctx, "--replication", v, &def.replication)) != CLI_OK) {
        return rv;
    }
    if (v != NULL && (def.replication < 1 || def.replication > 3)) {
        return cli_usage(ctx, "--replication must be 1, 2 or 3 copies, not %s", v);
    }
    if ((rv = stream_flags(ctx, &a, &def)) != CLI_OK ||
        (rv = index_flags(ctx, &a, 1, &lsi)) != CLI_OK ||
        (rv = index_flags(ctx, &a, 0, &gsi)) != CLI_OK) {
        goto done;
    }
    def.lsi = lsi.defs;
    def.nlsi = lsi.n;
    def.gsi = gsi.defs;
    def.ngsi = gsi.n;
    if ((rv = cli_connect(ctx)) != CLI_OK) {
        goto done;
    }
    if (lapse_create_table_json(ctx->c, &def, &json, &err) != 0) {
        rv = cli_fail(ctx, &err);
        goto done;
    }
    rv = cli_print(ctx, json);
done:
    index_args_fini(&lsi);
    index_args_fini(&gsi);
    return rv;
}
