/*
 * cli_items.c: the single-item commands: put, get, delete, update, and
 * their condition flags (--if-not-exists NAME, --if-exists NAME,
 * --if NAME=VALUE_JSON; at most one per command).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define COND_FLAGS "--if-not-exists", "--if-exists", "--if"

/* Fills *cond from the condition flags. name_buf holds the attribute name
 * of --if; its VALUE_JSON may be "-" or "@FILE" (cli_json_text). Returns
 * CLI_OK or CLI_USAGE. */
static int parse_cond(cli_ctx *ctx, const cli_args *a, lapse_condition *cond, char *name_buf,
                      size_t len)
{
    int n = 0;
    memset(cond, 0, sizeof *cond);
    for (int i = 0; i < a->nopt; i++) {
        const char *f = a->opt[i].name, *v = a->opt[i].value;
        if (strcmp(f, "--if-not-exists") == 0) {
            cond->kind = LAPSE_COND_NOT_EXISTS;
        } else if (strcmp(f, "--if-exists") == 0) {
            cond->kind = LAPSE_COND_EXISTS;
        } else if (strcmp(f, "--if") == 0) {
            const char *eq = strchr(v, '=');
            if (eq == NULL || eq == v || (size_t)(eq - v) >= len) {
                return cli_usage(ctx, "--if wants NAME=VALUE_JSON, not \"%s\"", v);
            }
            snprintf(name_buf, len, "%.*s", (int)(eq - v), v);
            cond->kind = LAPSE_COND_EQUALS;
            int rv = cli_json_text(ctx, "--if", eq + 1, &cond->value_json);
            if (rv != CLI_OK) {
                return rv;
            }
            v = name_buf;
        } else {
            continue;
        }
        if (v[0] == '\0') {
            return cli_usage(ctx, "%s needs an attribute name", f);
        }
        cond->attribute = v;
        n++;
    }
    if (n > 1) {
        return cli_usage(ctx, "at most one of --if-not-exists, --if-exists, --if");
    }
    return CLI_OK;
}

/* Parses T and ITEM_JSON/KEY_JSON and connects. */
static int item_command(cli_ctx *ctx, int argc, char **argv, const char *what,
                        const char *const *valued, const char *const *switches, cli_args *a,
                        lapse_item **it)
{
    int rv = cli_parse(ctx, argc, argv, 2, valued, switches, a);
    if (rv != CLI_OK) {
        return rv;
    }
    if ((rv = cli_item_arg(ctx, what, a->pos[1], it)) != CLI_OK) {
        return rv;
    }
    return cli_connect(ctx);
}

/* put and delete: TABLE ITEM_JSON (the whole item) or TABLE KEY_JSON, with
 * the condition flags. Prints nothing on success. */
static int conditional_write(cli_ctx *ctx, int argc, char **argv, int is_delete)
{
    static const char *const valued[] = {COND_FLAGS, NULL};
    lapse_item *it = NULL;
    lapse_condition cond;
    lapse_error err;
    char name[1024];
    cli_args a;
    int rv;

    if ((rv = cli_parse(ctx, argc, argv, 2, valued, NULL, &a)) != CLI_OK ||
        (rv = parse_cond(ctx, &a, &cond, name, sizeof name)) != CLI_OK) {
        return rv;
    }
    if ((rv = cli_item_arg(ctx, is_delete ? "KEY_JSON" : "ITEM_JSON", a.pos[1], &it)) != CLI_OK ||
        (rv = cli_connect(ctx)) != CLI_OK) {
        goto out;
    }
    if ((is_delete ? lapse_delete(ctx->c, a.pos[0], it, &cond, &err)
                   : lapse_put(ctx->c, a.pos[0], it, &cond, &err)) != 0) {
        rv = cli_fail(ctx, &err);
    }
out:
    lapse_item_free(it);
    return rv;
}

int cli_put(cli_ctx *ctx, int argc, char **argv)
{
    return conditional_write(ctx, argc, argv, 0);
}

int cli_get(cli_ctx *ctx, int argc, char **argv)
{
    static const char *const switches[] = {"--hide-expired", "--eventually-consistent", NULL};
    lapse_item *key = NULL, *found = NULL;
    lapse_error err;
    cli_args a;
    int rv = item_command(ctx, argc, argv, "KEY_JSON", NULL, switches, &a, &key);
    if (rv != CLI_OK) {
        goto out;
    }
    lapse_read_opts ro = {.hide_expired = cli_flag(&a, "--hide-expired") != NULL,
                          .eventually_consistent = cli_flag(&a, "--eventually-consistent") != NULL};
    if (lapse_get_opts(ctx->c, a.pos[0], key, &ro, &found, &err) != 0) {
        rv = cli_fail(ctx, &err);
        goto out;
    }
    if (found == NULL) {
        printf("{}\n");
    } else {
        rv = cli_print(ctx, lapse_item_to_json(found));
    }
out:
    lapse_item_free(key);
    lapse_item_free(found);
    return rv;
}

int cli_delete(cli_ctx *ctx, int argc, char **argv)
{
    return conditional_write(ctx, argc, argv, 1);
}

/* Adds the --set and --remove actions to u in command-line order (a --set
 * VALUE_JSON may be "-" or "@FILE", cli_json_text). */
static int update_actions(cli_ctx *ctx, const cli_args *a, lapse_update *u)
{
    lapse_error err;
    int n = 0;
    for (int i = 0; i < a->nopt; i++) {
        const char *f = a->opt[i].name, *v = a->opt[i].value;
        if (strcmp(f, "--set") == 0) {
            const char *eq = strchr(v, '=');
            if (eq == NULL || eq == v) {
                return cli_usage(ctx, "--set wants NAME=VALUE_JSON, not \"%s\"", v);
            }
            const char *value = NULL;
            int rv = cli_json_text(ctx, "--set", eq + 1, &value);
            if (rv != CLI_OK) {
                return rv;
            }
            char *name = strndup(v, (size_t)(eq - v));
            rv = name != NULL ? lapse_update_set(u, name, value, &err) : LAPSE_ENOMEM;
            free(name);
            if (rv != 0) {
                fprintf(stderr, "lapse: %s: --set: %s\n", ctx->cmd,
                        rv == LAPSE_ENOMEM ? "out of memory" : err.message);
                return CLI_ERROR;
            }
            n++;
        } else if (strcmp(f, "--remove") == 0) {
            if (lapse_update_remove(u, v) != 0) {
                return cli_usage(ctx, "--remove: bad attribute name \"%s\"", v);
            }
            n++;
        }
    }
    if (n == 0) {
        return cli_usage(ctx, "nothing to do: give --set or --remove");
    }
    return CLI_OK;
}

int cli_update(cli_ctx *ctx, int argc, char **argv)
{
    static const char *const valued[] = {"--set", "--remove", COND_FLAGS, NULL};
    lapse_item *key = NULL, *updated = NULL;
    lapse_update *u = lapse_update_new();
    lapse_condition cond;
    lapse_error err;
    char name[1024];
    cli_args a;
    int rv;

    if (u == NULL) {
        fprintf(stderr, "lapse: update: out of memory\n");
        return CLI_ERROR;
    }
    if ((rv = cli_parse(ctx, argc, argv, 2, valued, NULL, &a)) != CLI_OK ||
        (rv = parse_cond(ctx, &a, &cond, name, sizeof name)) != CLI_OK ||
        (rv = update_actions(ctx, &a, u)) != CLI_OK ||
        (rv = cli_item_arg(ctx, "KEY_JSON", a.pos[1], &key)) != CLI_OK ||
        (rv = cli_connect(ctx)) != CLI_OK) {
        goto out;
    }
    if (lapse_update_item(ctx->c, a.pos[0], key, u, &cond, &updated, &err) != 0) {
        rv = cli_fail(ctx, &err);
        goto out;
    }
    rv = updated != NULL ? cli_print(ctx, lapse_item_to_json(updated))
                         : cli_print(ctx, strdup("{}"));
out:
    lapse_item_free(key);
    lapse_item_free(updated);
    lapse_update_free(u);
    return rv;
}
