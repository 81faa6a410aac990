/*
 * cli_admin.c: the table and cluster commands: cluster-status, create-table,
 * describe-table, list-tables, delete-table.
 */
#include <stdio.h>
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
    return CLI_OK;
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

int cli_create_table(cli_ctx *ctx, int argc, char **argv)
{
    static const char *const valued[] = {"--partition-key", "--sort-key", "--partitions", NULL};
    static const char *const switches[] = {"--hide-expired", NULL};
    char pk[512], sk[512];
    lapse_table_def def = {0};
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
    if ((rv = cli_connect(ctx)) != CLI_OK) {
        return rv;
    }
    if (lapse_create_table_json(ctx->c, &def, &json, &err) != 0) {
        return cli_fail(ctx, &err);
    }
    return cli_print(ctx, json);
}
