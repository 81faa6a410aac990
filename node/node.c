/*
 * node.c: opening and closing the node (contract in node.h): data dir and
 * its node id, the persisted map, the RPC server, the membership thread.
 */
#include "node.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/replog.h"
#include "handlers.h"
#include "logship.h"
#include "maps.h"
#include "membership.h"
#include "refill.h"
#include "registry.h"
#include "shipper.h"
#include "streams.h"
#include "telemetry.h"

/* mkdir -p. Returns 0 or LAPSE_EIO with a reason. */
static int make_dirs(const char *path, char *err, size_t errlen)
{
    char tmp[PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof(tmp)) {
        snprintf(err, errlen, "data dir path \"%s\" is empty or too long", path);
        return LAPSE_EIO;
    }
    memcpy(tmp, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (tmp[i] != '/' && tmp[i] != 0) {
            continue;
        }
        char saved = tmp[i];
        tmp[i] = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot create data dir %s: %s: %s", path, tmp, strerror(errno));
            return LAPSE_EIO;
        }
        tmp[i] = saved;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "data dir %s is not a directory", path);
        return LAPSE_EIO;
    }
    return 0;
}

static int open_store(node_server *ns, char *err, size_t errlen)
{
    char why[512] = "";
    int rv = make_dirs(ns->data_dir, err, errlen);
    if (rv != 0) {
        return rv;
    }
    rv = store_open(&ns->st, ns->data_dir, why, sizeof(why));
    if (rv != 0) {
        int locked = strstr(why, "lock") != NULL || strstr(why, "LOCK") != NULL;
        snprintf(err, errlen, "data dir %s is unusable: %s%s", ns->data_dir, why,
                 locked ? " (is another lapse-node using it?)" : "");
        ns->st = NULL;
        return LAPSE_EIO;
    }
    return 0;
}

/* Invariant 1 of node.h: record our id in a new data dir, refuse another. */
static int check_node_id(node_server *ns, char *err, size_t errlen)
{
    buf val;
    buf_init(&val);
    int found = 0;
    char why[256] = "";
    int rv = store_meta_get(ns->st, NODE_META_ID, &val, &found, why, sizeof(why));
    if (rv != 0) {
        snprintf(err, errlen, "data dir %s: reading the node id: %s", ns->data_dir, why);
        goto out;
    }
    if (found) {
        char text[16] = "";
        memcpy(text, val.data, val.len < sizeof(text) - 1 ? val.len : sizeof(text) - 1);
        char *end = NULL;
        unsigned long stored = strtoul(text, &end, 10);
        if (end == text || *end != 0) {
            snprintf(err, errlen, "data dir %s: stored node id \"%s\" is corrupt", ns->data_dir,
                     text);
            rv = LAPSE_ECORRUPT;
        } else if (stored != ns->id) {
            snprintf(err, errlen,
                     "data dir %s belongs to node %lu, not node %u: use --id %lu or another "
                     "--data dir",
                     ns->data_dir, stored, ns->id, stored);
            rv = LAPSE_ESTATE;
        }
        goto out;
    }
    char text[16];
    int n = snprintf(text, sizeof(text), "%u", ns->id);
    if ((rv = store_meta_put(ns->st, NODE_META_ID, text, (size_t)n, 1, why, sizeof(why))) != 0) {
        snprintf(err, errlen, "data dir %s: recording the node id: %s", ns->data_dir, why);
    }
out:
    buf_fini(&val);
    return rv;
}

/* Invariant 1 of node.h: reads the data dir's incarnation into
 * ns->incarnation, or makes one (random, nonzero) for a dir without. */
static int load_incarnation(node_server *ns, char *err, size_t errlen)
{
    buf val;
    buf_init(&val);
    int found = 0;
    char why[256] = "";
    int rv = store_meta_get(ns->st, NODE_META_INCARNATION, &val, &found, why, sizeof(why));
    if (rv != 0) {
        snprintf(err, errlen, "data dir %s: reading its incarnation: %s", ns->data_dir, why);
        goto out;
    }
    if (found) {
        char text[17] = "";
        char *end = NULL;
        memcpy(text, val.data, val.len < sizeof(text) - 1 ? val.len : sizeof(text) - 1);
        ns->incarnation = strtoull(text, &end, 16);
        if (val.len != 16 || *end != '\0' || ns->incarnation == 0) {
            snprintf(err, errlen, "data dir %s: stored incarnation \"%s\" is corrupt", ns->data_dir,
                     text);
            rv = LAPSE_ECORRUPT;
        }
        goto out;
    }
    uint64_t inc = 0;
    while (inc == 0) {
        if (getrandom(&inc, sizeof(inc), 0) != (ssize_t)sizeof(inc)) {
            snprintf(err, errlen, "data dir %s: no random incarnation: %s", ns->data_dir,
                     strerror(errno));
            rv = LAPSE_EIO;
            goto out;
        }
    }
    char text[17];
    snprintf(text, sizeof(text), "%016" PRIx64, inc);
    if ((rv = store_meta_put(ns->st, NODE_META_INCARNATION, text, 16, 1, why, sizeof(why))) != 0) {
        snprintf(err, errlen, "data dir %s: recording its incarnation: %s", ns->data_dir, why);
        goto out;
    }
    ns->incarnation = inc;
    log_info("data dir %s is new: incarnation %s", ns->data_dir, text);
out:
    buf_fini(&val);
    return rv;
}

static int copy_str(char *dst, size_t cap, const char *src, const char *what, char *err,
                    size_t errlen)
{
    if (strlen(src) >= cap) {
        snprintf(err, errlen, "%s is too long (at most %zu characters)", what, cap - 1);
        return LAPSE_EINVAL;
    }
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

/* The expiry engine's delete hook: the sweep's deletes are outbox records. */
static void on_ttl_delete(void *arg, uint32_t table_id, uint32_t part)
{
    node_server *ns = arg;
    shipper_notify(ns->shipper, table_id, part);
}

/* Replicas confirmed records of a partition this node leads: more of its
 * outbox may be shippable (logship.h). */
static void on_confirmed(void *arg, uint32_t table_id, uint32_t part)
{
    node_server *ns = arg;
    shipper_notify(ns->shipper, table_id, part);
}

/* A finished backfill is what turns describe-ttl ENABLED: report it now
 * rather than at the next heartbeat, up to 500 ms later. */
static void on_ttl_backfilled(void *arg)
{
    membership_heartbeat_soon(arg);
}

/* node_open's phases. Each returns 0 or a LAPSE_* code with err set; after
 * a failed phase node_open closes what was made (node_close). */

/* The options into ns: settings and the addresses, checked for length. */
static int take_options(node_server *ns, const node_options *opt, char *err, size_t errlen)
{
    int rv;
    ns->id = opt->id;
    ns->workers = opt->workers;
    ns->snapshot_rate_mb = opt->snapshot_rate_mb;
    ns->snapshot_nice = opt->snapshot_nice;
    snprintf(ns->zone, sizeof(ns->zone), "%s", opt->zone != NULL ? opt->zone : "");
    ns->ttl_opt = opt->ttl;
    ns->repl_workers = opt->repl_workers > 0 ? opt->repl_workers : SHIPPER_DEFAULT_WORKERS;
    if (opt->cluster_token != NULL) {
        snprintf(ns->cluster_token, sizeof(ns->cluster_token), "%s", opt->cluster_token);
        ns->cluster_token_len = strlen(ns->cluster_token);
    }
    ns->stream_trim_interval_ms = opt->stream_trim_interval_ms;
    ns->debug_repl_kill_after_batches = opt->debug_repl_kill_after_batches;
    ns->debug_repl_hold_ms = opt->debug_repl_hold_ms;
    if (opt->debug_fault_dir != NULL) {
        snprintf(ns->debug_fault_dir, sizeof(ns->debug_fault_dir), "%s", opt->debug_fault_dir);
    }
    atomic_init(&ns->registered, 0);
    atomic_init(&ns->clock_skew_ms, 0);
    atomic_init(&ns->promotions, 0);
    const char *adv = opt->advertise_url != NULL ? opt->advertise_url : opt->listen_url;
    const char *coord =
        opt->coordinator_url != NULL ? opt->coordinator_url : NODE_DEFAULT_COORDINATOR;
    if ((rv = copy_str(ns->listen_url, sizeof(ns->listen_url), opt->listen_url, "--listen", err,
                       errlen)) != 0 ||
        (rv = copy_str(ns->advertise_url, sizeof(ns->advertise_url), adv, "--advertise", err,
                       errlen)) != 0 ||
        (rv = copy_str(ns->coordinator_url, sizeof(ns->coordinator_url), coord, "--coordinator",
                       err, errlen)) != 0 ||
        (rv = copy_str(ns->data_dir, sizeof(ns->data_dir), opt->data_dir, "--data", err, errlen)) !=
            0 ||
        (rv = copy_str(ns->metrics_listen, sizeof(ns->metrics_listen),
                       opt->metrics_listen != NULL ? opt->metrics_listen : "", "--metrics-listen",
                       err, errlen)) != 0) {
        return rv;
    }
    return 0;
}

/* The map, telemetry, the replication log shipping, the streams, the
 * shipper, refills and the expiry engine, in the order each needs the
 * ones before. */
static int open_engines(node_server *ns, char *err, size_t errlen)
{
    int rv;
    ns->maps_inited = 1; /* maps_init creates its locks before it can fail */
    if ((rv = maps_init(ns, err, errlen)) != 0) {
        return rv;
    }
    if ((rv = telemetry_init(ns, err, errlen)) != 0) {
        return rv;
    }
    for (int i = 0; i < NODE_REPL_LOCKS; i++) {
        pthread_mutex_init(&ns->repl_locks[i], NULL);
    }
    ns->repl_locks_inited = 1;
    /* logship first: the shipper's workers ask it what they may ship. */
    if ((rv = logship_open(&ns->logship, ns)) != 0) {
        snprintf(err, errlen, "out of memory");
        return rv;
    }
    logship_on_confirmed(ns->logship, on_confirmed, ns);
    if ((rv = streams_open(&ns->streams, ns, ns->stream_trim_interval_ms, err, errlen)) != 0 ||
        (rv = shipper_open(&ns->shipper, ns, ns->repl_workers, err, errlen)) != 0 ||
        (rv = refill_open(&ns->refill, ns, err, errlen)) != 0) {
        return rv;
    }
    /* The TTL sweeps wake the shipper like writes do (their deletes make
     * outbox records). */
    node_map *m = maps_acquire(ns);
    expiry_engine_hooks hooks = {
        .on_delete = on_ttl_delete, .on_backfilled = on_ttl_backfilled, .arg = ns};
    rv = expiry_engine_open(&ns->ttl, ns->st, ns->id, m->pm, &ns->ttl_opt, ns->metrics, &hooks, err,
                            errlen);
    maps_release(m);
    if (rv != 0) {
        return rv;
    }
    return 0;
}

/* The RPC server on the listen address, its lanes and quick calls. */
static int open_server(node_server *ns, char *err, size_t errlen)
{
    int rv;
    /* Long polls of GetStreamRecords get threads of their own (streams.h).
     * A peer's ReplicateLog takes the urgent lane: this node's writes wait
     * for their rounds on its peers, and the peers' writes for this node's
     * answers, so they must never queue behind those writes (with one lane,
     * every thread of every node waiting for a round would hold the answers
     * up until the rounds time out). */
    static const uint32_t urgent[] = {LAPSE__REQUEST__BODY_REPLICATE_LOG};
    /* Single-item calls that cannot wait run on the thread that received
     * them (handlers_quick); alone in a frame, those that wait (a write
     * for its copies) and a peer's ReplicateLog of records, on their
     * connection's thread (handlers_conn_thread); the others on the
     * workers, side by side; a coalesced frame's writes that wait for
     * their copies, together (handlers_serve_many). */
    rpc_server_options so = {.contexts = NODE_RPC_CONTEXTS,
                             .workers = (ns->workers > 0 ? ns->workers : NODE_DEFAULT_WORKERS) +
                                        STREAMS_MAX_POLLERS,
                             .urgent_calls = urgent,
                             .nurgent = 1,
                             .urgent_workers = NODE_URGENT_WORKERS,
                             .quick = handlers_quick,
                             .conn_thread = handlers_conn_thread,
                             .batchable = handlers_batchable,
                             .serve_many = handlers_serve_many};
    char why[256] = "";
    if ((rv = rpc_server_open(&ns->srv, ns->listen_url, &so, handlers_serve, ns, why,
                              sizeof(why))) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", ns->listen_url, why);
        ns->srv = NULL;
        return rv;
    }
    log_info("node %u listening on %s (advertised as %s), data dir %s", ns->id, ns->listen_url,
             ns->advertise_url, ns->data_dir);
    return 0;
}

int node_open(node_server **out, const node_options *opt, char *err, size_t errlen)
{
    int rv;
    *out = NULL;
    node_server *ns = calloc(1, sizeof(*ns));
    if (ns == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    /* Before anything that may wake the membership thread (the TTL
     * engine's backfill hook), until node_close frees ns. */
    pthread_mutex_init(&ns->stop_lock, NULL);
    clock_cond_init_mono(&ns->stop_cond);
    if ((rv = take_options(ns, opt, err, errlen)) != 0) {
        goto fail;
    }
    if ((rv = open_store(ns, err, errlen)) != 0 || (rv = check_node_id(ns, err, errlen)) != 0 ||
        (rv = load_incarnation(ns, err, errlen)) != 0) {
        goto fail;
    }
    store_set_replog_retain(ns->st,
                            opt->replog_retain > 0 ? opt->replog_retain : REPLOG_RETAIN_DEFAULT);
    if ((rv = open_engines(ns, err, errlen)) != 0 ||
        (rv = rpc_client_open(&ns->coord, ns->coordinator_url, err, errlen)) != 0 ||
        (rv = open_server(ns, err, errlen)) != 0) {
        goto fail;
    }
    if ((rv = telemetry_serve(ns, err, errlen)) != 0) {
        goto fail;
    }
    if (opt->etcd_endpoints != NULL &&
        (rv = registry_open(ns, opt->etcd_endpoints,
                            opt->cluster_name != NULL ? opt->cluster_name : NODE_DEFAULT_CLUSTER,
                            opt->lease_ttl_s > 0 ? opt->lease_ttl_s : REGISTRY_LEASE_TTL_S, err,
                            errlen)) != 0) {
        goto fail;
    }
    if ((rv = membership_start(ns, err, errlen)) != 0) {
        goto fail;
    }
    if ((rv = logship_start(ns->logship)) != 0) {
        snprintf(err, errlen, "cannot start the replica resync thread");
        goto fail;
    }
    *out = ns;
    return 0;
fail:
    node_close(ns);
    return rv;
}

/* The step node_close is in, for the shutdown watchdog (main.c): a step
 * that hangs is named in the log rather than guessed at. */
static _Atomic(const char *) close_step = "not closing";

const char *node_close_step(void)
{
    return atomic_load(&close_step);
}

#define STEP(name) atomic_store(&close_step, (name))

void node_close(node_server *ns)
{
    if (ns == NULL) {
        return;
    }
    STEP("logship_stop");
    if (ns->logship != NULL) {
        logship_stop(ns->logship); /* no more resync calls from its thread */
    }
    STEP("refill_close");
    refill_close(ns->refill); /* no more fills from its thread */
    ns->refill = NULL;
    STEP("membership_stop");
    membership_stop(ns); /* no more coordinator calls from the thread */
    STEP("registry_close");
    registry_close(ns, 1); /* our key goes: the coordinators see us DOWN now */
    STEP("streams_stop");
    streams_stop(ns->streams); /* long polls answer now; retention stops */
    STEP("telemetry_stop");
    telemetry_stop(ns); /* the endpoint reads the RPC server, expiry engine, shipper and store */
    STEP("rpc_server_close");
    rpc_server_close(ns->srv); /* waits for running handlers */
    ns->srv = NULL;
    STEP("expiry_engine_close");
    expiry_engine_close(ns->ttl); /* its threads finish their current step */
    ns->ttl = NULL;
    STEP("shipper_close");
    shipper_close(ns->shipper); /* its workers finish their current round */
    ns->shipper = NULL;
    streams_free(ns->streams);
    ns->streams = NULL;
    STEP("logship_close");
    logship_close(ns->logship); /* no write in flight: the server is closed */
    ns->logship = NULL;
    STEP("rpc_client_close(coordinator)");
    rpc_client_close(ns->coord);
    ns->coord = NULL;
    STEP("maps_fini");
    if (ns->maps_inited) {
        maps_fini(ns);
    }
    telemetry_fini(ns);
    if (ns->repl_locks_inited) {
        for (int i = 0; i < NODE_REPL_LOCKS; i++) {
            pthread_mutex_destroy(&ns->repl_locks[i]);
        }
    }
    STEP("store_close");
    store_close(ns->st);
    pthread_cond_destroy(&ns->stop_cond);
    pthread_mutex_destroy(&ns->stop_lock);
    free(ns);
    STEP("closed");
}
