/*
 * mapsrc.h: where a client gets its partition map besides the coordinators:
 * the nodes (they keep the last map they applied and answer
 * GetPartitionMap), found in the map the client has or, for a new client,
 * in the map cache file an earlier client left
 * (lapse_connect_options.map_cache). client_refresh (client.c) uses these
 * when no coordinator answers; nothing here knows the client handle.
 *
 * Thread-safety: every function is reentrant; the cache file is replaced
 * atomically (rename), so concurrent clients read a whole map or none.
 */
#ifndef LAPSE_CLIENT_MAPSRC_H
#define LAPSE_CLIENT_MAPSRC_H

#include <stddef.h>

#include "../placement/pmap.h"
#include "../rpc/rpc.h"

#define MAPSRC_MAX_NODES 16        /* nodes asked at once */
#define MAPSRC_CONNECT_WAIT_MS 200 /* a live peer connects well within this */
#define MAPSRC_ASK_MAX_MS 1000     /* a node's answer is fast or the node is gone */
#define MAPSRC_GRACE_MS 20         /* after the first node connects, for the others */

/* Decodes a GetPartitionMap reply of who into *pm. Returns 0, LAPSE_EPROTO
 * (no map in it) or the decode error, with a message naming who in msg. */
int mapsrc_decode(const Lapse__Response *resp, const char *who, pmap **pm, char *msg,
                  size_t msglen);

/* The map in the cache file at path, or NULL (none, unreadable, not a map). */
pmap *mapsrc_cache_load(const char *path);
/* Writes pm to the cache file at path (creating its directories), by a
 * temporary file renamed over it. Best effort: failures are ignored. */
void mapsrc_cache_save(const char *path, const pmap *pm);

/* Asks the n node clients at once for their maps, skipping those that do
 * not connect within MAPSRC_CONNECT_WAIT_MS; returns the newest map that
 * came back (caller frees), or NULL. */
pmap *mapsrc_ask_nodes(rpc_client *const *nodes, size_t n, int timeout_ms);

#endif
