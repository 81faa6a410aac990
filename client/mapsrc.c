/* mapsrc.c: maps from the nodes and the cache file. Contract in mapsrc.h. */
#include "mapsrc.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/arena.h"
#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../rpc/wire.h"

#define CACHE_MAX (4 * 1024 * 1024)

int mapsrc_decode(const Lapse__Response *resp, const char *who, pmap **pm, char *msg, size_t msglen)
{
    char why[256] = "";
    if (resp->body_case != LAPSE__RESPONSE__BODY_GET_PARTITION_MAP ||
        resp->get_partition_map == NULL || resp->get_partition_map->map == NULL) {
        snprintf(msg, msglen, "%s: reply carries no partition map", who);
        return LAPSE_EPROTO;
    }
    int rv = wire_pmap_from_pb(resp->get_partition_map->map, pm, why, sizeof why);
    if (rv != 0) {
        snprintf(msg, msglen, "%s: bad partition map: %s", who, why);
    }
    return rv;
}

pmap *mapsrc_cache_load(const char *path)
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

void mapsrc_cache_save(const char *path, const pmap *pm)
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
            int ok = write(fd, bytes, n) == (ssize_t)n;
            ok = close(fd) == 0 && ok;
            if (!ok || rename(tmp, path) != 0) {
                unlink(tmp);
            }
        }
    }
    arena_fini(&a);
}

pmap *mapsrc_ask_nodes(rpc_client *const *nodes, size_t n, int timeout_ms)
{
    rpc_multi_call calls[MAPSRC_MAX_NODES];
    Lapse__Request reqs[MAPSRC_MAX_NODES];
    Lapse__GetPartitionMapRequest body = LAPSE__GET_PARTITION_MAP_REQUEST__INIT;
    size_t m = 0;
    /* Only the nodes that connect: a dead one would hold the group for the
     * whole timeout. Live ones connect within a millisecond or so of each
     * other, so once one has, the others get a short grace, not the whole
     * wait. */
    if (n > MAPSRC_MAX_NODES) {
        n = MAPSRC_MAX_NODES;
    }
    int up[MAPSRC_MAX_NODES] = {0};
    clock_mono until = clock_mono_after_ms(MAPSRC_CONNECT_WAIT_MS);
    for (size_t nup = 0; nup < n && clock_mono_remaining_ms(until) > 0;) {
        for (size_t i = 0; i < n; i++) {
            if (!up[i] && rpc_client_connected(nodes[i], 0)) {
                up[i] = 1;
                if (nup++ == 0 && clock_mono_remaining_ms(until) > MAPSRC_GRACE_MS) {
                    until = clock_mono_after_ms(MAPSRC_GRACE_MS);
                }
            }
        }
        clock_sleep_ms(1);
    }
    for (size_t i = 0; i < n; i++) {
        if (!up[i]) {
            continue;
        }
        memset(&calls[m], 0, sizeof calls[m]);
        lapse__request__init(&reqs[m]);
        reqs[m].body_case = LAPSE__REQUEST__BODY_GET_PARTITION_MAP;
        reqs[m].get_partition_map = &body;
        calls[m].client = nodes[i];
        calls[m].req = &reqs[m];
        m++;
    }
    rpc_call_many(calls, m, timeout_ms < MAPSRC_ASK_MAX_MS ? timeout_ms : MAPSRC_ASK_MAX_MS);
    pmap *best = NULL;
    for (size_t i = 0; i < m; i++) {
        pmap *pm = NULL;
        char msg[256];
        if (calls[i].rv == 0 && mapsrc_decode(calls[i].resp, rpc_client_url(calls[i].client), &pm,
                                              msg, sizeof msg) == 0) {
            if (best == NULL || pm->version > best->version) {
                pmap_free(best);
                best = pm;
            } else {
                pmap_free(pm);
            }
        }
        rpc_response_free(calls[i].resp);
    }
    return best;
}
