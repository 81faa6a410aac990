/*
 * main.c: lapse-coordinator: flags, signals and the process lifecycle.
 *
 *   lapse-coordinator --listen URL --data DIR [--heartbeat-timeout-ms N]
 *                     [--admin-token-file F] [--log-level LEVEL] [--help]
 *   lapse-coordinator --listen URL --etcd URL[,URL...] [--cluster-name NAME]
 *                     [--import-catalog DIR] [flags]   (state in etcd; any
 *                     number of coordinators, one leads: leader.h)
 *   lapse-coordinator --config FILE [flags]   (FILE: "key = value" lines,
 *                     common/config.h; a flag on the command line wins)
 *
 * Exit status: 0 after a clean shutdown (SIGTERM or SIGINT), 1 when the data
 * dir is unusable, the address cannot be listened on or the admin token file
 * is missing, unreadable or empty, 2 on a bad flag.
 *
 * SIGTERM/SIGINT are blocked in every thread (threads inherit the mask set
 * before any is created) and delivered only while the main thread waits in
 * sigsuspend, whose handler just sets a volatile sig_atomic_t flag.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/config.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../common/stopsig.h"
#include "../common/token.h"
#include "leader.h"
#include "mover.h"
#include "server.h"

#define DEFAULT_LISTEN "tcp://127.0.0.1:7400"
#define DEFAULT_HEARTBEAT_TIMEOUT_MS 3000
#define PUSH_TIMEOUT_MS 1000
#define MAX_ADMIN_TOKEN_BYTES 4096
#define DEFAULT_CLUSTER "lapse"

static volatile sig_atomic_t stop_requested; /* set by on_signal, read by main */
static volatile sig_atomic_t stop_signal;    /* which signal asked, for the log */
static config_argv g_args; /* --config's settings, then argv; flags point into it */

static void on_signal(int sig)
{
    stop_signal = sig;
    stop_requested = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: lapse-coordinator --data DIR [--listen URL] [--heartbeat-timeout-ms N]\n"
            "                         [--admin-token-file F]\n"
            "                         [--log-level debug|info|warn|error] [--help]\n"
            "       lapse-coordinator --etcd URL[,URL...] [--cluster-name NAME]\n"
            "                         [--import-catalog DIR] [--listen URL] [flags]\n"
            "       lapse-coordinator --config FILE [flags]\n"
            "\n"
            "  --config FILE              read settings from FILE, lines 'key = value' with\n"
            "                             the flags below as keys (listen = tcp://...);\n"
            "                             a flag on the command line wins\n"
            "  --listen URL               RPC address (default " DEFAULT_LISTEN ")\n"
            "  --data DIR                 data directory of the coordinator's own catalog (one\n"
            "                             coordinator; required unless --etcd)\n"
            "  --etcd URL[,URL...]        keep the catalog in etcd (its members' client URLs,\n"
            "                             http://HOST:PORT): run any number of coordinators,\n"
            "                             one leads, the others forward to it\n"
            "  --cluster-name NAME        with --etcd: the cluster's keys live under\n"
            "                             /lapse/NAME/ (default " DEFAULT_CLUSTER ")\n"
            "  --import-catalog DIR       with --etcd: copy the catalog of a coordinator's\n"
            "                             --data DIR into etcd, unless the cluster has one\n"
            "  --heartbeat-timeout-ms N   mark a node DOWN after N ms without a heartbeat\n"
            "                             (default %d)\n"
            "  --default-replication N    copies of each partition (1 to 3) of a table whose\n"
            "                             create-table names none, at most the nodes up\n"
            "                             then (default 1)\n"
            "  --max-concurrent-moves N   sets the leader moves copies of at once, for drains,\n"
            "                             removals and rebalancing, and primaryships it hands\n"
            "                             over per pass (1 to 64, default %d)\n"
            "  --balance-primaries N      hand at most N primaryships over per pass so every\n"
            "                             node leads within one of the others' sets, once\n"
            "                             copies are even (0 to 64, 0: off; default %d)\n"
            "  --admin-token-file F       CreateTable, DeleteTable and UpdateTimeToLive require\n"
            "                             the token in F (one trailing newline is stripped)\n"
            "  --log-level LEVEL          lowest level logged on stderr (default info)\n"
            "  --help                     print this and exit\n",
            DEFAULT_HEARTBEAT_TIMEOUT_MS, MOVER_MAX_CONCURRENT, MOVER_BALANCE_PRIMARIES);
}

typedef struct flags {
    const char *listen;           /* --listen */
    const char *data;             /* --data */
    int64_t heartbeat_timeout_ms; /* --heartbeat-timeout-ms */
    enum log_level level;         /* --log-level */
    const char *admin_token_file; /* --admin-token-file; NULL: no token */
    const char *etcd;             /* --etcd; NULL: the catalog in --data */
    const char *cluster;          /* --cluster-name */
    const char *import_dir;       /* --import-catalog; NULL: none */
    unsigned default_replication; /* --default-replication */
    unsigned max_moves;           /* --max-concurrent-moves */
    unsigned balance_primaries;   /* --balance-primaries */
} flags;

static int check_flags(const flags *f);

static const struct option longopts[] = {
    {"listen", required_argument, NULL, 'l'},
    {"data", required_argument, NULL, 'd'},
    {"heartbeat-timeout-ms", required_argument, NULL, 't'},
    {"log-level", required_argument, NULL, 'v'},
    {"admin-token-file", required_argument, NULL, 'a'},
    {"etcd", required_argument, NULL, 'e'},
    {"cluster-name", required_argument, NULL, 'n'},
    {"import-catalog", required_argument, NULL, 'i'},
    {"default-replication", required_argument, NULL, 'r'},
    {"max-concurrent-moves", required_argument, NULL, 'm'},
    {"balance-primaries", required_argument, NULL, 'b'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Flag name's value in optarg, a number from min to MOVER_MAX_MOVES_LIMIT,
 * into *out. 0, or LAPSE_EUSAGE after printing why on stderr. */
static int count_flag(const char *name, long min, unsigned *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(optarg, &end, 10);
    if (errno != 0 || end == optarg || *end != '\0' || v < min || v > MOVER_MAX_MOVES_LIMIT) {
        fprintf(stderr, "lapse-coordinator: %s wants a number from %ld to %d, not '%s'\n", name,
                min, MOVER_MAX_MOVES_LIMIT, optarg);
        return LAPSE_EUSAGE;
    }
    *out = (unsigned)v;
    return 0;
}

/* Takes flag c (getopt_long's, its value in optarg) into *f. Returns 0,
 * LAPSE_EUSAGE after printing why on stderr, or -1 for a flag it does not
 * know. */
static int one_flag(int c, flags *f)
{
    switch (c) {
    case 'l':
        f->listen = optarg;
        break;
    case 'd':
        f->data = optarg;
        break;
    case 't': {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(optarg, &end, 10);
        if (errno != 0 || end == optarg || *end != '\0' || v < 1 || v > 3600000) {
            fprintf(stderr,
                    "lapse-coordinator: --heartbeat-timeout-ms wants milliseconds from 1 "
                    "to 3600000, not '%s'\n",
                    optarg);
            return LAPSE_EUSAGE;
        }
        f->heartbeat_timeout_ms = v;
        break;
    }
    case 'v':
        if (log_level_parse(optarg, &f->level) != 0) {
            fprintf(stderr,
                    "lapse-coordinator: --log-level wants debug, info, warn or error, not "
                    "'%s'\n",
                    optarg);
            return LAPSE_EUSAGE;
        }
        break;
    case 'a':
        f->admin_token_file = optarg;
        break;
    case 'e':
        f->etcd = optarg;
        break;
    case 'n':
        f->cluster = optarg;
        break;
    case 'i':
        f->import_dir = optarg;
        break;
    case 'r':
        if (strcmp(optarg, "1") != 0 && strcmp(optarg, "2") != 0 && strcmp(optarg, "3") != 0) {
            fprintf(stderr, "lapse-coordinator: --default-replication wants 1, 2 or 3, not '%s'\n",
                    optarg);
            return LAPSE_EUSAGE;
        }
        f->default_replication = (unsigned)(optarg[0] - '0');
        break;
    case 'm':
        return count_flag("--max-concurrent-moves", 1, &f->max_moves);
    case 'b':
        return count_flag("--balance-primaries", 0, &f->balance_primaries);
    default:
        return -1;
    }
    return 0;
}

/* Parses the --config file's settings (into g_args), then argv. Returns 0,
 * 1 for --help, or LAPSE_EUSAGE after printing why on stderr. */
static int parse_flags(int argc, char **argv, flags *f)
{
    f->listen = DEFAULT_LISTEN;
    f->data = NULL;
    f->heartbeat_timeout_ms = DEFAULT_HEARTBEAT_TIMEOUT_MS;
    f->level = LOG_INFO;
    f->admin_token_file = NULL;
    f->etcd = NULL;
    f->cluster = DEFAULT_CLUSTER;
    f->import_dir = NULL;
    f->default_replication = 1;
    f->max_moves = MOVER_MAX_CONCURRENT;
    f->balance_primaries = MOVER_BALANCE_PRIMARIES;
    char cerr[4200];
    if (config_argv_init(&g_args, argc, argv, longopts, cerr, sizeof(cerr)) != 0) {
        fprintf(stderr, "lapse-coordinator: %s\n", cerr);
        return LAPSE_EUSAGE;
    }
    argc = g_args.argc;
    argv = g_args.argv;
    opterr = 0; /* our own messages */
    int c, rv;
    while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        if (c == 'h') {
            return 1;
        }
        if (c == ':') {
            fprintf(stderr, "lapse-coordinator: %s needs a value\n", argv[optind - 1]);
            return LAPSE_EUSAGE;
        }
        if ((rv = one_flag(c, f)) == -1) {
            fprintf(stderr, "lapse-coordinator: unknown flag '%s' (try --help)\n",
                    argv[optind - 1]);
            return LAPSE_EUSAGE;
        }
        if (rv != 0) {
            return rv;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "lapse-coordinator: unexpected argument '%s' (try --help)\n", argv[optind]);
        return LAPSE_EUSAGE;
    }
    return check_flags(f);
}

/* The flags' combinations. Returns 0 or LAPSE_EUSAGE after saying why. */
static int check_flags(const flags *f)
{
    if (f->etcd != NULL) {
        if (f->etcd[0] == '\0') {
            fprintf(stderr, "lapse-coordinator: --etcd wants its members' URLs\n");
            return LAPSE_EUSAGE;
        }
        if (f->data != NULL) {
            fprintf(stderr, "lapse-coordinator: --data and --etcd exclude each other: the "
                            "catalog lives in one place (--import-catalog DIR copies a local "
                            "one into etcd)\n");
            return LAPSE_EUSAGE;
        }
    } else if (f->import_dir != NULL || strcmp(f->cluster, DEFAULT_CLUSTER) != 0) {
        fprintf(stderr, "lapse-coordinator: --import-catalog and --cluster-name need --etcd\n");
        return LAPSE_EUSAGE;
    } else if (f->data == NULL || f->data[0] == '\0') {
        fprintf(stderr, "lapse-coordinator: --data DIR (or --etcd URLs) is required (try "
                        "--help)\n");
        return LAPSE_EUSAGE;
    }
    if (f->listen[0] == '\0') {
        fprintf(stderr, "lapse-coordinator: --listen URL is empty\n");
        return LAPSE_EUSAGE;
    }
    if (strlen(f->listen) >= PMAP_MAX_ADDR) {
        fprintf(stderr, "lapse-coordinator: --listen URL is longer than %d bytes\n",
                PMAP_MAX_ADDR - 1);
        return LAPSE_EUSAGE;
    }
    return 0;
}

int main(int argc, char **argv)
{
    flags f;
    int rv = parse_flags(argc, argv, &f);
    if (rv == 1) {
        usage(stdout);
        return 0;
    }
    if (rv != 0) {
        char where[4200]; /* optarg is the bad value when a flag's value was refused */
        if (config_argv_where(&g_args, optarg, where, sizeof(where)) != NULL) {
            fprintf(stderr, "lapse-coordinator: (that value is set at %s)\n", where);
        }
        return 2;
    }
    log_init("coordinator", f.level);

    static char token[MAX_ADMIN_TOKEN_BYTES + 1];
    if (f.admin_token_file != NULL) {
        char why[1200];
        if (token_read_file(f.admin_token_file, "admin token", token, sizeof(token), why,
                            sizeof(why)) != 0) {
            log_error("cannot start: %s", why);
            return 1;
        }
    }

    /* Before any thread exists, so only sigsuspend below receives. */
    sigset_t wait_mask;
    stopsig_block(on_signal, &wait_mask);

    server_config cfg = {0};
    cfg.listen_url = f.listen;
    cfg.data_dir = f.data;
    cfg.etcd_endpoints = f.etcd;
    cfg.cluster_name = f.cluster;
    cfg.import_dir = f.import_dir;
    cfg.heartbeat_timeout_ms = f.heartbeat_timeout_ms;
    cfg.default_replication = f.default_replication;
    cfg.max_moves = f.max_moves;
    cfg.balance_primaries = f.balance_primaries;
    cfg.push_timeout_ms = PUSH_TIMEOUT_MS;
    cfg.admin_token = f.admin_token_file != NULL ? token : NULL;

    char err[1024] = "";
    server *s = NULL;
    rv = server_open(&s, &cfg, err, sizeof(err));
    memset(token, 0, sizeof(token)); /* the server keeps its own copy */
    if (rv != 0) {
        log_error("cannot start: %s", err);
        return 1;
    }
    if ((rv = server_start(s, err, sizeof(err))) != 0) {
        log_error("cannot listen on %s: %s", f.listen, err);
        server_close(s);
        return 1;
    }
    if (f.etcd != NULL && (rv = leader_start(s, err, sizeof(err))) != 0) {
        log_error("cannot campaign: %s", err);
        server_close(s);
        return 1;
    }
    pthread_mutex_lock(&s->lock);
    if (f.etcd != NULL) {
        log_info("listening on %s, catalog in etcd %s under /lapse/%s/ (campaigning to lead), "
                 "heartbeat timeout %lld ms, admin token %s",
                 f.listen, f.etcd, f.cluster, (long long)f.heartbeat_timeout_ms,
                 f.admin_token_file != NULL ? "required" : "not required");
    } else {
        log_info("listening on %s, data %s, map version %llu with %zu tables and %zu nodes "
                 "(all DOWN until they heartbeat), heartbeat timeout %lld ms, admin token %s",
                 f.listen, f.data, (unsigned long long)s->pm->version, s->pm->ntables,
                 s->pm->nnodes, (long long)f.heartbeat_timeout_ms,
                 f.admin_token_file != NULL ? "required" : "not required");
    }
    pthread_mutex_unlock(&s->lock);

    while (!stop_requested) {
        sigsuspend(&wait_mask);
    }
    log_info("%s received, shutting down", stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
    leader_stop(s); /* first: hands leadership over at once */
    server_close(s);
    rpc_fini(); /* every NNG object is closed: NNG's reaper frees what they left */
    log_info("stopped");
    config_argv_fini(&g_args);
    return 0;
}
