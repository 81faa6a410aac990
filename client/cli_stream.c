/*
 * cli_stream.c: `lapse stream T`: a table's change stream as one DynamoDB
 * Streams JSON record per line (lapse_stream_record_to_json).
 *
 * The reader keeps a position per shard (the last sequence number read) and
 * works in rounds: each round reads every unfinished shard at once
 * (lapse_stream_read_many), merges what came back in order of
 * ApproximateCreationDateTime (milliseconds), then shard, keeping each
 * shard's own order, and prints it. Without --follow a shard is finished
 * when the reader reaches the shard's newest record as of the first round,
 * so the command ends even while writes go on. With --follow rounds go on
 * until SIGINT or SIGTERM; a round after an empty one long-polls, and only
 * one shard per host at a time, so a reader holds at most one request
 * handler of each node while it waits.
 *
 * Resuming: at exit the positions are printed on stderr as an --after
 * argument ("SHARD:SEQ,..."); passing it back continues after the last
 * record printed, with nothing missed or repeated (unless retention trimmed
 * records meanwhile, which is reported). --positions FILE keeps the same
 * text in FILE instead: read at start when FILE exists, rewritten after
 * every round that moved a position (once its records are flushed to
 * stdout) by writing FILE.tmp and renaming it over FILE, so FILE always
 * holds a whole list and a reader restarted by a service manager goes on
 * where it stopped without any quoting.
 */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define READ_LIMIT 1000
#define DEFAULT_WAIT_MS 1000
#define MAX_WAIT_MS 20000
#define RETRY_PAUSE_MS 1000

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* What the command line asked for. */
typedef struct stream_args {
    const char *table;
    int from_latest; /* --from latest: start after each shard's newest record */
    int follow;
    int only; /* 0: every record; 1: TTL deletes only; 2: user changes only */
    unsigned wait_ms;
    const char *after;     /* --after SHARD:SEQ,... (or FILE's text); NULL: none */
    const char *positions; /* --positions FILE; NULL: none */
} stream_args;

/* One shard's reading state. */
typedef struct shard_state {
    lapse_stream_shard where;
    uint64_t pos;    /* the last sequence number read (0: none) */
    uint64_t target; /* without --follow: stop once pos reaches it */
    int positioned;  /* pos comes from --after */
    int done;
} shard_state;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !stop_requested) {
    }
}

/* ------------------------------------------------------------------------ */
/* Flags                                                                    */
/* ------------------------------------------------------------------------ */

/* Parses --after's "SHARD:SEQ,..." (or --positions FILE's) into the
 * positions of the n shards s (s NULL: checks the shape only). CLI_USAGE
 * (reported) for a malformed list, a shard out of range or named twice. */
static int parse_after(cli_ctx *ctx, const stream_args *sa, const char *text, shard_state *s,
                       size_t n)
{
    const char *table = sa->table;
    const char *what = sa->positions != NULL ? "--positions" : "--after";
    const char *p = text;
    while (*p != '\0') {
        char *end;
        errno = 0;
        unsigned long long shard = strtoull(p, &end, 10);
        if (end == p || *p < '0' || *p > '9' || *end != ':' || errno != 0) {
            return cli_usage(ctx, "%s wants SHARD:SEQ[,SHARD:SEQ]..., not \"%s\"", what, text);
        }
        p = end + 1;
        unsigned long long seq = strtoull(p, &end, 10);
        if (end == p || *p < '0' || *p > '9' || (*end != ',' && *end != '\0') || errno != 0) {
            return cli_usage(ctx, "%s wants SHARD:SEQ[,SHARD:SEQ]..., not \"%s\"", what, text);
        }
        if (shard >= n) {
            return cli_usage(ctx, "%s: table \"%s\" has shards 0 to %zu, not %llu", what, table,
                             n - 1, shard);
        }
        if (s != NULL) {
            if (s[shard].positioned) {
                return cli_usage(ctx, "%s names shard %llu twice", what, shard);
            }
            s[shard].pos = (uint64_t)seq;
            s[shard].positioned = 1;
        }
        p = *end == ',' ? end + 1 : end;
        if (*end == ',' && *p == '\0') {
            return cli_usage(ctx, "%s: a trailing comma in \"%s\"", what, text);
        }
    }
    return CLI_OK;
}

/* Takes --positions FILE's list as sa->after when FILE exists and holds
 * one (a missing or empty FILE: start as --from says). The text stays in
 * ctx (cli_json_text). CLI_OK or CLI_USAGE (reported). */
static int read_positions(cli_ctx *ctx, stream_args *sa)
{
    char arg[4096 + 2];
    const char *text = NULL;
    if (snprintf(arg, sizeof arg, "@%s", sa->positions) >= (int)sizeof arg) {
        return cli_usage(ctx, "--positions: file name too long");
    }
    if (access(sa->positions, F_OK) != 0 && errno == ENOENT) {
        return CLI_OK;
    }
    int rv = cli_json_text(ctx, "--positions", arg, &text);
    if (rv != CLI_OK) {
        return rv;
    }
    /* The file as written below: the list and a newline. */
    char *nl = strchr(text, '\n');
    if (nl != NULL && nl[1] == '\0') {
        *nl = '\0';
    }
    if (text[0] != '\0') {
        sa->after = text;
    }
    return CLI_OK;
}

/* Checks the flags; everything here is found before connecting. */
static int parse_flags(cli_ctx *ctx, int argc, char **argv, stream_args *sa)
{
    static const char *const valued[] = {"--from",    "--only",      "--after",
                                         "--wait-ms", "--positions", NULL};
    static const char *const switches[] = {"--follow", NULL};
    cli_args a;
    int rv;

    if ((rv = cli_parse(ctx, argc, argv, 1, valued, switches, &a)) != CLI_OK) {
        return rv;
    }
    memset(sa, 0, sizeof *sa);
    sa->table = a.pos[0];
    sa->follow = cli_flag(&a, "--follow") != NULL;
    sa->wait_ms = DEFAULT_WAIT_MS;
    const char *v = cli_flag(&a, "--from");
    if (v != NULL) {
        if (strcmp(v, "latest") == 0) {
            sa->from_latest = 1;
        } else if (strcmp(v, "oldest") != 0) {
            return cli_usage(ctx, "--from wants oldest or latest, not \"%s\"", v);
        }
    }
    if ((v = cli_flag(&a, "--only")) != NULL) {
        if (strcmp(v, "ttl") == 0) {
            sa->only = 1;
        } else if (strcmp(v, "user") == 0) {
            sa->only = 2;
        } else {
            return cli_usage(ctx, "--only wants ttl or user, not \"%s\"", v);
        }
    }
    if ((v = cli_flag(&a, "--wait-ms")) != NULL) {
        if ((rv = cli_uint(ctx, "--wait-ms", v, &sa->wait_ms)) != CLI_OK) {
            return rv;
        }
        if (sa->wait_ms == 0 || sa->wait_ms > MAX_WAIT_MS) {
            return cli_usage(ctx, "--wait-ms wants 1 to %d, not %u", MAX_WAIT_MS, sa->wait_ms);
        }
        if (!sa->follow) {
            return cli_usage(ctx, "--wait-ms goes with --follow");
        }
    }
    sa->after = cli_flag(&a, "--after");
    if ((sa->positions = cli_flag(&a, "--positions")) != NULL) {
        if (sa->positions[0] == '\0') {
            return cli_usage(ctx, "--positions wants a file name");
        }
        if (sa->after != NULL) {
            return cli_usage(ctx, "--after and --positions exclude each other");
        }
        if ((rv = read_positions(ctx, sa)) != CLI_OK) {
            return rv;
        }
    }
    if (sa->after != NULL) {
        if (sa->after[0] == '\0') {
            return cli_usage(ctx, "--after wants SHARD:SEQ[,SHARD:SEQ]...");
        }
        /* The shape now; shard numbers once the shard count is known. */
        if ((rv = parse_after(ctx, sa, sa->after, NULL, SIZE_MAX)) != CLI_OK) {
            return rv;
        }
    }
    return CLI_OK;
}

/* ------------------------------------------------------------------------ */
/* Rounds                                                                   */
/* ------------------------------------------------------------------------ */

static int wanted(const stream_args *sa, const lapse_stream_record *r)
{
    return sa->only == 0 || (sa->only == 1) == (r->ttl_delete != 0);
}

/* Prints the records of a round's batches (b[k] for shard state s[idx[k]])
 * merged by creation time, then shard, each shard in its own order, and
 * advances the positions. */
static int print_round(cli_ctx *ctx, const stream_args *sa, shard_state *s, const size_t *idx,
                       lapse_stream_batch **b, size_t nb, size_t *printed)
{
    size_t *head = calloc(nb ? nb : 1, sizeof *head);
    if (head == NULL) {
        fprintf(stderr, "lapse: %s: out of memory\n", ctx->cmd);
        return CLI_ERROR;
    }
    for (;;) {
        const lapse_stream_record *best = NULL;
        size_t bk = 0;
        for (size_t k = 0; k < nb; k++) {
            const lapse_stream_record *r = lapse_stream_batch_record(b[k], head[k]);
            if (r != NULL &&
                (best == NULL || r->approximate_creation_ms < best->approximate_creation_ms ||
                 (r->approximate_creation_ms == best->approximate_creation_ms &&
                  r->shard < best->shard))) {
                best = r;
                bk = k;
            }
        }
        if (best == NULL) {
            break;
        }
        head[bk]++;
        s[idx[bk]].pos = best->sequence_number;
        if (wanted(sa, best)) {
            if (cli_print(ctx, lapse_stream_record_to_json(best)) != CLI_OK) {
                free(head);
                return CLI_ERROR;
            }
            (*printed)++;
        }
    }
    free(head);
    return CLI_OK;
}

/* Warns about records trimmed before this reader got to them. */
static void check_gap(cli_ctx *ctx, const shard_state *st, const lapse_stream_batch *b)
{
    const lapse_stream_record *first = lapse_stream_batch_record(b, 0);
    if (first != NULL && st->pos > 0 && first->sequence_number > st->pos + 1) {
        fprintf(stderr,
                "lapse: %s: shard %u: records %" PRIu64 " to %" PRIu64
                " are no longer kept (retention) and were skipped\n",
                ctx->cmd, (unsigned)st->where.shard, st->pos + 1, first->sequence_number - 1);
    }
}

/* The request of shard k this round: long-poll (wait) or not. */
static lapse_stream_request request_of(const shard_state *st, unsigned wait_ms)
{
    lapse_stream_request q = {
        .shard = st->where.shard, .after_seq = st->pos, .limit = READ_LIMIT, .wait_ms = wait_ms};
    return q;
}

/* Picks this round's shards into idx and their requests into q; returns how
 * many. With wait_ms, one shard per host (rotating with round) gets the
 * long poll, the rest are read at once. */
static size_t plan_round(shard_state *s, size_t n, unsigned wait_ms, uint64_t round, size_t *idx,
                         lapse_stream_request *q)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!s[i].done) {
            idx[m] = i;
            q[m] = request_of(&s[i], 0);
            m++;
        }
    }
    if (wait_ms == 0 || m == 0) {
        return m;
    }
    /* For each host, the (round mod count)-th of its shards waits. */
    for (size_t k = 0; k < m; k++) {
        uint32_t host = s[idx[k]].where.node_id;
        size_t count = 0, rank = 0;
        for (size_t j = 0; j < m; j++) {
            if (s[idx[j]].where.node_id == host) {
                rank += j < k;
                count++;
            }
        }
        if (rank == round % count) {
            q[k].wait_ms = wait_ms;
        }
    }
    return m;
}

static int transient(int code)
{
    return code == LAPSE_ETIMEDOUT || code == LAPSE_EUNAVAILABLE || code == LAPSE_EWRONGNODE;
}

/* ------------------------------------------------------------------------ */
/* The command                                                              */
/* ------------------------------------------------------------------------ */

/* Writes the positions as "SHARD:SEQ,..." (--after's form) to f. */
static void write_list(FILE *f, const shard_state *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s%u:%" PRIu64, i ? "," : "", (unsigned)s[i].where.shard, s[i].pos);
    }
}

/* Prints the resume argument on stderr. */
static void print_resume(cli_ctx *ctx, const stream_args *sa, const shard_state *s, size_t n)
{
    if (sa->positions != NULL) {
        fprintf(stderr, "lapse: %s: positions kept in %s; to resume, pass --positions %s\n",
                ctx->cmd, sa->positions, sa->positions);
        return;
    }
    fprintf(stderr, "lapse: %s: to resume, pass --after ", ctx->cmd);
    write_list(stderr, s, n);
    fputc('\n', stderr);
}

/* Replaces --positions FILE with the positions, atomically: FILE.tmp is
 * written, flushed to disk and renamed over FILE, so FILE holds the old
 * list or the new one, whole. stdout is flushed first, so FILE never
 * claims a record that was not written out. CLI_OK or CLI_ERROR
 * (reported; FILE is then unchanged). */
static int save_positions(cli_ctx *ctx, const stream_args *sa, const shard_state *s, size_t n)
{
    char tmp[4096 + 8];
    if (fflush(stdout) != 0) {
        fprintf(stderr, "lapse: %s: cannot write to stdout\n", ctx->cmd);
        return CLI_ERROR;
    }
    if (snprintf(tmp, sizeof tmp, "%s.tmp", sa->positions) >= (int)sizeof tmp) {
        fprintf(stderr, "lapse: %s: --positions: file name too long\n", ctx->cmd);
        return CLI_ERROR;
    }
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        fprintf(stderr, "lapse: %s: --positions: cannot write %s: %s\n", ctx->cmd, tmp,
                strerror(errno));
        return CLI_ERROR;
    }
    write_list(f, s, n);
    fputc('\n', f);
    int bad = fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0;
    int saved = errno;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, sa->positions) != 0) {
        saved = bad ? saved : errno;
        fprintf(stderr, "lapse: %s: --positions: cannot write %s: %s\n", ctx->cmd, sa->positions,
                strerror(saved));
        unlink(tmp);
        return CLI_ERROR;
    }
    return CLI_OK;
}

/* Sets the starting positions: --after's, else 0 or, with --from latest,
 * each shard's newest sequence number. */
static int position(cli_ctx *ctx, const stream_args *sa, shard_state *s, size_t n)
{
    lapse_error err;
    int rv;
    if (sa->after != NULL && (rv = parse_after(ctx, sa, sa->after, s, n)) != CLI_OK) {
        return rv;
    }
    if (!sa->from_latest) {
        return CLI_OK;
    }
    lapse_stream_request *q = calloc(n, sizeof *q);
    lapse_stream_batch **b = calloc(n, sizeof *b);
    size_t m = 0;
    rv = CLI_OK;
    if (q == NULL || b == NULL) {
        fprintf(stderr, "lapse: %s: out of memory\n", ctx->cmd);
        rv = CLI_ERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (!s[i].positioned) {
            q[m++] = (lapse_stream_request){.shard = s[i].where.shard, .limit = 1};
        }
    }
    if (lapse_stream_read_many(ctx->c, sa->table, q, m, b, &err) != 0) {
        rv = cli_fail(ctx, &err);
        goto out;
    }
    for (size_t k = 0; k < m; k++) {
        s[q[k].shard].pos = lapse_stream_batch_last_sequence(b[k]);
        lapse_stream_batch_free(b[k]);
    }
out:
    free(q);
    free(b);
    return rv;
}

/* Runs rounds until every shard is done (or, following, until a signal). */
static int run(cli_ctx *ctx, const stream_args *sa, shard_state *s, size_t n)
{
    size_t *idx = calloc(n, sizeof *idx);
    lapse_stream_request *q = calloc(n, sizeof *q);
    lapse_stream_batch **b = calloc(n, sizeof *b);
    size_t printed = 0;
    uint64_t round = 0;
    int idle = 0, first = 1, warned = 0;
    int rv = CLI_OK;
    lapse_error err;

    if (idx == NULL || q == NULL || b == NULL) {
        fprintf(stderr, "lapse: %s: out of memory\n", ctx->cmd);
        rv = CLI_ERROR;
        goto out;
    }
    while (!stop_requested) {
        size_t m = plan_round(s, n, sa->follow && idle ? sa->wait_ms : 0, round++, idx, q);
        if (m == 0) {
            break;
        }
        if (lapse_stream_read_many(ctx->c, sa->table, q, m, b, &err) != 0) {
            if (!sa->follow || !transient(err.code)) {
                rv = cli_fail(ctx, &err);
                break;
            }
            if (!warned) {
                fprintf(stderr, "lapse: %s: %s (retrying)\n", ctx->cmd, err.message);
                warned = 1;
            }
            sleep_ms(RETRY_PAUSE_MS);
            continue;
        }
        warned = 0;
        size_t got = 0;
        for (size_t k = 0; k < m; k++) {
            shard_state *st = &s[idx[k]];
            check_gap(ctx, st, b[k]);
            got += lapse_stream_batch_count(b[k]);
            if (first && !sa->follow) {
                st->target = lapse_stream_batch_last_sequence(b[k]);
            }
        }
        rv = print_round(ctx, sa, s, idx, b, m, &printed);
        for (size_t k = 0; k < m; k++) {
            shard_state *st = &s[idx[k]];
            /* Without --follow: done at the first round's newest record, or
             * when nothing more comes (records trimmed meanwhile). */
            if (!sa->follow && (st->pos >= st->target || lapse_stream_batch_count(b[k]) == 0)) {
                st->done = 1;
            }
            lapse_stream_batch_free(b[k]);
            b[k] = NULL;
        }
        if (rv == CLI_OK && sa->positions != NULL && got > 0) {
            rv = save_positions(ctx, sa, s, n);
        }
        if (rv != CLI_OK) {
            break;
        }
        if (sa->follow && fflush(stdout) != 0) {
            fprintf(stderr, "lapse: %s: cannot write to stdout\n", ctx->cmd);
            rv = CLI_ERROR;
            break;
        }
        first = 0;
        idle = got == 0;
    }
out:
    if (sa->positions != NULL && rv == CLI_OK) {
        rv = save_positions(ctx, sa, s, n); /* also when no round read anything */
    }
    print_resume(ctx, sa, s, n);
    free(idx);
    free(q);
    free(b);
    return rv;
}

int cli_stream(cli_ctx *ctx, int argc, char **argv)
{
    lapse_stream_shard *shards = NULL;
    shard_state *s = NULL;
    stream_args sa;
    lapse_error err;
    size_t n = 0;
    int rv;

    if ((rv = parse_flags(ctx, argc, argv, &sa)) != CLI_OK || (rv = cli_connect(ctx)) != CLI_OK) {
        return rv;
    }
    if (lapse_stream_shards(ctx->c, sa.table, &shards, &n, &err) != 0) {
        return cli_fail(ctx, &err);
    }
    if ((s = calloc(n ? n : 1, sizeof *s)) == NULL) {
        fprintf(stderr, "lapse: %s: out of memory\n", ctx->cmd);
        lapse_free(shards);
        return CLI_ERROR;
    }
    for (size_t i = 0; i < n; i++) {
        s[i].where = shards[i];
    }
    lapse_free(shards);
    if ((rv = position(ctx, &sa, s, n)) == CLI_OK) {
        if (sa.follow) {
            struct sigaction act;
            memset(&act, 0, sizeof act);
            act.sa_handler = on_signal;
            sigemptyset(&act.sa_mask);
            sigaction(SIGINT, &act, NULL);
            sigaction(SIGTERM, &act, NULL);
        }
        rv = run(ctx, &sa, s, n);
    }
    free(s);
    return rv;
}
