/* replicas.c: ReplicaJoin and the push after failover (replicas.h). */
#include "replicas.h"

#include <stdio.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../placement/failover.h"
#include "../rpc/wire.h"
#include "push.h"

/* The map and the UP nodes' addresses, copied into a under s->lock, then
 * pushed with the lock released. */
static void push_copy(server *s, arena *a, Lapse__PartitionMap **map, const char ***urls,
                      size_t *n)
{
    uint32_t *ids = NULL;
    *map = wire_pmap_to_pb(a, s->pm);
    *urls = push_up_nodes(s->pm, a, &ids, n);
}

void replicas_push(server *s)
{
    arena a;
    arena_init(&a);
    Lapse__PartitionMap *map;
    const char **urls;
    size_t n;
    push_copy(s, &a, &map, &urls, &n);
    pthread_mutex_unlock(&s->lock);
    push_map(s->pusher, map, urls, n, s->push_timeout_ms, NULL, NULL);
    pthread_mutex_lock(&s->lock);
    arena_fini(&a);
}

void replicas_join(server *s, const Lapse__ReplicaJoinRequest *r, Lapse__Response *resp,
                   arena *a)
{
    char err[512] = "";
    Lapse__ReplicaJoinResponse *m = arena_alloc(a, sizeof(*m));
    if (m == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__replica_join_response__init(m);
    Lapse__PartitionMap *map = NULL;
    const char **urls = NULL;
    size_t nurls = 0;
    pthread_mutex_lock(&s->lock);
    const pmap_node *n = pmap_node_find(s->pm, r->node);
    pmap *next = pmap_dup(s->pm);
    int rv = next == NULL ? LAPSE_ENOMEM
                          : pmap_replica_join(next, r->table_id, r->partition, r->primary_node,
                                              r->epoch, r->node);
    if (rv == 0 && (n == NULL || n->state != PMAP_NODE_UP)) {
        rv = LAPSE_EUNAVAILABLE;
    }
    if (rv != 0) {
        static const char *const why[] = {
            [LAPSE_ENOTFOUND] = "no such table or partition",
            [LAPSE_EWRONGNODE] = "the asker is not the primary at that epoch",
            [LAPSE_EINVAL] = "the node is not a member of the set",
            [LAPSE_EUNAVAILABLE] = "the node is not UP",
            [LAPSE_ENOMEM] = "out of memory",
        };
        rpc_set_error(resp, a, rv, "replica join of node %u to table %u partition %u: %s",
                      (unsigned)r->node, (unsigned)r->table_id, (unsigned)r->partition,
                      rv < (int)(sizeof(why) / sizeof(why[0])) && why[rv] ? why[rv]
                                                                           : lapse_strerror(rv));
        goto out;
    }
    const pmap_table *old = pmap_table_find_id(s->pm, r->table_id);
    if (pmap_in_sync(pmap_part(old, r->partition),
                     (uint32_t)pmap_replicas_index(pmap_part(old, r->partition), r->node))) {
        m->pmap_version = s->pm->version; /* already in sync: nothing to commit */
        goto reply;
    }
    if ((rv = server_commit(s, next, s->next_table_id, err, sizeof(err))) != 0) {
        rpc_set_error(resp, a, rv, "cannot persist the partition map: %s", err);
        goto out;
    }
    next = NULL;
    m->pmap_version = s->pm->version;
    log_info("node %u rejoined the in-sync set of table %u partition %u (primary %u, epoch %llu); "
             "map version %llu",
             (unsigned)r->node, (unsigned)r->table_id, (unsigned)r->partition,
             (unsigned)r->primary_node, (unsigned long long)r->epoch,
             (unsigned long long)s->pm->version);
    push_copy(s, a, &map, &urls, &nurls);
reply:
    resp->pmap_version = m->pmap_version;
    resp->body_case = LAPSE__RESPONSE__BODY_REPLICA_JOIN;
    resp->replica_join = m;
out:
    pthread_mutex_unlock(&s->lock);
    pmap_free(next);
    push_map(s->pusher, map, urls, nurls, s->push_timeout_ms, NULL, NULL);
}
