/*
 * main.c: lapse-node's flags, signals and lifecycle. Everything else is in
 * node.c and the modules it opens. main runs four phases, each returning
 * -1 to go on or the exit status: parse_flags, validate_flags, open_node
 * (process settings, the stop signals, node_open) and serve (wait for a stop
 * signal, node_close).
 *
 * Exit status: 0 after SIGTERM/SIGINT and a clean shutdown; 1 when the node
 * cannot start (data dir unusable or owned by another node id, address in
 * use); 2 on bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/config.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../common/stopsig.h"
#include "../common/token.h"
#include "../partition/replog.h"
#include "node.h"
#include "registry.h"
#include "shipper.h"

/* Set by the signal handler, read by main's wait loop. */
static volatile sig_atomic_t g_stop = 0;
/* The --config file's settings ahead of the command line (common/config.h);
 * static because the parsed options point into it for the process's life. */
static config_argv g_args;

static void on_signal(int sig)
{
    g_stop = sig;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: lapse-node --id N --listen URL --data DIR [options]\n"
            "       lapse-node --config FILE [options]\n"
            "\n"
            "The Lapse storage node: holds the partitions the coordinator assigns to it.\n"
            "\n"
            "  --config FILE       read settings from FILE, lines 'key = value' with the\n"
            "                      flags below as keys (listen = tcp://...); flags win\n"
            "  --id N              node id, 1..65535 (required; the data dir remembers it)\n"
            "  --listen URL        RPC address to listen on, e.g. tcp://127.0.0.1:7401 "
            "(required)\n"
            "  --data DIR          data directory, created if missing (required)\n"
            "  --coordinator URL   coordinator address (default %s)\n"
            "  --advertise URL     address registered with the coordinator (default: --listen)\n"
            "  --etcd URL[,URL...] hold a lease in etcd (its members' client URLs): the\n"
            "                      coordinators on etcd judge this node UP while it lasts\n"
            "  --cluster-name NAME with --etcd: the cluster's prefix /lapse/NAME/ (default\n"
            "                      " NODE_DEFAULT_CLUSTER ", as the coordinators')\n"
            "  --lease-ttl S       with --etcd: the lease's time to live in seconds, 2..60\n"
            "                      (default %d): how long a stopped or cut-off node keeps its\n"
            "                      partitions (a killed one fails over as soon as the leader\n"
            "                      finds its port closed)\n"
            "  --workers N         RPC handler threads, 1..256 (default 4)\n"
            "  --log-level LEVEL   debug, info, warn or error (default info)\n"
            "  --ttl-workers N     TTL scanner threads, 1..%d (default %d)\n"
            "  --ttl-max-deletes-per-sec N\n"
            "                      cap on TTL deletes per second on this node (default 0: no "
            "limit)\n"
            "  --ttl-backfill-rate N\n"
            "                      cap on items indexed per second when TTL is enabled on a "
            "table\n"
            "                      with items (default 0: no limit)\n"
            "  --max-clock-skew-ms N\n"
            "                      pause TTL deletes while this node's clock differs from the\n"
            "                      coordinator's by more (default %d)\n"
            "  --ttl-naive-scan    benchmark only: replace the index-driven TTL scanners by full\n"
            "                      passes over every item (what the index buys; see docs/node.md)\n"
            "  --ttl-naive-interval-ms N\n"
            "                      sleep between two naive passes (default %d)\n"
            "  --replog-retain N   records of each replicated partition's log kept, 16..10^8\n"
            "                      (default %d): a replica further behind is rebuilt from a\n"
            "                      snapshot of the partition instead\n"
            "  --snapshot-rate-mb N\n"
            "                      cap each snapshot this node sends (a move's new copy, a\n"
            "                      copy too far behind) at N MB/s, 0..100000 (default 0: no\n"
            "                      cap), leaving CPU and disk to the foreground\n"
            "  --snapshot-nice N   send each snapshot from threads of nice value N, 0..19\n"
            "                      (default 0: the daemon's own), so the foreground's calls\n"
            "                      take the CPU first while partitions move\n"
            "  --zone NAME         this node's zone (a rack, a data centre): each partition's\n"
            "                      copies go to as many zones as there are (default: none)\n"
            "  --repl-workers N    outbox shipper threads (GSI and stream replication), "
            "1..%d\n"
            "                      (default %d)\n"
            "  --cluster-token-file F\n"
            "                      the nodes' shared secret (the file's text without its final\n"
            "                      newline): sent with every Replicate this node ships, and\n"
            "                      required of every Replicate it receives (default: none)\n"
            "  --metrics-listen HOST:PORT\n"
            "                      serve Prometheus metrics at http://HOST:PORT/metrics "
            "(default: off)\n"
            "  --help              this text\n",
            NODE_DEFAULT_COORDINATOR, REGISTRY_LEASE_TTL_S, EXPIRY_ENGINE_MAX_WORKERS,
            EXPIRY_ENGINE_DEFAULT_WORKERS, EXPIRY_ENGINE_DEFAULT_MAX_SKEW_MS,
            EXPIRY_ENGINE_DEFAULT_NAIVE_INTERVAL_MS, REPLOG_RETAIN_DEFAULT, SHIPPER_MAX_WORKERS,
            SHIPPER_DEFAULT_WORKERS);
}

static int bad_usage(const char *fmt, const char *arg)
{
    char where[4200];
    fprintf(stderr, "lapse-node: ");
    if (config_argv_where(&g_args, optarg, where, sizeof(where)) != NULL) {
        fprintf(stderr, "%s: ", where); /* the bad value came from the config file */
    }
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'lapse-node --help'.\n");
    return 2;
}

/* Parses a decimal integer in [lo, hi]. Returns 0 or -1. */
static int parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end = NULL;
    if (s == NULL || *s == 0) {
        return -1;
    }
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != 0 || v < lo || v > hi) {
        return -1;
    }
    *out = v;
    return 0;
}

/* Parses optarg as flag's integer in [lo, hi] into *v. Returns 0, or
 * bad_usage's status with "FLAG must be a number from LO to HI". */
static int int_flag(const char *flag, long long lo, long long hi, long long *v)
{
    if (parse_int(optarg, lo, hi, v) == 0) {
        return 0;
    }
    char fmt[160];
    snprintf(fmt, sizeof(fmt), "%s must be a number from %lld to %lld, not \"%%s\"", flag, lo, hi);
    return bad_usage(fmt, optarg);
}

/* Logs the step of a shutdown that takes more than a few seconds (a clean
 * stop takes milliseconds; systemd and `down` kill after 10 s or more). */
static void *shutdown_watchdog(void *arg)
{
    (void)arg;
    for (int waited = 3; waited <= 30; waited += 3) {
        sleep(3);
        log_warn("still shutting down after %d s, in %s", waited, node_close_step());
    }
    return NULL;
}

static const struct option longopts[] = {
    {"id", required_argument, NULL, 'i'},
    {"listen", required_argument, NULL, 'l'},
    {"coordinator", required_argument, NULL, 'c'},
    {"data", required_argument, NULL, 'd'},
    {"advertise", required_argument, NULL, 'a'},
    {"workers", required_argument, NULL, 'w'},
    {"log-level", required_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"ttl-workers", required_argument, NULL, 'T'},
    {"ttl-max-deletes-per-sec", required_argument, NULL, 'D'},
    {"ttl-backfill-rate", required_argument, NULL, 'B'},
    {"max-clock-skew-ms", required_argument, NULL, 'S'},
    {"metrics-listen", required_argument, NULL, 'M'},
    {"ttl-naive-scan", no_argument, NULL, 'N'},
    {"ttl-naive-interval-ms", required_argument, NULL, 'I'},
    {"repl-workers", required_argument, NULL, 'R'},
    {"cluster-token-file", required_argument, NULL, 'C'},
    {"etcd", required_argument, NULL, 'e'},
    {"cluster-name", required_argument, NULL, 'n'},
    {"lease-ttl", required_argument, NULL, 'E'},
    {"replog-retain", required_argument, NULL, 'L'},
    {"snapshot-rate-mb", required_argument, NULL, 'J'},
    {"snapshot-nice", required_argument, NULL, 'N'},
    {"zone", required_argument, NULL, 'Z'},
    /* Hidden, for tests: shifts this node's wall clock (clock skew). */
    {"debug-clock-offset-ms", required_argument, NULL, 'O'},
    /* Hidden, for tests: the stream retention period (60 s). */
    {"debug-stream-trim-interval-ms", required_argument, NULL, 'Y'},
    /* Hidden fault point, for tests: SIGKILL after N batches applied by other nodes,
     * before their ack is recorded (shipper.h). */
    {"debug-repl-kill-after-batches", required_argument, NULL, 'K'},
    /* Hidden, for benchmarks: the shipper ships nothing for N ms after the
     * start, so an outbox backlog builds up (lapse-repl-bench ceiling). */
    {"debug-repl-hold-ms", required_argument, NULL, 'H'},
    /* Hidden fault switches, for tests: while DIR/node<ID>.refuse-replicate-log
     * exists, every ReplicateLog call is refused (a follower that is UP but
     * cannot take its primary's records); while DIR/node<ID>.slow-ship exists,
     * each shipment of the node's records to its followers leaves 600 ms
     * late (logship_commit.c). */
    {"debug-fault-dir", required_argument, NULL, 'F'},
    {NULL, 0, NULL, 0},
};

/* What the command line says: the node's options and what main itself
 * applies before opening the node. */
typedef struct flags {
    node_options opt;
    enum log_level level;
    long long clock_offset_ms;
    const char *cluster_token_file;
} flags;

/* What a group's flag parser returns for a flag of another group. */
#define FLAG_OTHER (-2)

/* The flags of one group: each takes flag c (getopt_long's, its value in
 * optarg) into *f and returns -1 to go on, 2 on a bad value (said on
 * stderr), or FLAG_OTHER for a flag of another group. */

/* Identity, addresses, the cluster, replication and logging. */
static int daemon_flag(int c, flags *f)
{
    long long v;
    int rv;

    switch (c) {
    case 'i':
        if ((rv = int_flag("--id", 1, 65535, &v)) != 0) {
            return rv;
        }
        f->opt.id = (uint32_t)v;
        break;
    case 'l':
        f->opt.listen_url = optarg;
        break;
    case 'c':
        f->opt.coordinator_url = optarg;
        break;
    case 'd':
        f->opt.data_dir = optarg;
        break;
    case 'a':
        f->opt.advertise_url = optarg;
        break;
    case 'w':
        if ((rv = int_flag("--workers", 1, 256, &v)) != 0) {
            return rv;
        }
        f->opt.workers = (int)v;
        break;
    case 'v':
        if (log_level_parse(optarg, &f->level) != 0) {
            return bad_usage("--log-level must be debug, info, warn or error, not \"%s\"", optarg);
        }
        break;
    case 'M':
        if (strchr(optarg, ':') == NULL) {
            return bad_usage("--metrics-listen must be HOST:PORT, not \"%s\"", optarg);
        }
        f->opt.metrics_listen = optarg;
        break;
    case 'R':
        if ((rv = int_flag("--repl-workers", 1, SHIPPER_MAX_WORKERS, &v)) != 0) {
            return rv;
        }
        f->opt.repl_workers = (int)v;
        break;
    case 'C':
        f->cluster_token_file = optarg;
        break;
    case 'e':
        if (optarg[0] == 0) {
            return bad_usage("%s", "--etcd wants its members' URLs");
        }
        f->opt.etcd_endpoints = optarg;
        break;
    case 'n':
        f->opt.cluster_name = optarg;
        break;
    case 'E':
        if ((rv = int_flag("--lease-ttl", 2, 60, &v)) != 0) {
            return rv;
        }
        f->opt.lease_ttl_s = (int)v;
        break;
    case 'L':
        if ((rv = int_flag("--replog-retain", 16, 100000000LL, &v)) != 0) {
            return rv;
        }
        f->opt.replog_retain = (uint64_t)v;
        break;
    case 'J':
        if ((rv = int_flag("--snapshot-rate-mb", 0, 100000, &v)) != 0) {
            return rv;
        }
        f->opt.snapshot_rate_mb = (int)v;
        break;
    case 'N':
        if ((rv = int_flag("--snapshot-nice", 0, 19, &v)) != 0) {
            return rv;
        }
        f->opt.snapshot_nice = (int)v;
        break;
    case 'Z':
        if (!pmap_zone_valid(optarg)) {
            return bad_usage("--zone must be 1 to 63 letters, digits, '.', '_' or '-', not \"%s\"",
                             optarg);
        }
        f->opt.zone = optarg;
        break;
    default:
        return FLAG_OTHER;
    }
    return -1;
}

/* The expiry engine: scanners, rates, clock checks, the naive scan. */
static int ttl_flag(int c, flags *f)
{
    long long v;
    int rv;

    switch (c) {
    case 'T':
        if ((rv = int_flag("--ttl-workers", 1, EXPIRY_ENGINE_MAX_WORKERS, &v)) != 0) {
            return rv;
        }
        f->opt.ttl.workers = (int)v;
        break;
    case 'D':
        if (parse_int(optarg, 0, 1000000000LL, &v) != 0) {
            return bad_usage("--ttl-max-deletes-per-sec must be a number from 0 (no limit) "
                             "to 1000000000, not \"%s\"",
                             optarg);
        }
        f->opt.ttl.max_deletes_per_sec = (uint64_t)v;
        break;
    case 'B':
        if (parse_int(optarg, 0, 1000000000LL, &v) != 0) {
            return bad_usage("--ttl-backfill-rate must be a number from 0 (no limit) to "
                             "1000000000, not \"%s\"",
                             optarg);
        }
        f->opt.ttl.backfill_items_per_s = (uint64_t)v;
        break;
    case 'S':
        if ((rv = int_flag("--max-clock-skew-ms", 1, 86400000LL, &v)) != 0) {
            return rv;
        }
        f->opt.ttl.max_clock_skew_ms = v;
        break;
    case 'N': /* benchmark 6 only (docs/node.md) */
        f->opt.ttl.naive_scan = 1;
        break;
    case 'I':
        if ((rv = int_flag("--ttl-naive-interval-ms", 1, 3600000LL, &v)) != 0) {
            return rv;
        }
        f->opt.ttl.naive_interval_ms = v;
        break;
    default:
        return FLAG_OTHER;
    }
    return -1;
}

/* The hidden flags of tests and benchmarks (longopts). */
static int debug_flag(int c, flags *f)
{
    long long v;
    int rv;

    switch (c) {
    case 'O':
        if (parse_int(optarg, -315576000000LL, 315576000000LL, &v) != 0) {
            return bad_usage("--debug-clock-offset-ms must be a number of milliseconds, not "
                             "\"%s\"",
                             optarg);
        }
        f->clock_offset_ms = v;
        break;
    case 'Y':
        if ((rv = int_flag("--debug-stream-trim-interval-ms", 1, 86400000LL, &v)) != 0) {
            return rv;
        }
        f->opt.stream_trim_interval_ms = v;
        break;
    case 'K':
        if ((rv = int_flag("--debug-repl-kill-after-batches", 1, 1000000000LL, &v)) != 0) {
            return rv;
        }
        f->opt.debug_repl_kill_after_batches = v;
        break;
    case 'H':
        if ((rv = int_flag("--debug-repl-hold-ms", 1, 3600000LL, &v)) != 0) {
            return rv;
        }
        f->opt.debug_repl_hold_ms = v;
        break;
    case 'F':
        f->opt.debug_fault_dir = optarg;
        break;
    default:
        return FLAG_OTHER;
    }
    return -1;
}

/* Parses the --config file's settings, then the command line, into *f.
 * Returns -1 to go on, 0 after --help, or 2 on a bad flag (said on
 * stderr). */
static int parse_flags(int argc, char **argv, flags *f)
{
    int c, rv;
    char cerr[4200];

    memset(f, 0, sizeof(*f));
    f->opt.ttl.workers = EXPIRY_ENGINE_DEFAULT_WORKERS;
    f->opt.ttl.max_clock_skew_ms = EXPIRY_ENGINE_DEFAULT_MAX_SKEW_MS;
    f->opt.ttl.naive_interval_ms = EXPIRY_ENGINE_DEFAULT_NAIVE_INTERVAL_MS;
    f->opt.repl_workers = SHIPPER_DEFAULT_WORKERS;
    f->level = LOG_INFO;
    if (config_argv_init(&g_args, argc, argv, longopts, cerr, sizeof(cerr)) != 0) {
        fprintf(stderr, "lapse-node: %s\nTry 'lapse-node --help'.\n", cerr);
        return 2;
    }
    argc = g_args.argc;
    argv = g_args.argv;
    opterr = 0; /* our own messages */
    while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == ':') {
            return bad_usage("%s needs a value", argv[optind - 1]);
        }
        if ((rv = daemon_flag(c, f)) == FLAG_OTHER && (rv = ttl_flag(c, f)) == FLAG_OTHER &&
            (rv = debug_flag(c, f)) == FLAG_OTHER) {
            return bad_usage("unknown flag %s", argv[optind - 1]);
        }
        if (rv != -1) {
            return rv;
        }
    }
    if (optind < argc) {
        return bad_usage("unexpected argument \"%s\"", argv[optind]);
    }
    return -1;
}

/* Checks the flags that are required or need one another. Returns -1 to go
 * on or 2 (said on stderr). */
static int validate_flags(const flags *f)
{
    if (f->opt.id == 0) {
        return bad_usage("%s", "--id is required");
    }
    if (f->opt.listen_url == NULL || f->opt.listen_url[0] == 0) {
        return bad_usage("%s", "--listen is required");
    }
    if (f->opt.data_dir == NULL || f->opt.data_dir[0] == 0) {
        return bad_usage("%s", "--data is required");
    }
    if (f->opt.lease_ttl_s != 0 && f->opt.etcd_endpoints == NULL) {
        return bad_usage("%s", "--lease-ttl needs --etcd");
    }
    if (f->opt.cluster_name != NULL && f->opt.etcd_endpoints == NULL) {
        return bad_usage("%s", "--cluster-name needs --etcd");
    }
    return -1;
}

/* Applies the process-wide settings (logging, the cluster token, the test
 * clock offset), takes the stop signals (stopsig.h: before any thread
 * starts, so every thread inherits the mask) and opens the node into *out.
 * Returns -1 to go on, or 1 when the node cannot start (logged and said on
 * stderr). */
static int open_node(flags *f, node_server **out, sigset_t *waitset)
{
    static char cluster_token[NODE_MAX_TOKEN + 1];
    char err[4200] = "";

    log_init("node", f->level);
    if (f->cluster_token_file != NULL) {
        if (token_read_file(f->cluster_token_file, "cluster token", cluster_token,
                            sizeof(cluster_token), err, sizeof(err)) != 0) {
            log_error("cannot start: %s", err);
            return 1;
        }
        f->opt.cluster_token = cluster_token;
    }
    if (f->clock_offset_ms != 0) {
        clock_wall_set_offset_ms(f->clock_offset_ms);
        log_warn("test flag --debug-clock-offset-ms: this node's wall clock is shifted by %lld ms",
                 f->clock_offset_ms);
    }
    stopsig_block(on_signal, waitset);
    if (node_open(out, &f->opt, err, sizeof(err)) != 0) {
        log_error("cannot start: %s", err);
        fprintf(stderr, "lapse-node: %s\n", err);
        return 1;
    }
    log_info("node %u ready", f->opt.id);
    return -1;
}

/* Serves until SIGTERM or SIGINT, then closes ns (a watchdog logs a slow
 * step). Returns 0. */
static int serve(node_server *ns, uint32_t id, const sigset_t *waitset)
{
    while (!g_stop) {
        sigsuspend(waitset);
    }
    log_info("%s received: shutting down", g_stop == SIGINT ? "SIGINT" : "SIGTERM");
    pthread_t dog;
    if (pthread_create(&dog, NULL, shutdown_watchdog, NULL) == 0) {
        pthread_detach(dog);
    }
    node_close(ns);
    /* Every NNG object is closed: let NNG's reaper free what the closes
     * handed it (a request a stopped and resumed heartbeat left in flight
     * was reported leaked at exit by LeakSanitizer without this). */
    rpc_fini();
    log_info("node %u stopped", id);
    return 0;
}

int main(int argc, char **argv)
{
    flags f;
    node_server *ns = NULL;
    sigset_t waitset;
    int rv = parse_flags(argc, argv, &f);
    if (rv < 0) {
        rv = validate_flags(&f);
    }
    if (rv < 0) {
        rv = open_node(&f, &ns, &waitset);
    }
    if (rv < 0) {
        rv = serve(ns, f.opt.id, &waitset);
    }
    config_argv_fini(&g_args);
    return rv;
}
