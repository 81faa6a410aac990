/*
 * cli.c: the lapse CLI's entry point: global flags, the command table, usage
 * and help, argument parsing and the helpers every command shares.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cli_command {
    const char *name;
    cli_fn fn;
    const char *synopsis; /* arguments after the name */
    const char *help;     /* one paragraph for COMMAND --help */
} cli_command;

static const cli_command commands[] = {
    {"cluster-status", cli_cluster_status, "",
     "Prints the partition map version, the table count and every node's state as JSON."},
    {"node", cli_node, "drain N [--stop] | remove N [--lose-data]",
     "drain: the coordinator moves the copies node N holds of replicated tables'\n"
     "partitions to other nodes, a few at a time (each copy added elsewhere, caught up and\n"
     "in sync before N's goes; N's primaryships handed over), and places no new table on\n"
     "it; GSI partition and stream shard copies move too (filled on their new node before\n"
     "they are read). Prints {\"NodeId\",\"Draining\",\"BaseCopiesLeft\",\"DerivedCopiesLeft\",\n"
     "\"Moves\",\"OtherCopies\",...} at once: run it again to follow the drain, done when\n"
     "BaseCopiesLeft and DerivedCopiesLeft are 0. OtherCopies wait (single-copy tables'\n"
     "partitions while N is down: their data is nowhere else). --stop ends the drain\n"
     "(copies already moved stay moved).\n"
     "remove: for a dead (DOWN) node: the coordinator makes each copy N held anew on the\n"
     "other nodes from the surviving copies, then drops N's from its sets; N is refused if\n"
     "it comes back (start it under a new id on an empty data dir). Prints\n"
     "{\"NodeId\",\"Removed\",\"BaseCopiesLeft\",...} as drain; it cannot be undone.\n"
     "It is refused while N holds the only copy of a one-copy table's partition, GSI\n"
     "partition or stream shard (start N again and drain it instead); --lose-data removes it\n"
     "anyway: those copies are lost (\"LostCopies\"), the table's calls for their keys fail\n"
     "from then on, and its GSI partitions and stream shards no longer move: drop the table.\n"
     "Both are admin calls: they send the admin token."},
    {"rebalance", cli_rebalance, "--dry-run",
     "Prints the moves the coordinator's rebalancer would make now to bring every node\n"
     "within one of the others' count of copies of replicated tables' partitions (Kind\n"
     "\"move\") or, once they are and the coordinators balance primaries (their\n"
     "--balance-primaries, on by default), the\n"
     "handovers that bring its count of primaries within one of the others' (Kind\n"
     "\"handover\": From leads, To follows, no copy moves):\n"
     "{\"Moves\":[{\"Kind\",\"Table\",\"Partition\",\"From\",\"To\"}],\"Moving\":N,...}.\n"
     "The coordinator makes them on its own, a few at a time, while every node is UP and\n"
     "none drains (a node that joins gets its share of the older tables so); [] means\n"
     "balanced."},
    {"create-table", cli_create_table,
     "T --partition-key NAME:S|N|B [--sort-key NAME:S|N|B] [--partitions N]\n"
     "             [--replication 1|2|3] [--hide-expired] [--lsi NAME=SK:TYPE]...\n"
     "             [--gsi NAME=PK:TYPE[,SK:TYPE][,projection=all|keys][,partitions=N]]...\n"
     "             [--stream on|off [--stream-retention-hours H] [--stream-ttl-deletes on|off]\n"
     "                              [--stream-view-type VIEW]]",
     "Creates table T (partitions: a power of two, default 64) and prints its description.\n"
     "--replication N keeps N copies of each partition on N distinct nodes (default 1):\n"
     "every write is acknowledged once each copy has it durably.\n"
     "With --hide-expired, reads of T hide items whose TTL has passed by default.\n"
     "Indexes are declared here and never change (up to 5 LSIs and 20 GSIs, names unique):\n"
     "--lsi: a local secondary index on T's partition key and sort key SK (T needs a\n"
     "  sort key); it projects the whole item.\n"
     "--gsi: a global secondary index with its own partition key PK, optional sort key SK,\n"
     "  projection all (default) or keys (T's keys, the index's keys and the TTL\n"
     "  attribute), and its own partitions (a power of two, default T's).\n"
     "--stream on: a change stream of every write, one shard per partition, kept H hours\n"
     "  (1-8760, default 24); --stream-ttl-deletes off leaves TTL deletes out of it.\n"
     "  --stream-view-type: what a record shows of the item, NEW_AND_OLD_IMAGES (default),\n"
     "  KEYS_ONLY, NEW_IMAGE or OLD_IMAGE, as DynamoDB's StreamViewType.\n"
     "TYPE is S, N or B. An admin call: sends the admin token."},
    {"describe-table", cli_describe_table, "T",
     "Prints table T's description as JSON, with its indexes (LocalSecondaryIndexes,\n"
     "GlobalSecondaryIndexes), its StreamSpecification and the node of each stream shard."},
    {"list-tables", cli_list_tables, "", "Prints {\"TableNames\":[...]}."},
    {"update-stream", cli_update_stream, "T --on [--stream-view-type VIEW] | --off",
     "Turns T's change stream on or off after create-table and prints T's description.\n"
     "--on: a new stream (StreamSpecification's Generation one more than the last), with\n"
     "  VIEW NEW_AND_OLD_IMAGES (default), KEYS_ONLY, NEW_IMAGE or OLD_IMAGE; it holds only\n"
     "  the writes made from now, and never an earlier stream's records.\n"
     "--off: the stream is gone at once and its records are dropped.\n"
     "An admin call: sends the admin token."},
    {"delete-table", cli_delete_table, "T",
     "Deletes table T and all its items and prints\n"
     "{\"TableDescription\":{\"TableName\":\"T\",\"TableStatus\":\"DELETED\"}}.\n"
     "An admin call: sends the admin token."},
    {"put", cli_put, "T ITEM_JSON [--if-not-exists NAME | --if-exists NAME | --if NAME=VALUE_JSON]",
     "Writes the DynamoDB-JSON item, replacing any item with the same key, optionally only\n"
     "when the condition holds. Prints nothing. ITEM_JSON - reads the item from stdin,\n"
     "@FILE from FILE (as any KEY_JSON or VALUE_JSON): for items too long for a command line."},
    {"get", cli_get, "T KEY_JSON [--hide-expired] [--eventually-consistent]",
     "Prints the item with the key, or {} when there is none. With --hide-expired, an item\n"
     "whose TTL has passed (expired, not deleted yet) counts as none. Reads are strongly\n"
     "consistent (the partition's primary answers); with --eventually-consistent any\n"
     "in-sync copy may (DynamoDB's ConsistentRead=false), which spreads reads over them."},
    {"delete", cli_delete,
     "T KEY_JSON [--if-not-exists NAME | --if-exists NAME | --if NAME=VALUE_JSON]",
     "Deletes the item with the key (no error when there is none). Prints nothing."},
    {"update", cli_update,
     "T KEY_JSON [--set NAME=VALUE_JSON]... [--remove NAME]...\n"
     "             [--if-not-exists NAME | --if-exists NAME | --if NAME=VALUE_JSON]",
     "Sets and removes attributes of the item with the key (creating it if needed)\n"
     "and prints the item after the update."},
    {"query", cli_query,
     "T [--index NAME] --key PK_JSON [--sk-op eq|lt|le|gt|ge|between|begins_with\n"
     "             --sk VALUE_JSON [--sk2 VALUE_JSON]] [--limit N] [--reverse] [--hide-expired]\n"
     "             [--eventually-consistent]",
     "Prints the items with the partition key, one per line, in sort key order.\n"
     "PK_JSON is e.g. {\"UserName\":{\"S\":\"user1\"}}; VALUE_JSON e.g. {\"N\":\"5\"}.\n"
     "--index NAME queries T's LSI or GSI NAME instead: PK_JSON names the index's partition\n"
     "  key (an LSI's is T's), the sort key condition is on the index's sort key, and items\n"
     "  come in index order. A GSI is eventually consistent: a write shows shortly after.\n"
     "--hide-expired leaves out items whose TTL has passed. --eventually-consistent: as get's."},
    {"scan", cli_scan, "T [--limit N] [--hide-expired] [--eventually-consistent]",
     "Prints every item of T (up to N, at least 1), one per line. --hide-expired leaves out\n"
     "items whose TTL has passed; --eventually-consistent: as get's. When a node does not\n"
     "answer, prints what the others hold, then names the partitions it could not read and\n"
     "their node, and exits 1."},
    {"stream", cli_stream,
     "T [--from oldest|latest] [--after SHARD:SEQ[,SHARD:SEQ]... | --positions FILE]\n"
     "             [--only ttl|user] [--follow [--wait-ms N]]",
     "Prints T's change stream (T created with --stream on), one DynamoDB Streams JSON\n"
     "record per line: eventID, eventName (INSERT, MODIFY, REMOVE), dynamodb (Keys,\n"
     "OldImage, NewImage, SequenceNumber, ApproximateCreationDateTime in epoch seconds,\n"
     "SizeBytes), shard, and for TTL deletes userIdentity {\"type\":\"Service\",\n"
     "\"principalId\":\"lapse.ttl\"} and ttl {attribute, expiresAt, deletedAt in epoch ms}.\n"
     "Every shard is read and the records merged by creation time (each shard in order).\n"
     "--from oldest (default) starts at each shard's oldest kept record, latest after its\n"
     "  newest; --after starts the listed shards after SEQ (the others as --from says).\n"
     "--only ttl prints TTL deletes only, --only user everything else.\n"
     "Without --follow: prints what is there now and exits. --follow: keeps reading (a\n"
     "  round after an empty one waits up to N ms, default 1000) until SIGINT or SIGTERM,\n"
     "  then exits 0. At exit the position is printed on stderr as an --after argument:\n"
     "  pass it back to resume after the last record printed.\n"
     "--positions FILE keeps that list in FILE instead: read at start when FILE exists\n"
     "  (else --from applies), rewritten atomically (FILE.tmp, then a rename) after each\n"
     "  round that printed records, so a restarted reader goes on where it stopped."},
    {"batch-put", cli_batch_put, "T",
     "Reads DynamoDB-JSON items, one per line, from stdin and writes them in batches.\n"
     "Blank lines are skipped; a bad line stops the load with its line number."},
    {"update-ttl", cli_update_ttl,
     "T --enable --attribute NAME [--offset-seconds N] [--ignore-older-than-years Y]\n"
     "             | --disable | --pause | --resume",
     "Changes T's time to live (exactly one action) and prints the TTL description.\n"
     "--enable: items expire when their top-level N attribute NAME (epoch seconds) + N\n"
     "  seconds (default 0) is before now; values more than Y years (default 5) old are\n"
     "  ignored. The attribute cannot change while enabled: disable first.\n"
     "--disable: stop expiring and drop the expiry index.\n"
     "--pause / --resume: stop and restart deletion, keeping the config (still ENABLED).\n"
     "An admin call: sends the admin token."},
    {"describe-ttl", cli_describe_ttl, "T",
     "Prints T's TTL description as JSON: DynamoDB's TimeToLiveDescription (status\n"
     "ENABLING, ENABLED, DISABLING or DISABLED, and the attribute), the offset, the guard,\n"
     "whether paused, and Propagation: the config version and, per node holding T's\n"
     "partitions, the version it applied and its backfill progress."},
    {"ttl-preview", cli_ttl_preview,
     "T --attribute NAME [--offset-seconds N] [--ignore-older-than-years Y]",
     "A dry run: counts T's items that the rule would find due now, within an hour,\n"
     "within a day or later, and those it would ignore and why. Deletes nothing;\n"
     "safe on a live table."},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

/* ------------------------------------------------------------------------ */
/* Usage and help                                                            */
/* ------------------------------------------------------------------------ */

#define GLOBAL_SYNOPSIS                                                                            \
    "[--coordinator URL[,URL...]] [--timeout-ms N] [--admin-token-file F] COMMAND ..."

static void print_usage(FILE *f)
{
    fprintf(f,
            "usage: lapse " GLOBAL_SYNOPSIS "\n"
            "  (default coordinator: $LAPSE_COORDINATOR, else %s;\n"
            "   admin token for create-table, delete-table, update-stream, update-ttl: the "
            "contents of F\n"
            "   without its final newline, else $LAPSE_ADMIN_TOKEN;\n"
            "   the last partition map, for item calls while no coordinator answers:\n"
            "   $LAPSE_MAP_CACHE, else ~/.cache/lapse/map-<hash of the URL>, \"\" for none)\n"
            "\ncommands:\n",
            LAPSE_DEFAULT_COORDINATOR);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        fprintf(f, "  %s%s%s\n", commands[i].name, commands[i].synopsis[0] ? " " : "",
                commands[i].synopsis);
    }
    fprintf(f,
            "\nAny ITEM_JSON, KEY_JSON, PK_JSON or VALUE_JSON may be given as - (read from stdin)\n"
            "or @FILE (read from FILE), as for items longer than a command line allows.\n"
            "lapse COMMAND --help describes a command. Exit status: 0 ok, 1 error, 2 usage.\n");
}

static const cli_command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(commands[i].name, name) == 0) {
            return &commands[i];
        }
    }
    return NULL;
}

/* "lapse: " and, inside a command, "CMD: ", on stderr: before a command
 * (ctx->cmd is "lapse" then) the program's name alone. */
static void print_prefix(const cli_ctx *ctx)
{
    if (find_command(ctx->cmd) != NULL) {
        fprintf(stderr, "lapse: %s: ", ctx->cmd);
    } else {
        fputs("lapse: ", stderr);
    }
}

/* Prints the prefix, the message and a newline on stderr. */
static void __attribute__((format(printf, 2, 3))) say(const cli_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    print_prefix(ctx);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int cli_usage(cli_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    const cli_command *cmd = find_command(ctx->cmd);
    print_prefix(ctx);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (cmd != NULL) {
        fprintf(stderr, "\nusage: lapse %s %s\n", cmd->name, cmd->synopsis);
    } else {
        fprintf(stderr, "\nusage: lapse " GLOBAL_SYNOPSIS "\n(lapse --help lists the commands)\n");
    }
    return CLI_USAGE;
}

int cli_fail(cli_ctx *ctx, const lapse_error *err)
{
    fprintf(stderr, "lapse: %s: %s%s\n", ctx->cmd,
            err->message[0] ? err->message : lapse_strerror(err->code),
            err->code != LAPSE_EPERM ? ""
            : ctx->admin_token != NULL
                ? " (the token given with --admin-token-file)"
                : " (give the token with --admin-token-file F or $LAPSE_ADMIN_TOKEN)");
    return CLI_ERROR;
}

/* ------------------------------------------------------------------------ */
/* Argument parsing                                                          */
/* ------------------------------------------------------------------------ */

static int in_list(const char *const *list, const char *name, size_t len)
{
    for (; list != NULL && *list != NULL; list++) {
        if (strlen(*list) == len && strncmp(*list, name, len) == 0) {
            return 1;
        }
    }
    return 0;
}

static const char *const global_flags[] = {"--coordinator", "--timeout-ms", "--admin-token-file",
                                           NULL};

#define TOKEN_MAX 4096

/* Reads the admin token from path into ctx->admin_token: the file's text
 * without one final newline, exactly as lapse-coordinator reads its
 * --admin-token-file, so one file serves both. CLI_USAGE (reported) when it
 * cannot be read, is empty or too long, or holds a NUL byte. */
static int read_token(cli_ctx *ctx, const char *path)
{
    char buf[TOKEN_MAX + 1];
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        say(ctx, "--admin-token-file %s: %s", path, strerror(errno));
        return CLI_USAGE;
    }
    size_t n = fread(buf, 1, sizeof buf, f);
    int failed = ferror(f), saved = errno;
    fclose(f);
    if (failed) {
        say(ctx, "--admin-token-file %s: %s", path, strerror(saved));
        return CLI_USAGE;
    }
    if (n > TOKEN_MAX) {
        say(ctx, "--admin-token-file %s: longer than %d bytes", path, TOKEN_MAX);
        return CLI_USAGE;
    }
    if (n > 0 && buf[n - 1] == '\n') {
        n--;
    }
    buf[n] = '\0';
    if (n == 0 || strlen(buf) != n) {
        say(ctx, "--admin-token-file %s: %s", path,
            n == 0 ? "the file is empty" : "the token contains a NUL byte");
        return CLI_USAGE;
    }
    char *copy = strdup(buf);
    if (copy == NULL) {
        say(ctx, "out of memory");
        return CLI_ERROR;
    }
    free(ctx->admin_token);
    ctx->admin_token = copy;
    return CLI_OK;
}

static int set_global(cli_ctx *ctx, const char *name, const char *value)
{
    if (strcmp(name, "--coordinator") == 0) {
        if (value[0] == '\0') {
            return cli_usage(ctx, "--coordinator wants a URL, e.g. %s", LAPSE_DEFAULT_COORDINATOR);
        }
        ctx->url = value;
        return CLI_OK;
    }
    if (strcmp(name, "--admin-token-file") == 0) {
        return read_token(ctx, value);
    }
    unsigned ms = 0;
    int rv = cli_uint(ctx, name, value, &ms);
    if (rv != CLI_OK) {
        return rv;
    }
    if (ms == 0) {
        return cli_usage(ctx, "--timeout-ms must be positive");
    }
    ctx->timeout_ms = (int)ms;
    return CLI_OK;
}

int cli_parse(cli_ctx *ctx, int argc, char **argv, int npos, const char *const *valued,
              const char *const *switches, cli_args *out)
{
    int only_pos = 0;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (only_pos || arg[0] != '-' || arg[1] == '\0') {
            if (out->npos >= npos) {
                return cli_usage(ctx, "unexpected argument \"%s\"", arg);
            }
            out->pos[out->npos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            const cli_command *cmd = find_command(ctx->cmd);
            printf("usage: lapse %s %s\n\n%s\n", ctx->cmd, cmd->synopsis, cmd->help);
            return -1;
        }
        const char *eq = strchr(arg, '=');
        size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
        int is_global = in_list(global_flags, arg, len);
        if (is_global || in_list(valued, arg, len)) {
            const char *value = eq != NULL ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (value == NULL) {
                return cli_usage(ctx, "%s needs a value", arg);
            }
            if (is_global) {
                char name[32];
                snprintf(name, sizeof name, "%.*s", (int)len, arg);
                int rv = set_global(ctx, name, value);
                if (rv != CLI_OK) {
                    return rv;
                }
                continue;
            }
            if (out->nopt == CLI_MAX_OPTS) {
                return cli_usage(ctx, "too many flags");
            }
            out->opt[out->nopt].name = arg;
            out->opt[out->nopt].value = value;
            /* Keep just the flag's name for lookups. */
            if (eq != NULL) {
                static char names[CLI_MAX_OPTS][64];
                snprintf(names[out->nopt], sizeof names[0], "%.*s", (int)len, arg);
                out->opt[out->nopt].name = names[out->nopt];
            }
            out->nopt++;
        } else if (eq == NULL && in_list(switches, arg, len)) {
            if (out->nopt == CLI_MAX_OPTS) {
                return cli_usage(ctx, "too many flags");
            }
            out->opt[out->nopt].name = arg;
            out->opt[out->nopt].value = NULL;
            out->nopt++;
        } else {
            return cli_usage(ctx, "unknown flag \"%s\"", arg);
        }
    }
    if (out->npos < npos) {
        return cli_usage(ctx, "missing argument%s", npos - out->npos > 1 ? "s" : "");
    }
    return CLI_OK;
}

const char *cli_flag(const cli_args *a, const char *name)
{
    const char *v = NULL;
    for (int i = 0; i < a->nopt; i++) {
        if (strcmp(a->opt[i].name, name) == 0) {
            v = a->opt[i].value != NULL ? a->opt[i].value : "";
        }
    }
    return v;
}

int cli_uint(cli_ctx *ctx, const char *name, const char *text, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || v > 0x7fffffffUL) {
        return cli_usage(ctx, "%s: \"%s\" is not a non-negative integer", name, text);
    }
    *out = (unsigned)v;
    return CLI_OK;
}

/* ------------------------------------------------------------------------ */
/* Shared helpers                                                            */
/* ------------------------------------------------------------------------ */

/* The map cache file of the coordinator URL the CLI uses: $LAPSE_MAP_CACHE
 * when set ("" for none), else one file per URL under $XDG_CACHE_HOME/lapse
 * (~/.cache/lapse), so runs against different clusters never share one. */
static const char *map_cache_path(const cli_ctx *ctx, char *out, size_t len)
{
    const char *env = getenv("LAPSE_MAP_CACHE");
    if (env != NULL) {
        return env;
    }
    const char *url = ctx->url;
    if (url == NULL || url[0] == '\0') {
        url = getenv("LAPSE_COORDINATOR");
    }
    if (url == NULL || url[0] == '\0') {
        url = LAPSE_DEFAULT_COORDINATOR;
    }
    uint64_t h = 14695981039346656037ULL; /* FNV-1a: a name, not a check */
    for (const char *p = url; *p != '\0'; p++) {
        h = (h ^ (uint8_t)*p) * 1099511628211ULL;
    }
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg != NULL && xdg[0] == '/') {
        snprintf(out, len, "%s/lapse/map-%016llx", xdg, (unsigned long long)h);
    } else if (home != NULL && home[0] == '/') {
        snprintf(out, len, "%s/.cache/lapse/map-%016llx", home, (unsigned long long)h);
    } else {
        return NULL;
    }
    return out;
}

int cli_connect(cli_ctx *ctx)
{
    lapse_error err;
    char cache[4096];
    lapse_connect_options o = {.timeout_ms = ctx->timeout_ms,
                               .map_cache = map_cache_path(ctx, cache, sizeof(cache))};
    if (lapse_connect_opts(&ctx->c, ctx->url, &o, &err) != 0) {
        return cli_fail(ctx, &err);
    }
    if (ctx->admin_token != NULL) {
        lapse_set_admin_token(ctx->c, ctx->admin_token);
    }
    return CLI_OK;
}

/* Reads f to its end into a new NUL-terminated buffer (caller frees),
 * refusing more than CLI_JSON_MAX bytes. 0, or an errno value (EFBIG: too
 * long; EINVAL: holds a NUL byte). */
static int slurp(FILE *f, char **out)
{
    size_t len = 0, cap = 0;
    char *buf = NULL;
    for (;;) {
        if (cap - len < 4096 + 1) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, ncap);
            if (nb == NULL) {
                free(buf);
                return ENOMEM;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (len > CLI_JSON_MAX) {
            free(buf);
            return EFBIG;
        }
        if (got == 0) {
            break;
        }
    }
    if (ferror(f)) {
        int saved = errno != 0 ? errno : EIO;
        free(buf);
        return saved;
    }
    buf[len] = '\0';
    if (strlen(buf) != len) {
        free(buf);
        return EINVAL;
    }
    *out = buf;
    return 0;
}

int cli_json_text(cli_ctx *ctx, const char *what, const char *arg, const char **out)
{
    int from_stdin = strcmp(arg, "-") == 0;
    if (!from_stdin && arg[0] != '@') {
        *out = arg;
        return CLI_OK;
    }
    const char *path = from_stdin ? "stdin" : arg + 1;
    if (from_stdin && ctx->stdin_taken) {
        return cli_usage(ctx, "%s: stdin (\"-\") can be read only once", what);
    }
    if (!from_stdin && path[0] == '\0') {
        return cli_usage(ctx, "%s: \"@\" wants a file name, e.g. @item.json", what);
    }
    if (ctx->nloaded == CLI_MAX_LOADED) {
        return cli_usage(ctx, "%s: more than %d arguments read from files", what, CLI_MAX_LOADED);
    }
    FILE *f = from_stdin ? stdin : fopen(path, "r");
    char *text = NULL;
    int e = f != NULL ? slurp(f, &text) : errno;
    if (f != NULL && !from_stdin) {
        fclose(f);
    }
    ctx->stdin_taken |= from_stdin;
    if (e != 0) {
        say(ctx, "%s: cannot read %s: %s", what, path,
            e == EFBIG    ? "longer than 16 MiB"
            : e == EINVAL ? "it holds a NUL byte, not JSON text"
                          : strerror(e));
        return CLI_USAGE;
    }
    ctx->loaded[ctx->nloaded++] = text;
    *out = text;
    return CLI_OK;
}

int cli_item_arg(cli_ctx *ctx, const char *what, const char *arg, lapse_item **out)
{
    lapse_error err;
    const char *json = NULL;
    int rv = cli_json_text(ctx, what, arg, &json);
    if (rv != CLI_OK) {
        return rv;
    }
    if (lapse_item_from_json(out, json, &err) != 0) {
        say(ctx, "%s: %s", what, err.message);
        return CLI_ERROR;
    }
    return CLI_OK;
}

void cli_ctx_fini(cli_ctx *ctx)
{
    lapse_close(ctx->c);
    ctx->c = NULL;
    free(ctx->admin_token);
    ctx->admin_token = NULL;
    for (int i = 0; i < ctx->nloaded; i++) {
        free(ctx->loaded[i]);
    }
    ctx->nloaded = 0;
}

int cli_print(cli_ctx *ctx, char *s)
{
    if (s == NULL) {
        fprintf(stderr, "lapse: %s: out of memory\n", ctx->cmd);
        return CLI_ERROR;
    }
    fputs(s, stdout);
    fputc('\n', stdout);
    lapse_free(s);
    return CLI_OK;
}

/* ------------------------------------------------------------------------ */
/* main                                                                      */
/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    cli_ctx ctx = {.cmd = "lapse"};
    int i = 1;

    /* Global flags before the command. */
    while (i < argc && argv[i][0] == '-') {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_usage(stdout);
            return CLI_OK;
        }
        const char *eq = strchr(arg, '=');
        size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
        if (!in_list(global_flags, arg, len)) {
            cli_ctx_fini(&ctx);
            return cli_usage(&ctx, "unknown flag \"%s\"", arg);
        }
        const char *value = eq != NULL ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (value == NULL) {
            cli_ctx_fini(&ctx);
            return cli_usage(&ctx, "%s needs a value", arg);
        }
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)len, arg);
        int rv = set_global(&ctx, name, value);
        if (rv != CLI_OK) {
            cli_ctx_fini(&ctx);
            return rv;
        }
        i++;
    }
    if (i >= argc) {
        fprintf(stderr, "lapse: no command given\n");
        print_usage(stderr);
        cli_ctx_fini(&ctx);
        return CLI_USAGE;
    }
    const cli_command *cmd = find_command(argv[i]);
    if (cmd == NULL) {
        fprintf(stderr, "lapse: unknown command \"%s\"\n", argv[i]);
        print_usage(stderr);
        cli_ctx_fini(&ctx);
        return CLI_USAGE;
    }
    ctx.cmd = cmd->name;
    int rv = cmd->fn(&ctx, argc - i - 1, argv + i + 1);
    cli_ctx_fini(&ctx);
    if (rv < 0) {
        rv = CLI_OK; /* --help */
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "lapse: %s: cannot write to stdout\n", ctx.cmd);
        rv = rv == CLI_OK ? CLI_ERROR : rv;
    }
    return rv;
}
