/*
 * main.c: lapse-node's flags, signals and lifecycle. Everything else is in
 * node.c and the modules it opens.
 *
 * Exit status: 0 after SIGTERM/SIGINT and a clean shutdown; 1 when the node
 * cannot start (data dir unusable or owned by another node id, address in
 * use); 2 on bad usage.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "node.h"

/* Set by the signal handler, read by main's wait loop. */
static volatile sig_atomic_t g_stop = 0;

static void on_signal(int sig)
{
    g_stop = sig;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: lapse-node --id N --listen URL --data DIR [options]\n"
            "\n"
            "The Lapse storage node: holds the partitions the coordinator assigns to it.\n"
            "\n"
            "  --id N              node id, 1..65535 (required; the data dir remembers it)\n"
            "  --listen URL        RPC address to listen on, e.g. tcp://127.0.0.1:7401 "
            "(required)\n"
            "  --data DIR          data directory, created if missing (required)\n"
            "  --coordinator URL   coordinator address (default %s)\n"
            "  --advertise URL     address registered with the coordinator (default: --listen)\n"
            "  --workers N         RPC handler threads, 1..256 (default 4)\n"
            "  --log-level LEVEL   debug, info, warn or error (default info)\n"
            "  --help              this text\n",
            NODE_DEFAULT_COORDINATOR);
}

static int bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "lapse-node: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'lapse-node --help'.\n");
    return 2;
}

/* Parses a decimal integer in [lo, hi]. Returns 0 or -1. */
static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    if (s == NULL || *s == 0) {
        return -1;
    }
    long v = strtol(s, &end, 10);
    if (*end != 0 || v < lo || v > hi) {
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"id", required_argument, NULL, 'i'},
        {"listen", required_argument, NULL, 'l'},
        {"coordinator", required_argument, NULL, 'c'},
        {"data", required_argument, NULL, 'd'},
        {"advertise", required_argument, NULL, 'a'},
        {"workers", required_argument, NULL, 'w'},
        {"log-level", required_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    node_options opt = {0};
    enum log_level level = LOG_INFO;
    long v;
    int c;

    opterr = 0; /* our own messages */
    while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        switch (c) {
        case 'i':
            if (parse_int(optarg, 1, 65535, &v) != 0) {
                return bad_usage("--id must be a number from 1 to 65535, not \"%s\"", optarg);
            }
            opt.id = (uint32_t)v;
            break;
        case 'l':
            opt.listen_url = optarg;
            break;
        case 'c':
            opt.coordinator_url = optarg;
            break;
        case 'd':
            opt.data_dir = optarg;
            break;
        case 'a':
            opt.advertise_url = optarg;
            break;
        case 'w':
            if (parse_int(optarg, 1, 256, &v) != 0) {
                return bad_usage("--workers must be a number from 1 to 256, not \"%s\"", optarg);
            }
            opt.workers = (int)v;
            break;
        case 'v':
            if (log_level_parse(optarg, &level) != 0) {
                return bad_usage("--log-level must be debug, info, warn or error, not \"%s\"",
                                 optarg);
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        case ':':
            return bad_usage("%s needs a value", argv[optind - 1]);
        default:
            return bad_usage("unknown flag %s", argv[optind - 1]);
        }
    }
    if (optind < argc) {
        return bad_usage("unexpected argument \"%s\"", argv[optind]);
    }
    if (opt.id == 0) {
        return bad_usage("%s", "--id is required");
    }
    if (opt.listen_url == NULL || opt.listen_url[0] == 0) {
        return bad_usage("%s", "--listen is required");
    }
    if (opt.data_dir == NULL || opt.data_dir[0] == 0) {
        return bad_usage("%s", "--data is required");
    }

    log_init("node", level);

    /* Block the stop signals before any thread starts, so every thread
     * inherits the mask and only sigsuspend below takes them. */
    sigset_t stopset, waitset;
    sigemptyset(&stopset);
    sigaddset(&stopset, SIGTERM);
    sigaddset(&stopset, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stopset, &waitset);
    sigdelset(&waitset, SIGTERM);
    sigdelset(&waitset, SIGINT);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    node_server *ns = NULL;
    char err[1024] = "";
    int rv = node_open(&ns, &opt, err, sizeof(err));
    if (rv != 0) {
        log_error("cannot start: %s", err);
        fprintf(stderr, "lapse-node: %s\n", err);
        return 1;
    }
    log_info("node %u ready", opt.id);
    while (!g_stop) {
        sigsuspend(&waitset);
    }
    log_info("%s received: shutting down", g_stop == SIGINT ? "SIGINT" : "SIGTERM");
    node_close(ns);
    log_info("node %u stopped", opt.id);
    return 0;
}
