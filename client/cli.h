/*
 * cli.h: the lapse command-line tool, built on liblapse's public API only.
 *
 *   lapse [--coordinator URL[,URL...]] [--timeout-ms N] [--admin-token-file F] COMMAND ...
 *
 * Admin calls (create-table, delete-table, update-stream, update-ttl) send the token read
 * from --admin-token-file F (without its final newline, as the coordinator
 * reads it), else the one in
 * $LAPSE_ADMIN_TOKEN (read by lapse_connect).
 *
 * JSON goes to stdout, errors to stderr as "lapse: COMMAND: message".
 * Exit status: CLI_OK (0), CLI_ERROR (1: the call failed), CLI_USAGE (2: bad
 * command line, a short usage is printed).
 *
 * Single-threaded. Each command is a cli_* function taking the arguments
 * after the command name; cli_parse splits them into positionals and flags.
 */
#ifndef LAPSE_CLI_H
#define LAPSE_CLI_H

#include "lapse.h"

enum { CLI_OK = 0, CLI_ERROR = 1, CLI_USAGE = 2 };

#define CLI_MAX_POS 4
#define CLI_MAX_OPTS 256

typedef struct cli_opt {
    const char *name;  /* the flag, e.g. "--limit" */
    const char *value; /* its argument; NULL for a switch */
} cli_opt;

/* One command's parsed arguments. */
typedef struct cli_args {
    const char *pos[CLI_MAX_POS];
    int npos;
    cli_opt opt[CLI_MAX_OPTS]; /* in command-line order */
    int nopt;
} cli_args;

#define CLI_MAX_LOADED 16 /* arguments read from files (or stdin) per run */

typedef struct cli_ctx {
    const char *cmd;              /* the command's name, for messages; "lapse" before one */
    const char *url;              /* coordinator; NULL: $LAPSE_COORDINATOR or the default */
    int timeout_ms;               /* 0: the library's default */
    char *admin_token;            /* owned; from --admin-token-file; NULL: none given */
    lapse_client *c;              /* connected by cli_connect */
    char *loaded[CLI_MAX_LOADED]; /* owned; the texts cli_json_text read */
    int nloaded;
    int stdin_taken; /* an argument "-" has read stdin */
} cli_ctx;

/* A command: parses its own arguments and returns an exit status. */
typedef int (*cli_fn)(cli_ctx *ctx, int argc, char **argv);

/*
 * Splits argv into exactly npos positionals and flags. valued lists the
 * flags taking a value ("--limit N" or "--limit=N"), switches those without
 * (both NULL-terminated). The global flags are accepted here too. Returns
 * CLI_OK, CLI_USAGE (message and usage printed) or -1 after printing the
 * command's help for --help (the caller exits 0).
 */
int cli_parse(cli_ctx *ctx, int argc, char **argv, int npos, const char *const *valued,
              const char *const *switches, cli_args *out);
/* The last value of flag name, or NULL. */
const char *cli_flag(const cli_args *a, const char *name);
/* Prints "lapse: CMD: message" and the command's usage line (before a
 * command, "lapse: message" and the global usage line); returns
 * CLI_USAGE. */
int cli_usage(cli_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "lapse: CMD: <err's message>"; returns CLI_ERROR. */
int cli_fail(cli_ctx *ctx, const lapse_error *err);
/* Parses a non-negative decimal int for flag name; CLI_USAGE on error. */
int cli_uint(cli_ctx *ctx, const char *name, const char *text, unsigned *out);
/* Connects ctx->c and gives it ctx->admin_token. CLI_OK or CLI_ERROR
 * (reported). */
int cli_connect(cli_ctx *ctx);
/* The JSON text an argument stands for, as the aws CLI's file://: "-" is
 * stdin (read to its end, once per run), "@FILE" the contents of FILE,
 * anything else the argument itself. *out is borrowed from arg or from
 * ctx (freed by cli_ctx_fini). CLI_OK, or CLI_USAGE (reported, naming
 * what) when the file cannot be read, stdin is asked for twice, or the text
 * is over CLI_JSON_MAX bytes; *out is untouched on failure. */
#define CLI_JSON_MAX (16u * 1024 * 1024)
int cli_json_text(cli_ctx *ctx, const char *what, const char *arg, const char **out);
/* Parses an item argument (JSON text, "-" or "@FILE", see cli_json_text);
 * CLI_ERROR with a message naming what (e.g. "ITEM_JSON") on bad JSON,
 * CLI_USAGE when the text cannot be read. */
int cli_item_arg(cli_ctx *ctx, const char *what, const char *arg, lapse_item **out);
/* Frees what ctx owns (the admin token, loaded texts) and closes its
 * client. */
void cli_ctx_fini(cli_ctx *ctx);
/* Prints s and a newline to stdout, then frees s; CLI_ERROR on OOM (s NULL). */
int cli_print(cli_ctx *ctx, char *s);

/* The commands (cli_admin.c, cli_items.c, cli_scan.c, cli_stream.c, cli_ttl.c). */
int cli_cluster_status(cli_ctx *ctx, int argc, char **argv);
int cli_node(cli_ctx *ctx, int argc, char **argv);
int cli_rebalance(cli_ctx *ctx, int argc, char **argv);
int cli_create_table(cli_ctx *ctx, int argc, char **argv);
int cli_describe_table(cli_ctx *ctx, int argc, char **argv);
int cli_list_tables(cli_ctx *ctx, int argc, char **argv);
int cli_delete_table(cli_ctx *ctx, int argc, char **argv);
int cli_update_stream(cli_ctx *ctx, int argc, char **argv);
int cli_put(cli_ctx *ctx, int argc, char **argv);
int cli_get(cli_ctx *ctx, int argc, char **argv);
int cli_delete(cli_ctx *ctx, int argc, char **argv);
int cli_update(cli_ctx *ctx, int argc, char **argv);
int cli_query(cli_ctx *ctx, int argc, char **argv);
int cli_scan(cli_ctx *ctx, int argc, char **argv);
int cli_batch_put(cli_ctx *ctx, int argc, char **argv);
int cli_stream(cli_ctx *ctx, int argc, char **argv);
int cli_update_ttl(cli_ctx *ctx, int argc, char **argv);
int cli_describe_ttl(cli_ctx *ctx, int argc, char **argv);
int cli_ttl_preview(cli_ctx *ctx, int argc, char **argv);

#endif
