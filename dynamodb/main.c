/*
 * main.c: lapse-dynamodb, the stateless DynamoDB-compatible HTTP gateway
 * (docs/dynamodb-api.md): flags, signals and lifecycle. It connects to the
 * cluster with liblapse (retrying until a coordinator answers), then serves
 * DynamoDB's protocol on --listen until SIGTERM or SIGINT.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../client/lapse.h"
#include "../common/log.h"
#include "../common/stopsig.h"
#include "../rpc/http_service.h"
#include "ddb_api.h"
#include "ddb_sigv4.h"

/* The gateway's global state. */
typedef struct gateway {
    const char *listen;      /* HOST:PORT served */
    const char *coordinator; /* NULL: liblapse's default ($LAPSE_COORDINATOR, else 7400/7410) */
    const char *region;      /* in ARNs */
    int timeout_ms;          /* liblapse's per-call timeout */
    int workers;             /* threads running calls */
    const char *credentials; /* NULL: signatures are not verified */
    ddb_credentials *creds;  /* loaded from credentials */
    lapse_loop *loop;        /* reads the client's connections and serves HTTP; NULL: off */
    lapse_client *c;         /* shared by the workers */
    http_service *http;      /* serving while non-NULL */
    ddb_api api;             /* what the workers read */
} gateway;

/* Set by the signal handler, read by main's wait loop. */
static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    g_stop = sig;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: lapse-dynamodb [--listen HOST:PORT] [--coordinator URL[,URL...]]\n"
            "                      [--region R] [--timeout-ms N] [--workers N]\n"
            "                      [--dynamodb-credentials FILE]\n"
            "  --listen       where to serve DynamoDB's HTTP API (default 127.0.0.1:8000)\n"
            "  --coordinator  the cluster (default $LAPSE_COORDINATOR, else %s)\n"
            "  --region       the region named in ARNs (default us-east-1)\n"
            "  --timeout-ms   per-call timeout of liblapse (default 5000)\n"
            "  --workers      threads running calls (default 32)\n"
            "  --dynamodb-credentials  verify SigV4 signatures against FILE's access keys\n"
            "                 (lines ACCESS_KEY_ID SECRET_ACCESS_KEY); without it any\n"
            "                 signature is accepted, as DynamoDB Local does\n"
            "Admin calls send $LAPSE_ADMIN_TOKEN when it is set (docs/dynamodb-api.md).\n",
            LAPSE_DEFAULT_COORDINATOR);
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Sleeps ms unless a stop signal arrives first (it interrupts nanosleep). */
static void pause_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Reads the flags into g. 0 to go on, 1 when --help was answered, 2 on a
 * bad flag (said on stderr). */
static int parse_flags(int argc, char **argv, gateway *g)
{
    static const struct option longopts[] = {{"listen", required_argument, NULL, 'l'},
                                             {"coordinator", required_argument, NULL, 'c'},
                                             {"region", required_argument, NULL, 'r'},
                                             {"timeout-ms", required_argument, NULL, 't'},
                                             {"workers", required_argument, NULL, 'w'},
                                             {"dynamodb-credentials", required_argument, NULL, 'k'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int opt;
    while ((opt = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        switch (opt) {
        case 'l':
            g->listen = optarg;
            break;
        case 'c':
            g->coordinator = optarg;
            break;
        case 'r':
            g->region = optarg;
            break;
        case 't':
            if (parse_int(optarg, 1, 3600000, &g->timeout_ms) != 0) {
                fprintf(stderr, "lapse-dynamodb: bad --timeout-ms %s\n", optarg);
                return 2;
            }
            break;
        case 'w':
            if (parse_int(optarg, 1, 256, &g->workers) != 0) {
                fprintf(stderr, "lapse-dynamodb: bad --workers %s (1 to 256)\n", optarg);
                return 2;
            }
            break;
        case 'k':
            g->credentials = optarg;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            fprintf(stderr, "lapse-dynamodb: bad or incomplete flag %s\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "lapse-dynamodb: unexpected argument %s\n", argv[optind]);
        return 2;
    }
    return 0;
}

/* Connects g->c, retrying twice a second until a coordinator answers (the
 * cluster may still be starting) or a stop signal comes (then g->c stays
 * NULL). The signals in waitset are taken only while it sleeps. */
static void connect_cluster(gateway *g, const sigset_t *waitset)
{
    lapse_connect_options co = {.timeout_ms = g->timeout_ms, .loop = g->loop};
    for (int tries = 0; !g_stop; tries++) {
        lapse_error err;
        if (lapse_connect_opts(&g->c, g->coordinator, &co, &err) == 0) {
            return;
        }
        if (tries % 20 == 0) {
            log_warn("cannot reach the cluster yet (%s); retrying", err.message);
        }
        sigset_t old;
        pthread_sigmask(SIG_SETMASK, waitset, &old);
        pause_ms(500);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
}

/* http_service_options.watch and unwatch on the gateway's lapse_loop. */
static int loop_watch(void *loop, int fd, void (*run)(void *), void *arg)
{
    return lapse_loop_watch(loop, fd, run, arg, NULL);
}

static void loop_unwatch(void *loop, int fd)
{
    lapse_loop_unwatch(loop, fd);
}

/* Serves DynamoDB's API on g->listen. 0, or 1 with the reason logged. */
static int serve(gateway *g)
{
    g->api = (ddb_api){.c = g->c, .region = g->region, .creds = g->creds};
    http_service_options ho = {.path = "/",
                               .max_body = DDB_API_MAX_BODY,
                               .workers = g->workers,
                               .reject_body = ddb_api_reject_body,
                               .quick = ddb_api_quick,
                               .watch = g->loop != NULL ? loop_watch : NULL,
                               .unwatch = loop_unwatch,
                               .loop = g->loop};
    char err[512];
    if (http_service_open(&g->http, g->listen, &ho, ddb_api_serve, &g->api, err, sizeof err) != 0) {
        log_error("cannot serve: %s", err);
        fprintf(stderr, "lapse-dynamodb: %s\n", err);
        return 1;
    }
    if (g->creds != NULL) {
        log_info("serving DynamoDB's API on http://%s, verifying SigV4 signatures (%zu access "
                 "keys from %s)",
                 g->listen, ddb_credentials_count(g->creds), g->credentials);
    } else {
        log_info("serving DynamoDB's API on http://%s (signatures not verified)", g->listen);
    }
    return 0;
}

int main(int argc, char **argv)
{
    gateway g = {
        .listen = "127.0.0.1:8000", .region = "us-east-1", .timeout_ms = 5000, .workers = 32};
    int rv = parse_flags(argc, argv, &g);
    if (rv != 0) {
        return rv == 1 ? 0 : 2;
    }
    log_init("dynamodb", LOG_INFO);
    if (g.credentials != NULL) {
        char cerr[512];
        if (ddb_credentials_load(g.credentials, &g.creds, cerr, sizeof cerr) != 0) {
            fprintf(stderr, "lapse-dynamodb: --dynamodb-credentials: %s\n", cerr);
            return 2;
        }
    }
    /* Before any thread starts, so every thread inherits the mask and only
     * sigsuspend below takes them (nanosleep in the connect loop runs with
     * them unblocked). */
    sigset_t waitset;
    stopsig_block(on_signal, &waitset);
    const char *one = getenv("LAPSE_DDB_LOOP");
    if (one == NULL || strcmp(one, "0") != 0) {
        lapse_error lerr;
        if (lapse_loop_open(&g.loop, &lerr) != 0) {
            fprintf(stderr, "lapse-dynamodb: %s\n", lerr.message);
            ddb_credentials_free(g.creds);
            return 1;
        }
    }
    connect_cluster(&g, &waitset);
    if (g.c == NULL) {
        lapse_loop_close(g.loop);
        ddb_credentials_free(g.creds);
        return 0; /* stopped before the cluster answered */
    }
    if (serve(&g) != 0) {
        lapse_close(g.c);
        lapse_loop_close(g.loop);
        ddb_credentials_free(g.creds);
        return 1;
    }
    while (!g_stop) {
        sigsuspend(&waitset);
    }
    log_info("%s received: shutting down", g_stop == SIGINT ? "SIGINT" : "SIGTERM");
    http_service_close(g.http);
    lapse_close(g.c);
    lapse_loop_close(g.loop);
    ddb_credentials_free(g.creds);
    log_info("stopped");
    return 0;
}
