/* ttlcalls.c: the coordinator's TTL calls and reports. Contract in
 * ttlcalls.h, rules and status machine in ttlprop.h, docs in docs/ttl.md. */
#include "ttlcalls.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../rpc/wire.h"
#include "ddl.h"
#include "ttlprop.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static void oom(Lapse__Response *resp, arena *a)
{
    rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
}

/* Records the progress entries of node_id. Entries of tables not in the map
 * (deleted, or from a stale map) are skipped (invariant 2).
 * REQUIRES: s->lock held. */
static void record(server *s, uint32_t node_id, Lapse__TtlProgress *const *pb, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const pmap_table *t = pb[i] != NULL ? pmap_table_find_id(s->pm, pb[i]->table_id) : NULL;
        if (t == NULL) {
            continue;
        }
        ttlprop_progress p = {
            .table_id = pb[i]->table_id,
            .config_version = pb[i]->config_version,
            .backfill_done = pb[i]->backfill_done != 0,
            .backfill_items = pb[i]->backfill_items,
            .partitions_done = pb[i]->partitions_done,
            .partitions_total = pb[i]->partitions_total,
        };
        /* The status depends on each holder's config version and backfill
         * flag only: judge it again only when this report changes them (a
         * heartbeat from every node every 500 ms mostly does not). */
        const ttlprop_progress *old = ttlprop_find(&s->ttl, node_id, p.table_id);
        int moves = old == NULL || old->config_version != p.config_version ||
                    old->backfill_done != p.backfill_done;
        ttlprop_status was = moves ? ttlprop_status_of(&s->ttl, t) : TTLPROP_DISABLED;
        if (ttlprop_record(&s->ttl, node_id, &p) != 0) {
            /* Only a status shown late: the node reports again. */
            log_warn("out of memory recording TTL progress of node %u", node_id);
            return;
        }
        if (!moves) {
            continue;
        }
        ttlprop_status is = ttlprop_status_of(&s->ttl, t);
        if (is != was && (is == TTLPROP_ENABLED || is == TTLPROP_DISABLED)) {
            log_info("TimeToLive on table %s is %s: every node holding its partitions applied "
                     "config version %" PRIu64 "%s (node %u reported last)",
                     t->schema.name, ttlprop_status_name(is), t->schema.ttl.config_version,
                     is == TTLPROP_ENABLED ? " and finished its backfill" : "", node_id);
        }
    }
}

/* The TtlDescription of t, from a. Returns NULL on OOM.
 * REQUIRES: s->lock held. */
static Lapse__TtlDescription *describe(server *s, const pmap_table *t, arena *a)
{
    Lapse__TtlDescription *d = arena_alloc(a, sizeof(*d));
    if (d == NULL) {
        return NULL;
    }
    lapse__ttl_description__init(d);
    d->status = (char *)ttlprop_status_name(ttlprop_status_of(&s->ttl, t));
    if ((d->config = wire_ttl_to_pb(a, &t->schema.ttl)) == NULL) {
        return NULL;
    }
    size_t n = ttlprop_holders(t, NULL, 0);
    uint32_t *ids = arena_alloc(a, (n + 1) * sizeof(*ids));
    d->nodes = arena_alloc(a, (n + 1) * sizeof(*d->nodes));
    if (ids == NULL || d->nodes == NULL) {
        return NULL;
    }
    ttlprop_holders(t, ids, n);
    for (size_t i = 0; i < n; i++) {
        Lapse__TtlNodeStatus *ns = arena_alloc(a, sizeof(*ns));
        if (ns == NULL) {
            return NULL;
        }
        lapse__ttl_node_status__init(ns);
        ns->node_id = ids[i];
        const ttlprop_progress *p = ttlprop_find(&s->ttl, ids[i], t->schema.id);
        if (p != NULL) {
            Lapse__TtlProgress *pb = arena_alloc(a, sizeof(*pb));
            if (pb == NULL) {
                return NULL;
            }
            lapse__ttl_progress__init(pb);
            pb->table_id = p->table_id;
            pb->config_version = p->config_version;
            pb->backfill_done = p->backfill_done != 0;
            pb->backfill_items = p->backfill_items;
            pb->partitions_done = p->partitions_done;
            pb->partitions_total = p->partitions_total;
            ns->reported = 1;
            ns->progress = pb;
        }
        d->nodes[i] = ns;
    }
    d->n_nodes = n;
    return d;
}

static const char *action_name(ttlprop_action act)
{
    switch (act) {
    case TTLPROP_ENABLE:
        return "enabled";
    case TTLPROP_DISABLE:
        return "disabled";
    case TTLPROP_PAUSE:
        return "paused";
    case TTLPROP_RESUME:
        return "resumed";
    }
    return "changed";
}

/* ------------------------------------------------------------------------ */
/* Calls                                                                    */
/* ------------------------------------------------------------------------ */

/* The table called name in the map copy next (which pmap_dup filled with
 * every table), or NULL with EINTERNAL set on resp. */
static pmap_table *table_in_copy(pmap *next, const char *name, Lapse__Response *resp, arena *a)
{
    pmap_table *nt = NULL;
    for (size_t i = 0; i < next->ntables; i++) {
        if (strcmp(next->tables[i].schema.name, name) == 0) {
            nt = &next->tables[i];
        }
    }
    if (nt == NULL) { /* pmap_dup copies every table */
        rpc_set_error(resp, a, LAPSE_EINTERNAL, "table %s missing from a copy of the map", name);
    }
    return nt;
}

/* Answers a committed UpdateTimeToLive with m, its description as of right
 * after the pushes: nodes that applied the map reported their progress in
 * the replies, so an empty table may already be ENABLED here.
 * REQUIRES: ddl_lock held (it keeps the table from being deleted), lock
 * not held. */
static void reply_after_push(server *s, const char *name, Lapse__UpdateTimeToLiveResponse *m,
                             Lapse__Response *resp, arena *a)
{
    pthread_mutex_lock(&s->lock);
    resp->pmap_version = s->pm->version;
    const pmap_table *t = pmap_table_find(s->pm, name);
    m->description = t != NULL ? describe(s, t, a) : NULL;
    if (m->description != NULL) {
        log_info("TimeToLive on table %s is %s after the pushes", name, m->description->status);
    }
    pthread_mutex_unlock(&s->lock);
    if (m->description == NULL) {
        oom(resp, a); /* changed and durable; DescribeTimeToLive shows it */
    } else {
        resp->body_case = LAPSE__RESPONSE__BODY_UPDATE_TTL;
        resp->update_ttl = m;
    }
}

void ttlcalls_update(server *s, const Lapse__UpdateTimeToLiveRequest *r, Lapse__Response *resp,
                     arena *a)
{
    char err[512] = "";
    const char *name = r->table != NULL ? r->table : "";
    ttlprop_change c = {
        .action = (ttlprop_action)r->action,
        .attribute = r->attribute,
        .offset_s = r->offset_seconds,
        .guard_years = r->ignore_older_than_years,
    };
    int rv = ttlprop_check_change(&c, err, sizeof(err));
    if (rv != 0) {
        rpc_set_error(resp, a, rv, "%s", err);
        return;
    }
    Lapse__UpdateTimeToLiveResponse *m = arena_alloc(a, sizeof(*m));
    if (m == NULL) {
        oom(resp, a);
        return;
    }
    lapse__update_time_to_live_response__init(m);
    ddl_txn x;
    ddl_begin(&x, s, resp);
    const pmap_table *t = ddl_find(&x, name, resp, a);
    if (t == NULL) {
        goto unlock;
    }
    ttlprop_status st = ttlprop_status_of(&s->ttl, t);
    pmap_table *nt = NULL;
    if (ddl_dup(&x, resp, a) != 0 || (nt = table_in_copy(x.next, name, resp, a)) == NULL) {
        goto unlock;
    }
    if ((rv = ttlprop_apply(&nt->schema.ttl, st, &c, s->pm->version + 1, name, err, sizeof(err))) !=
        0) {
        rpc_set_error(resp, a, rv, "%s", err);
        goto unlock;
    }
    const table_ttl ttl = nt->schema.ttl;
    if (ddl_commit(&x, s->next_table_id, resp, a) != 0) {
        goto unlock;
    }
    log_info("TimeToLive %s on table %s (attribute %s, offset %" PRId64 " s, ignore older than %d "
             "years, paused %d, config version %" PRIu64 "); map version %" PRIu64,
             action_name(c.action), name, ttl.attribute, ttl.offset_s, (int)ttl.guard_years,
             ttl.paused, ttl.config_version, s->pm->version);
unlock:
    ddl_push(&x, ttlcalls_record_push_reply);
    if (x.committed) {
        reply_after_push(s, name, m, resp, a);
    }
    ddl_end(&x);
}

void ttlcalls_describe(server *s, const Lapse__DescribeTimeToLiveRequest *r, Lapse__Response *resp,
                       arena *a)
{
    const char *name = r->table != NULL ? r->table : "";
    Lapse__DescribeTimeToLiveResponse *m = arena_alloc(a, sizeof(*m));
    if (m == NULL) {
        oom(resp, a);
        return;
    }
    lapse__describe_time_to_live_response__init(m);
    pthread_mutex_lock(&s->lock);
    resp->pmap_version = s->pm->version;
    const pmap_table *t = pmap_table_find(s->pm, name);
    if (t != NULL) {
        m->description = describe(s, t, a);
    }
    pthread_mutex_unlock(&s->lock);
    if (t == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOTFOUND, "table %s does not exist", name);
    } else if (m->description == NULL) {
        oom(resp, a);
    } else {
        resp->body_case = LAPSE__RESPONSE__BODY_DESCRIBE_TTL;
        resp->describe_ttl = m;
    }
}

/* ------------------------------------------------------------------------ */
/* Reports                                                                  */
/* ------------------------------------------------------------------------ */

void ttlcalls_record_heartbeat(server *s, const Lapse__HeartbeatRequest *r)
{
    pthread_mutex_lock(&s->lock);
    node_live *l = server_live(s, r->node_id, 0);
    if (l != NULL) {
        int paused = r->ttl_paused_for_clock != 0;
        l->reported_skew_ms = r->clock_skew_ms;
        if (paused && !l->ttl_paused_for_clock) {
            log_warn("node %u paused its TTL scanners for clock skew: %" PRId64
                     " ms by its own estimate, %" PRId64 " ms measured here",
                     r->node_id, r->clock_skew_ms, l->clock_skew_ms);
        } else if (!paused && l->ttl_paused_for_clock) {
            log_info("node %u resumed its TTL scanners: clock skew back in bounds (%" PRId64
                     " ms by its own estimate)",
                     r->node_id, r->clock_skew_ms);
        }
        l->ttl_paused_for_clock = paused;
    }
    record(s, r->node_id, r->ttl, r->n_ttl);
    pthread_mutex_unlock(&s->lock);
}

void ttlcalls_record_push_reply(void *arg, size_t i, const Lapse__Response *resp)
{
    const ddl_push_ctx *ctx = arg;
    if (resp->body_case != LAPSE__RESPONSE__BODY_PUSH_PARTITION_MAP ||
        resp->push_partition_map == NULL) {
        return;
    }
    server *s = ctx->s;
    pthread_mutex_lock(&s->lock);
    record(s, ctx->ids[i], resp->push_partition_map->ttl, resp->push_partition_map->n_ttl);
    pthread_mutex_unlock(&s->lock);
}
