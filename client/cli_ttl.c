/*
 * cli_ttl.c: the time-to-live commands (docs/ttl.md): update-ttl (exactly one
 * of --enable, --disable, --pause, --resume), describe-ttl and ttl-preview.
 * Every usage mistake (no action, two actions, --enable without an
 * attribute, a negative offset) is found before connecting and exits 2; a
 * refusal by the coordinator (LAPSE_ESTATE: already enabled, attribute
 * change while enabled...) exits 1 with its message.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define RULE_FLAGS "--attribute", "--offset-seconds", "--ignore-older-than-years"

/* A TTL rule as given on the command line. */
typedef struct rule_args {
    const char *attribute; /* NULL: not given */
    int64_t offset_s;      /* 0 when not given */
    int guard_years;       /* 0 when not given: the default */
} rule_args;

/* Parses --offset-seconds: a non-negative decimal number of seconds. */
static int offset_arg(cli_ctx *ctx, const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 ||
        !(text[0] == '-' || (text[0] >= '0' && text[0] <= '9'))) {
        return cli_usage(ctx, "--offset-seconds: \"%s\" is not a whole number of seconds", text);
    }
    if (v < 0) {
        return cli_usage(ctx, "--offset-seconds must not be negative (got %s)", text);
    }
    *out = v;
    return CLI_OK;
}

/* Fills r from the rule flags. */
static int rule_flags(cli_ctx *ctx, const cli_args *a, rule_args *r)
{
    const char *v;
    unsigned years;
    int rv;

    memset(r, 0, sizeof *r);
    r->attribute = cli_flag(a, "--attribute");
    if (r->attribute != NULL && r->attribute[0] == '\0') {
        return cli_usage(ctx, "--attribute needs an attribute name");
    }
    if ((v = cli_flag(a, "--offset-seconds")) != NULL &&
        (rv = offset_arg(ctx, v, &r->offset_s)) != CLI_OK) {
        return rv;
    }
    if ((v = cli_flag(a, "--ignore-older-than-years")) != NULL) {
        if ((rv = cli_uint(ctx, "--ignore-older-than-years", v, &years)) != CLI_OK) {
            return rv;
        }
        if (years == 0) {
            return cli_usage(ctx, "--ignore-older-than-years must be at least 1");
        }
        r->guard_years = (int)years;
    }
    return CLI_OK;
}

static const struct {
    const char *flag;
    lapse_ttl_action action;
} action_flags[] = {
    {"--enable", LAPSE_TTL_ENABLE},
    {"--disable", LAPSE_TTL_DISABLE},
    {"--pause", LAPSE_TTL_PAUSE},
    {"--resume", LAPSE_TTL_RESUME},
};
#define NACTIONS (sizeof action_flags / sizeof action_flags[0])

int cli_update_ttl(cli_ctx *ctx, int argc, char **argv)
{
    static const char *const valued[] = {RULE_FLAGS, NULL};
    static const char *const switches[] = {"--enable", "--disable", "--pause", "--resume", NULL};
    lapse_ttl_spec spec = {0};
    lapse_error err;
    rule_args r;
    char *json = NULL;
    cli_args a;
    int rv, n = 0;

    if ((rv = cli_parse(ctx, argc, argv, 1, valued, switches, &a)) != CLI_OK ||
        (rv = rule_flags(ctx, &a, &r)) != CLI_OK) {
        return rv;
    }
    for (size_t i = 0; i < NACTIONS; i++) {
        if (cli_flag(&a, action_flags[i].flag) != NULL) {
            spec.action = action_flags[i].action;
            n++;
        }
    }
    if (n != 1) {
        return cli_usage(ctx, "give %s one of --enable, --disable, --pause, --resume",
                         n == 0 ? "exactly" : "only");
    }
    if (spec.action == LAPSE_TTL_ENABLE) {
        if (r.attribute == NULL) {
            return cli_usage(ctx, "--enable needs --attribute NAME");
        }
        spec.attribute = r.attribute;
        spec.offset_seconds = r.offset_s;
        spec.ignore_older_than_years = r.guard_years;
    } else if (cli_flag(&a, "--attribute") != NULL || cli_flag(&a, "--offset-seconds") != NULL ||
               cli_flag(&a, "--ignore-older-than-years") != NULL) {
        return cli_usage(ctx, "--attribute, --offset-seconds and --ignore-older-than-years go "
                              "with --enable only");
    }
    if ((rv = cli_connect(ctx)) != CLI_OK) {
        return rv;
    }
    if (lapse_update_ttl(ctx->c, a.pos[0], &spec, &json, &err) != 0) {
        return cli_fail(ctx, &err);
    }
    return cli_print(ctx, json);
}

int cli_describe_ttl(cli_ctx *ctx, int argc, char **argv)
{
    lapse_error err;
    char *json = NULL;
    cli_args a;
    int rv = cli_parse(ctx, argc, argv, 1, NULL, NULL, &a);
    if (rv != CLI_OK || (rv = cli_connect(ctx)) != CLI_OK) {
        return rv;
    }
    if (lapse_describe_ttl(ctx->c, a.pos[0], &json, &err) != 0) {
        return cli_fail(ctx, &err);
    }
    return cli_print(ctx, json);
}

int cli_ttl_preview(cli_ctx *ctx, int argc, char **argv)
{
    static const char *const valued[] = {RULE_FLAGS, NULL};
    lapse_ttl_preview_counts n;
    lapse_error err;
    rule_args r;
    cli_args a;
    int rv;

    if ((rv = cli_parse(ctx, argc, argv, 1, valued, NULL, &a)) != CLI_OK ||
        (rv = rule_flags(ctx, &a, &r)) != CLI_OK) {
        return rv;
    }
    if (r.attribute == NULL) {
        return cli_usage(ctx, "--attribute NAME is required");
    }
    if ((rv = cli_connect(ctx)) != CLI_OK) {
        return rv;
    }
    if (lapse_ttl_preview(ctx->c, a.pos[0], r.attribute, r.offset_s, r.guard_years, &n, &err) !=
        0) {
        return cli_fail(ctx, &err);
    }
    printf("{\"Items\":%" PRIu64 ",\"DueNow\":%" PRIu64 ",\"DueWithinHour\":%" PRIu64
           ",\"DueWithinDay\":%" PRIu64 ",\"DueLater\":%" PRIu64
           ",\"Ignored\":{\"Missing\":%" PRIu64 ",\"NotANumber\":%" PRIu64
           ",\"OlderThanGuard\":%" PRIu64 ",\"OutOfRange\":%" PRIu64 "}}\n",
           n.items, n.due_now, n.due_within_hour, n.due_within_day, n.due_later, n.missing,
           n.not_a_number, n.older_than_guard, n.out_of_range);
    return CLI_OK;
}
