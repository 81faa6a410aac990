/*
 * route.c: which node a call goes to (client_route_of, client.h): a key's
 * partition, and from the cached map the primary, an in-sync
 * copy for an eventually consistent read, or the host of a GSI partition or
 * stream shard.
 */
#include <pthread.h>
#include <stdio.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../placement/hash.h"
#include "client.h"

int client_partition_of(const table_schema *t, const item *key, uint32_t *part, lapse_error *err)
{
    const attr_value *pk = item_get(key, t->pk.name);
    if (pk == NULL) {
        return client_err(err, LAPSE_EINVAL, "missing partition key attribute \"%s\"", t->pk.name);
    }
    if (pk->type != t->pk.type) {
        return client_err(err, LAPSE_EINVAL, "partition key \"%s\" must be of type %s, not %s",
                          t->pk.name, item_type_name(t->pk.type), item_type_name(pk->type));
    }
    int rv = hash_partition(pk, t->partitions, part);
    if (rv != 0) {
        return client_err(err, rv, "partition key \"%s\": cannot hash (%s)", t->pk.name,
                          lapse_strerror(rv));
    }
    return 0;
}

void client_target_failed(client_target *tg, uint32_t node_id, int rv)
{
    if (rv == LAPSE_EWRONGNODE) {
        tg->eventual = 0;
    } else {
        tg->avoid = node_id + 1;
    }
}

/* An eventually consistent read's node: the in-sync members of rs that the
 * map holds UP, in turn, so reads spread over the copies, leaving out the
 * one tg->avoid names while another is left; the primary when none is.
 * Called with c->mu held. */
static uint32_t read_replica(lapse_client *c, const client_target *tg, const pmap_replicas *rs)
{
    uint32_t ids[PMAP_MAX_REPLICAS];
    uint32_t n = 0, avoided = 0;
    for (uint32_t i = 0; i < rs->n; i++) {
        const pmap_node *nd = pmap_node_find(c->map, rs->ids[i]);
        if (!pmap_in_sync(rs, i) || nd == NULL || nd->state != PMAP_NODE_UP) {
            continue;
        }
        if (rs->ids[i] + 1 == tg->avoid) {
            avoided = 1;
            continue;
        }
        ids[n++] = rs->ids[i];
    }
    if (n == 0) {
        return avoided ? tg->avoid - 1 : rs->ids[0];
    }
    return ids[atomic_fetch_add(&c->read_turn, 1u) % n];
}

/* A GSI partition's or stream shard's node: its first copy that the map
 * holds UP and is not joining (a move's new copy, being filled: only when
 * no other is UP), leaving out the one tg->avoid names while another is left, so
 * a reader keeps to one copy until it fails (copies are fed on their own
 * and one may be behind another); the first copy when none is UP.
 * Called with c->mu held. */
static uint32_t derived_copy(lapse_client *c, const client_target *tg, const pmap_replicas *rs)
{
    uint32_t avoided = 0;
    for (uint32_t i = 0; rs != NULL && i < rs->n; i++) {
        const pmap_node *nd = pmap_node_find(c->map, rs->ids[i]);
        if (nd == NULL || nd->state != PMAP_NODE_UP || rs->ids[i] == rs->joining) {
            continue; /* a joining copy is being filled (placement/derived.h) */
        }
        if (rs->ids[i] + 1 == tg->avoid) {
            avoided = 1;
            continue;
        }
        return rs->ids[i];
    }
    if (avoided) {
        return tg->avoid - 1;
    }
    const pmap_node *j =
        rs != NULL && rs->joining != 0 ? pmap_node_find(c->map, rs->joining) : NULL;
    if (j != NULL && j->state == PMAP_NODE_UP) {
        return rs->joining; /* the last resort: it answers once filled */
    }
    return rs != NULL && rs->n > 0 ? rs->ids[0] : 0;
}

int client_route_of(lapse_client *c, client_target *tg, client_route *r, lapse_error *err)
{
    int rv = 0;
    pthread_mutex_lock(&c->mu);
    const pmap_table *t = c->map != NULL ? pmap_table_find(c->map, tg->table) : NULL;
    if (t == NULL) {
        rv = client_err(err, LAPSE_ENOTFOUND, "table \"%s\" does not exist", tg->table);
        goto out;
    }
    if (t->schema.id != tg->table_id) {
        /* Deleted and re-created since the call started. */
        if (tg->key == NULL || tg->kind != CLIENT_ROUTE_BASE) {
            rv = client_err(err, LAPSE_ENOTFOUND, "table \"%s\" was deleted and re-created",
                            tg->table);
            goto out;
        }
        if ((rv = client_partition_of(&t->schema, tg->key, &tg->part, err)) != 0) {
            goto out;
        }
        tg->table_id = t->schema.id;
    }
    switch (tg->kind) {
    case CLIENT_ROUTE_GSI:
        r->node_id = derived_copy(c, tg, pmap_gsi_part(t, tg->gsi, tg->part));
        break;
    case CLIENT_ROUTE_STREAM:
        r->node_id = derived_copy(c, tg, pmap_stream_shard(t, tg->part));
        break;
    default: {
        const pmap_replicas *rs = pmap_part(t, tg->part);
        r->node_id = tg->eventual && rs != NULL ? read_replica(c, tg, rs) : pmap_owner(t, tg->part);
        break;
    }
    }
    const pmap_node *n = pmap_node_find(c->map, r->node_id);
    if (n == NULL) {
        static const char *const what[] = {"partition", "GSI partition", "stream shard"};
        rv = client_err(err, LAPSE_EUNAVAILABLE, "table \"%s\" %s %u has no known %s", tg->table,
                        what[tg->kind <= CLIENT_ROUTE_STREAM ? tg->kind : 0], (unsigned)tg->part,
                        tg->kind == CLIENT_ROUTE_STREAM ? "host" : "owner");
        goto out;
    }
    snprintf(r->addr, sizeof r->addr, "%s", n->address);
    r->pmap_version = c->map->version;
    r->down = n->state == PMAP_NODE_DOWN;
    r->map_age_ms = clock_mono_now().ms - c->map_mono_ms;
    if (r->down) {
        /* The control plane knows: say so now rather than after a time-out. */
        static const char *const what[] = {"partition", "GSI partition", "stream shard"};
        const char *kind = what[tg->kind <= CLIENT_ROUTE_STREAM ? tg->kind : 0];
        if (n->removed) {
            /* Only a copy lost with it names a removed node (lapse node
             * remove --lose-data): nothing will bring it back. */
            rv = client_err(err, LAPSE_EUNAVAILABLE,
                            "table \"%s\" %s %u was lost with node %u, removed while it held "
                            "its only copy: its items are gone (drop the table)",
                            tg->table, kind, (unsigned)tg->part, (unsigned)r->node_id);
        } else {
            rv = client_err(err, LAPSE_EUNAVAILABLE,
                            "node %u (%s) is down: table \"%s\" %s %u is unavailable until it "
                            "is back",
                            (unsigned)r->node_id, r->addr, tg->table, kind, (unsigned)tg->part);
        }
    }
out:
    pthread_mutex_unlock(&c->mu);
    return rv;
}
