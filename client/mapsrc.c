/*
 * mapsrc.c: where the client gets its partition map. The coordinators
 * first; when none answers, any node that holds a map (nodes keep the last
 * map they applied, and answer GetPartitionMap), found in the map the
 * client has or, for a new client, in the map cache file an earlier client
 * left (lapse_connect_options.map_cache). So item calls go on while every
 * coordinator is down, even from a new CLI process (client.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/arena.h"
#include "../common/lapse_err.h"
#include "../rpc/wire.h"
#include "client.h"

#define MAX_SOURCES 16            /* nodes asked at once */
#define CONNECT_WAIT_MS 200       /* as rpc_client.c's PICK_WAIT_MS */
#define NODE_ASK_MAX_MS 1000      /* a node's answer is fast or the node is gone */
#define CACHE_MAX (4 * 1024 * 1024)

/* Decodes the GetPartitionMap reply resp of who into *pm. */
static int map_of_reply(Lapse__Response *resp, const char *who, pmap **pm, lapse_error *err)
{
    char msg[256] = "";
    if (resp->body_case != LAPSE__RESPONSE__BODY_GET_PARTITION_MAP ||
        resp->get_partition_map == NULL || resp->get_partition_map->map == NULL) {
        return client_err(err, LAPSE_EPROTO, "%s: reply carries no partition map", who);
    }
    int rv = wire_pmap_from_pb(resp->get_partition_map->map, pm, msg, sizeof msg);
    if (rv != 0) {
        return client_err(err, rv, "%s: bad partition map: %s", who, msg);
    }
    return 0;
}

/* The map in the cache file, or NULL (no file, unreadable, or not a map). */
static pmap *cache_load(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    uint8_t *bytes = malloc(CACHE_MAX);
    size_t n = bytes != NULL ? fread(bytes, 1, CACHE_MAX, f) : 0;
    fclose(f);
    pmap *pm = NULL;
    Lapse__PartitionMap *pb =
        n > 0 && n < CACHE_MAX ? lapse__partition_map__unpack(NULL, n, bytes) : NULL;
    char msg[256];
    if (pb != NULL && wire_pmap_from_pb(pb, &pm, msg, sizeof msg) != 0) {
        pm = NULL;
    }
    lapse__partition_map__free_unpacked(pb, NULL);
    free(bytes);
    return pm;
}

/* Creates the directories leading to path (mkdir -p of its dirname). */
static void make_parents(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            (void)mkdir(dir, 0700);
            *p = '/';
        }
    }
}

/* Writes pm to the cache file, atomically (a temporary file renamed over
 * it). Best effort: a client without a writable cache works as before. */
static void cache_save(const char *path, const pmap *pm)
{
    arena a;
    arena_init(&a);
    Lapse__PartitionMap *pb = wire_pmap_to_pb(&a, pm);
    size_t n = pb != NULL ? lapse__partition_map__get_packed_size(pb) : 0;
    uint8_t *bytes = n > 0 ? arena_alloc(&a, n) : NULL;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    if (bytes != NULL) {
        lapse__partition_map__pack(pb, bytes);
        make_parents(path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            int ok = write(fd, bytes, n) == (ssize_t)n && close(fd) == 0;
            if (!ok || rename(tmp, path) != 0) {
                unlink(tmp);
            }
        }
    }
    arena_fini(&a);
}

/* Asks every node of from at once for its map; *best gets the newest that
 * came back (NULL when none did). */
static void ask_nodes(lapse_client *c, const pmap *from, int timeout_ms, pmap **best)
{
    rpc_multi_call calls[MAX_SOURCES];
    Lapse__Request reqs[MAX_SOURCES];
    Lapse__GetPartitionMapRequest body = LAPSE__GET_PARTITION_MAP_REQUEST__INIT;
    char who[MAX_SOURCES][PMAP_MAX_ADDR + 16];
    size_t n = 0;
    *best = NULL;
    rpc_client *rcs[MAX_SOURCES];
    size_t nopen = 0;
    for (size_t i = 0; i < from->nnodes && nopen < MAX_SOURCES; i++) {
        if (client_conn(c, from->nodes[i].address, &rcs[nopen], NULL) == 0) {
            nopen++;
        }
    }
    /* Ask only the nodes that connect: a dead one would hold the group for
     * the whole timeout. */
    clock_mono until = clock_mono_after_ms(CONNECT_WAIT_MS);
    for (size_t i = 0; i < nopen; i++) {
        int64_t left = clock_mono_remaining_ms(until);
        if (!rpc_client_connected(rcs[i], left > 0 ? (int)left : 0)) {
            continue;
        }
        rpc_client *rc = rcs[i];
        memset(&calls[n], 0, sizeof calls[n]);
        lapse__request__init(&reqs[n]);
        reqs[n].body_case = LAPSE__REQUEST__BODY_GET_PARTITION_MAP;
        reqs[n].get_partition_map = &body;
        calls[n].client = rc;
        calls[n].req = &reqs[n];
        snprintf(who[n], sizeof who[n], "node %s", rpc_client_url(rc));
        n++;
    }
    rpc_call_many(calls, n, timeout_ms < NODE_ASK_MAX_MS ? timeout_ms : NODE_ASK_MAX_MS);
    for (size_t i = 0; i < n; i++) {
        pmap *pm = NULL;
        if (calls[i].rv == 0 && map_of_reply(calls[i].resp, who[i], &pm, NULL) == 0) {
            if (*best == NULL || pm->version > (*best)->version) {
                pmap_free(*best);
                *best = pm;
            } else {
                pmap_free(pm);
            }
        }
        rpc_response_free(calls[i].resp);
    }
}

/* Makes pm the client's map unless the one it has is newer; takes pm. */
static void install(lapse_client *c, pmap *pm)
{
    pthread_mutex_lock(&c->mu);
    pmap *old = c->map;
    if (old != NULL && old->version > pm->version) {
        old = pm; /* a node's map can lag the coordinators' */
    } else {
        c->map = pm;
        c->map_mono_ms = clock_mono_now().ms;
    }
    pthread_mutex_unlock(&c->mu);
    pmap_free(old);
}

int client_refresh(lapse_client *c, int timeout_ms, lapse_error *err)
{
    Lapse__GetPartitionMapRequest body = LAPSE__GET_PARTITION_MAP_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    char msg[256] = "";
    char who[PMAP_MAX_ADDR + 16];
    pmap *pm = NULL;

    req.body_case = LAPSE__REQUEST__BODY_GET_PARTITION_MAP;
    req.get_partition_map = &body;
    int rv;
    snprintf(who, sizeof who, "coordinator %s", c->url);
    if (c->map_cache == NULL && c->map == NULL) {
        rv = rpc_call(c->coord, &req, timeout_ms, &resp, msg, sizeof msg); /* nowhere else */
    } else if (!rpc_client_connected(c->coord, CONNECT_WAIT_MS)) {
        rv = LAPSE_EUNAVAILABLE; /* not one answers: the nodes, at once */
        snprintf(msg, sizeof msg, "no coordinator is reachable");
    } else {
        rv = rpc_call(c->coord, &req, timeout_ms, &resp, msg, sizeof msg);
    }
    if (rv == 0) {
        rv = map_of_reply(resp, who, &pm, err);
    } else {
        client_coord_err(c, err, rv, msg, timeout_ms);
    }
    rpc_response_free(resp);
    if (rv == LAPSE_ETIMEDOUT || rv == LAPSE_EUNAVAILABLE) {
        /* No coordinator: the nodes of the map we have, else of the cache. */
        pthread_mutex_lock(&c->mu);
        pmap *from = c->map != NULL ? pmap_dup(c->map) : NULL;
        pthread_mutex_unlock(&c->mu);
        if (from == NULL && c->map_cache != NULL) {
            from = cache_load(c->map_cache);
        }
        if (from != NULL) {
            ask_nodes(c, from, timeout_ms, &pm);
            pmap_free(from);
            if (pm == NULL && err != NULL) {
                size_t len = strlen(err->message);
                snprintf(err->message + len, sizeof err->message - len,
                         "; no node of the last known map answered either");
            }
        }
        rv = pm != NULL ? 0 : rv;
    }
    if (rv != 0) {
        return rv;
    }
    if (c->map_cache != NULL && pm->version != c->cache_version) {
        cache_save(c->map_cache, pm);
        c->cache_version = pm->version; /* refreshes are serial enough: at worst a rewrite */
    }
    install(c, pm);
    return client_ok(err);
}
