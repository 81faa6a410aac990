/*
 * client.c: the client handle: connecting, the cached partition map, the pool
 * of node connections and the retry policy described in client.h (which
 * node a call goes to is route.c's).
 */
#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../common/lapse_err.h"
#include "../rpc/wire.h"
#include "mapsrc.h"

/* ------------------------------------------------------------------------ */
/* Errors (client_err and client_ok are errors.c's)                        */
/* ------------------------------------------------------------------------ */

/* Transport failures name the peer; failures the server reported carry the
 * server's message, which already says what was wrong with the request. */
static int peer_err(lapse_error *err, int code, const char *peer, const char *msg, int timeout_ms)
{
    switch (code) {
    case LAPSE_ETIMEDOUT:
        /* The server's own time-out (e.g. a coordinator's call to etcd) says
         * what ran out of time; the transport's adds nothing to this. */
        if (msg[0] != '\0' && strstr(msg, "no reply within") == NULL) {
            return client_err(err, code, "%s: timed out: %s", peer, msg);
        }
        return client_err(err, code, "%s: timed out (no reply within the %d ms timeout)", peer,
                          timeout_ms);
    case LAPSE_EUNAVAILABLE:
        return client_err(err, code, "%s: unavailable%s%s", peer, msg[0] ? ": " : "", msg);
    case LAPSE_EPROTO:
        return client_err(err, code, "%s: protocol error%s%s", peer, msg[0] ? ": " : "", msg);
    case LAPSE_ECONDITION: {
        /* Say it once, however the server words it. */
        static const char dup[] = "the conditional request failed";
        if (strncmp(msg, dup, sizeof dup - 1) == 0) {
            msg += sizeof dup - 1;
            msg += strspn(msg, ": ");
        }
        return client_err(err, code, "conditional check failed%s%s", msg[0] ? ": " : "", msg);
    }
    default:
        if (msg[0] != '\0') {
            return client_err(err, code, "%s", msg);
        }
        return client_err(err, code, "%s: %s", peer, lapse_strerror(code));
    }
}

int client_node_err(lapse_error *err, int code, const client_route *r, const char *msg,
                    int timeout_ms)
{
    char peer[PMAP_MAX_ADDR + 32];
    snprintf(peer, sizeof peer, "node %u (%s)", (unsigned)r->node_id, r->addr);
    return peer_err(err, code, peer, msg, timeout_ms);
}

static int coord_err(lapse_client *c, lapse_error *err, int code, const char *msg, int timeout_ms)
{
    char peer[PMAP_MAX_ADDR + 32];
    snprintf(peer, sizeof peer, "coordinator %s", c->url);
    return peer_err(err, code, peer, msg, timeout_ms);
}

/* ------------------------------------------------------------------------ */
/* Timing                                                                    */
/* ------------------------------------------------------------------------ */

int client_timeout_ms(lapse_client *c)
{
    return atomic_load(&c->timeout_ms);
}

int client_hide_expired(lapse_client *c, int call_flag)
{
    return call_flag != 0 || atomic_load(&c->hide_expired) != 0;
}

void client_request_id(uint8_t id[WIRE_REQUEST_ID_BYTES])
{
    if (getrandom(id, WIRE_REQUEST_ID_BYTES, 0) == WIRE_REQUEST_ID_BYTES) {
        /* Led by the wall clock's milliseconds (u48be), so that a
         * partition's request records go into its memtable next to the
         * newest ones (the family's insert hints, partition/store_int.h);
         * 80 random bits stay to tell apart the calls of one millisecond. */
        uint64_t ms = (uint64_t)clock_wall_now().ms;
        for (int i = 0; i < CLIENT_REQUEST_ID_CLOCK_BYTES; i++) {
            id[i] = (uint8_t)(ms >> (8 * (CLIENT_REQUEST_ID_CLOCK_BYTES - 1 - i)));
        }
        return;
    }
    /* No entropy to be had (a kernel without getrandom): distinct per call
     * still, from the clock, the process and a counter (splitmix64). */
    static _Atomic uint64_t calls;
    uint64_t x = (uint64_t)clock_wall_now().ms ^ ((uint64_t)getpid() << 40) ^
                 (atomic_fetch_add(&calls, 1) << 20);
    for (size_t i = 0; i < WIRE_REQUEST_ID_BYTES; i += 8) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        memcpy(id + i, &z, 8);
    }
}

void client_backoff(int64_t *backoff_ms, clock_mono deadline)
{
    int64_t left = clock_mono_remaining_ms(deadline);
    clock_sleep_ms(*backoff_ms < left ? *backoff_ms : left);
    *backoff_ms *= 2;
    if (*backoff_ms > CLIENT_BACKOFF_MAX_MS) {
        *backoff_ms = CLIENT_BACKOFF_MAX_MS;
    }
}

/* The budget of one attempt of an idempotent call: a share of what is left,
 * so that a peer that never answers still leaves time to retry elsewhere
 * after a map refresh. Non-idempotent calls get everything left. */
static int attempt_ms(int64_t left, int timeout_ms, int idempotent)
{
    int64_t cap = timeout_ms / 2 > 1000 ? timeout_ms / 2 : 1000;
    if (idempotent && left > cap) {
        left = cap;
    }
    return left < 1 ? 1 : (int)left;
}

static int retryable(int rv, int idempotent)
{
    return rv == LAPSE_EWRONGNODE ||
           (idempotent && (rv == LAPSE_ETIMEDOUT || rv == LAPSE_EUNAVAILABLE));
}

/* The asynchronous calls' attempt is idempotent (a put's request id rides
 * it, as on the blocking call's retries). */
int lapse_retryable(int status)
{
    return retryable(status, 1);
}

/* ------------------------------------------------------------------------ */
/* Connection and the map cache                                              */
/* ------------------------------------------------------------------------ */

int lapse_connect_timeout(lapse_client **out, const char *url, int timeout_ms, lapse_error *err)
{
    lapse_connect_options o = {.timeout_ms = timeout_ms};
    return lapse_connect_opts(out, url, &o, err);
}

int lapse_connect_opts(lapse_client **out, const char *url, const lapse_connect_options *opts,
                       lapse_error *err)
{
    char msg[256] = "";
    int rv;
    int timeout_ms = opts != NULL ? opts->timeout_ms : 0;

    if (out == NULL) {
        return client_err(err, LAPSE_EINVAL, "lapse_connect: out is NULL");
    }
    *out = NULL;
    if (url == NULL || url[0] == '\0') {
        url = getenv("LAPSE_COORDINATOR");
    }
    if (url == NULL || url[0] == '\0') {
        url = LAPSE_DEFAULT_COORDINATOR;
    }
    if (strlen(url) >= PMAP_MAX_ADDR) {
        return client_err(err, LAPSE_EINVAL, "coordinator URL is too long");
    }
    lapse_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return client_err(err, LAPSE_ENOMEM, "cannot create a mutex");
    }
    strcpy(c->url, url);
    c->loop = opts != NULL && opts->loop != NULL ? client_loop_rpc(opts->loop) : NULL;
    if (opts != NULL && opts->map_cache != NULL && opts->map_cache[0] != '\0' &&
        (c->map_cache = strdup(opts->map_cache)) == NULL) {
        pthread_mutex_destroy(&c->mu);
        free(c);
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    atomic_init(&c->timeout_ms, timeout_ms > 0 ? timeout_ms : CLIENT_DEFAULT_TIMEOUT_MS);
    atomic_init(&c->hide_expired, 0);
    atomic_init(&c->read_turn, 0u);
    atomic_init(&c->map_suspect, 0);
    /* The environment's token until the caller sets one. */
    const char *token = getenv("LAPSE_ADMIN_TOKEN");
    if (token != NULL && token[0] != '\0' && (c->admin_token = strdup(token)) == NULL) {
        lapse_close(c);
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    if ((rv = rpc_client_open_on(&c->coord, url, c->loop, msg, sizeof msg)) != 0) {
        lapse_close(c);
        return client_err(err, rv, "coordinator %s: %s", url, msg[0] ? msg : lapse_strerror(rv));
    }

    /* The first map: the coordinator may be starting, so retry until the
     * timeout like any idempotent call. */
    int total = client_timeout_ms(c);
    clock_mono deadline = clock_mono_after_ms(total);
    int64_t backoff = CLIENT_BACKOFF_MIN_MS;
    for (;;) {
        int64_t left = clock_mono_remaining_ms(deadline);
        rv = client_refresh(c, attempt_ms(left, total, 1), err);
        if (rv == 0) {
            break;
        }
        if (!retryable(rv, 1) || clock_mono_remaining_ms(deadline) <= 0) {
            if (rv == LAPSE_ETIMEDOUT || rv == LAPSE_EUNAVAILABLE) {
                client_err(err, rv,
                           "coordinator %s: %s within %d ms (is lapse-coordinator running?)%s", url,
                           rv == LAPSE_ETIMEDOUT ? "no reply" : "unreachable", total,
                           c->map_cache == NULL ? ""
                                                : "; and no node of the map cached in the "
                                                  "cache file answered (or there is none)");
            }
            lapse_close(c);
            return rv;
        }
        client_backoff(&backoff, deadline);
    }
    *out = c;
    return client_ok(err);
}

int lapse_connect(lapse_client **out, const char *url, lapse_error *err)
{
    return lapse_connect_timeout(out, url, 0, err);
}

void lapse_close(lapse_client *c)
{
    if (c == NULL) {
        return;
    }
    for (size_t i = 0; i < c->nconns; i++) {
        rpc_client_close(c->conns[i].rpc);
    }
    free(c->conns);
    rpc_client_close(c->coord);
    client_map_release(c->map_pin);
    free(c->map_cache);
    free(c->admin_token);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void lapse_set_timeout_ms(lapse_client *c, int timeout_ms)
{
    if (c != NULL) {
        atomic_store(&c->timeout_ms, timeout_ms > 0 ? timeout_ms : CLIENT_DEFAULT_TIMEOUT_MS);
    }
}

void lapse_set_admin_token(lapse_client *c, const char *token)
{
    if (c == NULL) {
        return;
    }
    char *copy = token != NULL ? strdup(token) : NULL;
    pthread_mutex_lock(&c->mu);
    free(c->admin_token);
    c->admin_token = copy;
    pthread_mutex_unlock(&c->mu);
}

void lapse_set_hide_expired(lapse_client *c, int on)
{
    if (c != NULL) {
        atomic_store(&c->hide_expired, on != 0);
    }
}

int lapse_refresh_map(lapse_client *c, lapse_error *err)
{
    if (c == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    int rv = client_refresh(c, client_timeout_ms(c), err);
    return rv != 0 ? rv : client_ok(err);
}

void lapse_free(void *p)
{
    free(p);
}

struct client_map {
    pmap *pm; /* owned */
    atomic_int holders;
};

void client_map_release(client_map *pin)
{
    if (pin != NULL && atomic_fetch_sub(&pin->holders, 1) == 1) {
        pmap_free(pin->pm);
        free(pin);
    }
}

/* Makes pm the client's map unless the one it has is newer; takes pm. */
static void install_map(lapse_client *c, pmap *pm)
{
    client_map *h = malloc(sizeof(*h));
    if (h == NULL) {
        pmap_free(pm); /* keep the map we have */
        return;
    }
    h->pm = pm;
    atomic_init(&h->holders, 1);
    pthread_mutex_lock(&c->mu);
    client_map *old = c->map_pin;
    if (c->map != NULL && c->map->version > pm->version) {
        old = h; /* a node's map can lag the coordinators' */
    } else {
        c->map = pm;
        c->map_pin = h;
        c->map_mono_ms = clock_mono_now().ms;
    }
    pthread_mutex_unlock(&c->mu);
    client_map_release(old);
}

/* No coordinator answers: the newest map of the nodes of the map we have,
 * else of the cache file (mapsrc.h), or NULL. */
static pmap *map_from_nodes(lapse_client *c, int timeout_ms)
{
    pthread_mutex_lock(&c->mu);
    pmap *from = c->map != NULL ? pmap_dup(c->map) : NULL;
    pthread_mutex_unlock(&c->mu);
    if (from == NULL && c->map_cache != NULL) {
        from = mapsrc_cache_load(c->map_cache);
    }
    if (from == NULL) {
        return NULL;
    }
    rpc_client *nodes[MAPSRC_MAX_NODES];
    size_t n = 0;
    for (size_t i = 0; i < from->nnodes && n < MAPSRC_MAX_NODES; i++) {
        n += client_conn(c, from->nodes[i].address, &nodes[n], NULL) == 0;
    }
    pmap_free(from);
    return mapsrc_ask_nodes(nodes, n, timeout_ms);
}

int client_refresh(lapse_client *c, int timeout_ms, lapse_error *err)
{
    Lapse__GetPartitionMapRequest body = LAPSE__GET_PARTITION_MAP_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    char msg[256] = "";
    pmap *pm = NULL;
    int rv;

    req.body_case = LAPSE__REQUEST__BODY_GET_PARTITION_MAP;
    req.get_partition_map = &body;
    int elsewhere = c->map_cache != NULL || c->map != NULL;
    if (elsewhere && !rpc_client_connected(c->coord, MAPSRC_CONNECT_WAIT_MS)) {
        rv = LAPSE_EUNAVAILABLE; /* not one answers: the nodes, at once */
        snprintf(msg, sizeof msg, "no coordinator is reachable");
    } else {
        rv = rpc_call(c->coord, &req, timeout_ms, &resp, msg, sizeof msg);
    }
    if (rv == 0) {
        char who[PMAP_MAX_ADDR + 16];
        snprintf(who, sizeof who, "coordinator %s", c->url);
        rv = mapsrc_decode(resp, who, &pm, msg, sizeof msg);
        if (rv != 0) {
            client_err(err, rv, "%s", msg);
        }
    } else {
        coord_err(c, err, rv, msg, timeout_ms);
    }
    rpc_response_free(resp);
    if ((rv == LAPSE_ETIMEDOUT || rv == LAPSE_EUNAVAILABLE) && elsewhere) {
        if ((pm = map_from_nodes(c, timeout_ms)) != NULL) {
            rv = 0;
        } else if (err != NULL) {
            size_t len = strlen(err->message);
            snprintf(err->message + len, sizeof err->message - len,
                     "; no node of the last known map answered either");
        }
    }
    if (rv != 0) {
        return rv;
    }
    if (c->map_cache != NULL && pm->version != c->cache_version) {
        mapsrc_cache_save(c->map_cache, pm);
        c->cache_version = pm->version; /* refreshes race rarely: at worst a rewrite */
    }
    install_map(c, pm);
    return client_ok(err);
}

void client_map_suspect(lapse_client *c, int rv)
{
    if (rv == LAPSE_ETIMEDOUT || rv == LAPSE_EUNAVAILABLE) {
        atomic_store(&c->map_suspect, 1);
    }
}

void client_refresh_suspect(lapse_client *c, int64_t left_ms)
{
    if (atomic_load(&c->map_suspect) && atomic_exchange(&c->map_suspect, 0)) {
        /* A third of the call's time: the coordinator, then (when it is
         * silent) the nodes, each get at most that, so the call keeps a
         * third for itself. A failed refresh keeps the old map. */
        int64_t share = left_ms / 3;
        client_refresh(c, share < 1 ? 1 : (int)share, NULL);
    }
}

int client_table(lapse_client *c, const char *name, table_schema *out, lapse_error *err)
{
    const table_schema *t;
    client_map *pin;
    int rv = client_table_pin(c, name, &t, &pin, err);
    if (rv == 0) {
        *out = *t;
        client_map_release(pin);
    }
    return rv;
}

int client_table_pin(lapse_client *c, const char *name, const table_schema **out, client_map **pin,
                     lapse_error *err)
{
    return client_table_pin_opt(c, name, 1, out, pin, err);
}

int client_table_pin_opt(lapse_client *c, const char *name, int may_fetch, const table_schema **out,
                         client_map **pin, lapse_error *err)
{
    *out = NULL;
    *pin = NULL;
    if (name == NULL || name[0] == '\0') {
        return client_err(err, LAPSE_EINVAL, "no table name given");
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        pthread_mutex_lock(&c->mu);
        const pmap_table *t = c->map != NULL ? pmap_table_find(c->map, name) : NULL;
        if (t != NULL) {
            *out = &t->schema;
            *pin = c->map_pin;
            atomic_fetch_add(&c->map_pin->holders, 1);
        }
        pthread_mutex_unlock(&c->mu);
        if (*out != NULL) {
            return 0;
        }
        if (!may_fetch) {
            return client_err(err, LAPSE_ENOTFOUND,
                              "table \"%s\" is not in the client's map (fetching it blocks)", name);
        }
        if (attempt == 0) {
            int rv = client_refresh(c, client_timeout_ms(c), err);
            if (rv != 0) {
                return rv;
            }
        }
    }
    return client_err(err, LAPSE_ENOTFOUND, "table \"%s\" does not exist", name);
}

int client_conn(lapse_client *c, const char *url, rpc_client **out, lapse_error *err)
{
    char msg[256] = "";
    int rv = 0;

    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nconns; i++) {
        if (strcmp(c->conns[i].url, url) == 0) {
            *out = c->conns[i].rpc;
            goto out;
        }
    }
    if (c->nconns == c->capconns) {
        size_t cap = c->capconns ? c->capconns * 2 : 8;
        node_conn *v = realloc(c->conns, cap * sizeof *v);
        if (v == NULL) {
            rv = client_err(err, LAPSE_ENOMEM, "out of memory");
            goto out;
        }
        c->conns = v;
        c->capconns = cap;
    }
    /* rpc_client_open never blocks (it dials in the background), so holding
     * the lock here is short. */
    node_conn *nc = &c->conns[c->nconns];
    if ((rv = rpc_client_open_on(&nc->rpc, url, c->loop, msg, sizeof msg)) != 0) {
        rv = client_err(err, rv, "node %s: %s", url, msg[0] ? msg : lapse_strerror(rv));
        goto out;
    }
    snprintf(nc->url, sizeof nc->url, "%s", url);
    c->nconns++;
    *out = nc->rpc;
out:
    pthread_mutex_unlock(&c->mu);
    return rv;
}

/* ------------------------------------------------------------------------ */
/* Calls with retries                                                        */
/* ------------------------------------------------------------------------ */

/* client_call_part's failure; a call that no node answered marks the map
 * suspect (client_map_suspect). A call that ran out of time after a node
 * refused it (WRONG_NODE: a stale map, or a primary that may not act, e.g.
 * without its etcd lease) says that refusal rather than the last try's
 * time-out, which only says the retries ran out. */
static int part_err(lapse_client *c, lapse_error *err, int rv, const client_route *r,
                    const char *msg, const char *refused, int timeout_ms)
{
    if (refused[0] == '\0') { /* no node answered: the map may name a dead one */
        client_map_suspect(c, rv);
    }
    if (rv == LAPSE_ETIMEDOUT && refused[0] != '\0') {
        return client_err(err, LAPSE_EWRONGNODE, "%s (retried until the %d ms timeout ran out)",
                          refused, timeout_ms);
    }
    return client_node_err(err, rv, r, msg, timeout_ms);
}

int client_call_part(lapse_client *c, client_target *tg, Lapse__Request *req, int idempotent,
                     Lapse__Response **resp, lapse_error *err)
{
    int total = client_timeout_ms(c);
    clock_mono deadline = clock_mono_after_ms(total);
    int64_t backoff = CLIENT_BACKOFF_MIN_MS;
    int wrong_node_seen = 0;
    int down_rechecked = 0;
    char msg[256], refused[256] = "";
    int rv;

    *resp = NULL;
    client_refresh_suspect(c, total);
    for (;;) {
        client_route r = {0};
        rpc_client *rc;
        if ((rv = client_route_of(c, tg, &r, err)) != 0) {
            /* A node marked DOWN in an old map may be back: look once. */
            if (r.down && r.map_age_ms > CLIENT_DOWN_RECHECK_MS && !down_rechecked++) {
                client_refresh(c, attempt_ms(clock_mono_remaining_ms(deadline), total, 1), NULL);
                continue;
            }
            return rv;
        }
        if ((rv = client_conn(c, r.addr, &rc, err)) != 0) {
            return rv;
        }
        req->pmap_version = r.pmap_version;
        int budget = attempt_ms(clock_mono_remaining_ms(deadline), total, idempotent);
        msg[0] = '\0';
        rv = rpc_call(rc, req, budget, resp, msg, sizeof msg);
        if (rv == 0) {
            return client_ok(err);
        }
        rpc_response_free(*resp);
        *resp = NULL;
        client_target_failed(tg, r.node_id, rv);
        if (rv == LAPSE_EWRONGNODE) {
            snprintf(refused, sizeof refused, "%s", msg); /* the node's own reason */
        }
        if (!retryable(rv, idempotent) || clock_mono_remaining_ms(deadline) <= 0) {
            return part_err(c, err, rv, &r, msg, refused, total);
        }
        /* The first WRONG_NODE is usually a stale map: refresh and go at once.
         * Later ones mean the map is moving: back off. */
        if (rv != LAPSE_EWRONGNODE || wrong_node_seen++ > 0) {
            client_backoff(&backoff, deadline);
        }
        int64_t left = clock_mono_remaining_ms(deadline);
        if (left <= 0) {
            return part_err(c, err, rv, &r, msg, refused, total);
        }
        /* A failed refresh (coordinator down) keeps the old map. */
        client_refresh(c, attempt_ms(left, total, 1), NULL);
    }
}

int client_call_part_start(lapse_client *c, client_target *tg, Lapse__Request *req,
                           rpc_done_fn done, void *arg, client_route *r, int *timeout_ms,
                           lapse_error *err)
{
    rpc_client *rc;
    char msg[256] = "";
    int rv;
    if (atomic_load(&c->map_suspect)) {
        return client_err(err, LAPSE_EWRONGNODE,
                          "the partition map is to be fetched again first (a blocking call does)");
    }
    if ((rv = client_route_of(c, tg, r, err)) != 0 ||
        (rv = client_conn(c, r->addr, &rc, err)) != 0) {
        return rv;
    }
    req->pmap_version = r->pmap_version;
    int total = client_timeout_ms(c);
    *timeout_ms = attempt_ms(total, total, 1);
    if ((rv = rpc_call_async(rc, req, *timeout_ms, done, arg, msg, sizeof msg)) != 0) {
        return client_node_err(err, rv, r, msg, *timeout_ms);
    }
    return 0;
}

void client_call_part_failed(lapse_client *c, int rv)
{
    if (rv == LAPSE_EWRONGNODE) {
        atomic_store(&c->map_suspect, 1); /* a blocking call refreshes before it goes */
    } else {
        client_map_suspect(c, rv);
    }
}

int client_call_coord(lapse_client *c, Lapse__Request *req, int idempotent, Lapse__Response **resp,
                      lapse_error *err)
{
    int total = client_timeout_ms(c);
    clock_mono deadline = clock_mono_after_ms(total);
    int64_t backoff = CLIENT_BACKOFF_MIN_MS;
    char *token = NULL;
    char msg[256];
    int rv;

    /* A copy: lapse_set_admin_token may replace the client's meanwhile. */
    pthread_mutex_lock(&c->mu);
    if (c->admin_token != NULL && (token = strdup(c->admin_token)) == NULL) {
        pthread_mutex_unlock(&c->mu);
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    pthread_mutex_unlock(&c->mu);
    static char none[] = "";
    req->admin_token = token != NULL ? token : none;

    *resp = NULL;
    for (;;) {
        int budget = attempt_ms(clock_mono_remaining_ms(deadline), total, idempotent);
        msg[0] = '\0';
        if (!rpc_client_connected(c->coord, MAPSRC_CONNECT_WAIT_MS)) {
            /* Nothing was sent, so even a non-idempotent call may retry
             * (a coordinator may be restarting) until the deadline. */
            rv = LAPSE_EUNAVAILABLE;
            snprintf(msg, sizeof msg,
                     "no coordinator is reachable (is lapse-coordinator running?)");
            if (clock_mono_remaining_ms(deadline) <= 0) {
                rv = coord_err(c, err, rv, msg, total);
                break;
            }
            client_backoff(&backoff, deadline);
            continue;
        }
        rv = rpc_call(c->coord, req, budget, resp, msg, sizeof msg);
        if (rv == 0) {
            rv = client_ok(err);
            break;
        }
        rpc_response_free(*resp);
        *resp = NULL;
        if (rv == LAPSE_EWRONGNODE || !retryable(rv, idempotent) ||
            clock_mono_remaining_ms(deadline) <= 0) {
            rv = coord_err(c, err, rv, msg, total);
            break;
        }
        client_backoff(&backoff, deadline);
        if (clock_mono_remaining_ms(deadline) <= 0) {
            rv = coord_err(c, err, rv, msg, total);
            break;
        }
    }
    req->admin_token = none;
    free(token);
    return rv;
}

lapse_item *client_item_wrap(item *it)
{
    lapse_item *w = malloc(sizeof *w);
    if (w != NULL) {
        w->it = it;
    }
    return w;
}
