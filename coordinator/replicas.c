/* replicas.c: ReplicaJoin, ReplicaShrink and the push after failover
 * (replicas.h). */
#include "replicas.h"

#include <stdio.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../placement/failover.h"
#include "push.h"

void replicas_push(server *s)
{
    arena a;
    arena_init(&a);
    push_plan pl;
    push_plan_copy(&pl, s->pm, &a);
    pthread_mutex_unlock(&s->lock);
    push_plan_send(s->pusher, &pl, s->push_timeout_ms, NULL, NULL);
    pthread_mutex_lock(&s->lock);
    /* What a node confirmed holding: a handover waits for its old primary
     * to hold the map that stepped it down (mover.c). */
    for (size_t i = 0; pl.ok != NULL && i < pl.n; i++) {
        node_live *l = pl.ok[i] ? server_live(s, pl.ids[i], 0) : NULL;
        if (l != NULL && l->pmap_version < pl.version) {
            l->pmap_version = pl.version;
        }
    }
    arena_fini(&a);
}

/* A change of one set's in-sync membership that its primary asks for. */
typedef struct set_change {
    int shrink; /* 0: join, 1: shrink */
    uint32_t table_id, part, primary, node;
    uint64_t epoch;
    const char *reason; /* shrink: the primary's words */
    uint64_t changes;   /* join: the set's changes count the asker saw */
} set_change;

/* Applies c: commits and pushes the map when it changes the set. Returns
 * 0 with *version (the map that holds the change), or the error, set in
 * resp. */
static int change_set(server *s, const set_change *c, Lapse__Response *resp, arena *a,
                      uint64_t *version)
{
    char err[512] = "";
    const char *what = c->shrink ? "replica shrink" : "replica join";
    push_plan pl = {0}; /* pushes nothing unless filled */
    pthread_mutex_lock(&s->lock);
    const pmap_node *n = pmap_node_find(s->pm, c->node);
    pmap *next = pmap_dup(s->pm);
    int rv = next == NULL ? LAPSE_ENOMEM
             : c->shrink
                 ? pmap_replica_shrink(next, c->table_id, c->part, c->primary, c->epoch, c->node)
                 : pmap_replica_join(next, c->table_id, c->part, c->primary, c->epoch, c->node,
                                     c->changes);
    if (rv == 0 && !c->shrink && (n == NULL || n->state != PMAP_NODE_UP)) {
        rv = LAPSE_EUNAVAILABLE;
    }
    if (rv != 0) {
        static const char *const why[] = {
            [LAPSE_ENOTFOUND] = "no such table or partition",
            [LAPSE_EWRONGNODE] = "the asker is not the primary at that epoch",
            [LAPSE_EINVAL] = "the node is not a follower in the set",
            [LAPSE_ESTATE] = "the set changed since the primary asked (a join asked before a "
                             "change never lands after it)",
            [LAPSE_ENOMEM] = "out of memory",
        };
        const char *w = rv == LAPSE_EUNAVAILABLE
                            ? (c->shrink ? "fewer than min-in-sync copies would stay in sync"
                                         : "the node is not UP")
                        : rv < (int)(sizeof(why) / sizeof(why[0])) && why[rv] ? why[rv]
                                                                              : lapse_strerror(rv);
        rpc_set_error(resp, a, rv, "%s of node %u in table %u partition %u: %s", what,
                      (unsigned)c->node, (unsigned)c->table_id, (unsigned)c->part, w);
        goto out;
    }
    const pmap_replicas *was = pmap_part(pmap_table_find_id(s->pm, c->table_id), c->part);
    const pmap_replicas *now = pmap_part(pmap_table_find_id(next, c->table_id), c->part);
    int idx = pmap_replicas_index(was, c->node);
    const int was_in = pmap_in_sync(was, (uint32_t)idx); /* was dies with the commit */
    if (was_in == pmap_in_sync(now, (uint32_t)idx) && was->changes == now->changes) {
        /* Nothing to commit, so no fenced save says this map is still the
         * cluster's: a leader that lost its lease since the caller's check
         * would answer from a map its successor has changed (a join "done"
         * that the new map undid). etcd confirms it instead. */
        if ((rv = server_confirm(s, err, sizeof(err))) != 0) {
            rpc_set_error(resp, a, rv, "%s of node %u in table %u partition %u: %s", what,
                          (unsigned)c->node, (unsigned)c->table_id, (unsigned)c->part, err);
            goto out;
        }
        *version = s->pm->version;
        goto out;
    }
    if ((rv = server_commit(s, next, s->next_table_id, err, sizeof(err))) != 0) {
        rpc_set_error(resp, a, rv, "cannot persist the partition map: %s", err);
        goto out;
    }
    next = NULL;
    *version = s->pm->version;
    if (c->shrink && !was_in) {
        log_info("node %u stays out of the in-sync set of table %u partition %u on its primary "
                 "%u's word (epoch %llu): %s; a join asked for it is void; map version %llu",
                 (unsigned)c->node, (unsigned)c->table_id, (unsigned)c->part, (unsigned)c->primary,
                 (unsigned long long)c->epoch, c->reason, (unsigned long long)*version);
    } else if (c->shrink) {
        log_warn("node %u left the in-sync set of table %u partition %u on its primary %u's word "
                 "(epoch %llu): %s; map version %llu",
                 (unsigned)c->node, (unsigned)c->table_id, (unsigned)c->part, (unsigned)c->primary,
                 (unsigned long long)c->epoch, c->reason, (unsigned long long)*version);
    } else {
        log_info("node %u rejoined the in-sync set of table %u partition %u (primary %u, epoch "
                 "%llu); map version %llu",
                 (unsigned)c->node, (unsigned)c->table_id, (unsigned)c->part, (unsigned)c->primary,
                 (unsigned long long)c->epoch, (unsigned long long)*version);
    }
    push_plan_copy(&pl, s->pm, a);
out:
    pthread_mutex_unlock(&s->lock);
    pmap_free(next);
    push_plan_send(s->pusher, &pl, s->push_timeout_ms, NULL, NULL);
    return rv;
}

void replicas_join(server *s, const Lapse__ReplicaJoinRequest *r, Lapse__Response *resp, arena *a)
{
    Lapse__ReplicaJoinResponse *m = arena_alloc(a, sizeof(*m));
    if (m == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__replica_join_response__init(m);
    set_change c = {0,       r->table_id, r->partition, r->primary_node,
                    r->node, r->epoch,    "",           r->set_changes};
    if (change_set(s, &c, resp, a, &m->pmap_version) == 0) {
        resp->pmap_version = m->pmap_version;
        resp->body_case = LAPSE__RESPONSE__BODY_REPLICA_JOIN;
        resp->replica_join = m;
    }
}

void replicas_shrink(server *s, const Lapse__ReplicaShrinkRequest *r, Lapse__Response *resp,
                     arena *a)
{
    Lapse__ReplicaShrinkResponse *m = arena_alloc(a, sizeof(*m));
    if (m == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__replica_shrink_response__init(m);
    set_change c = {1,
                    r->table_id,
                    r->partition,
                    r->primary_node,
                    r->node,
                    r->epoch,
                    r->reason != NULL && r->reason[0] ? r->reason : "no reason given",
                    0};
    if (change_set(s, &c, resp, a, &m->pmap_version) == 0) {
        resp->pmap_version = m->pmap_version;
        resp->body_case = LAPSE__RESPONSE__BODY_REPLICA_SHRINK;
        resp->replica_shrink = m;
    }
}
