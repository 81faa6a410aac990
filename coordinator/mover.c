/* mover.c: draining a node, one replica set change at a time (mover.h). */
#include "mover.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../placement/failover.h"
#include "replicas.h"

/* ============================== the steps ============================== */

/* Whether node id may take a moved copy: UP, not draining, not removed. */
static int may_take(const pmap *pm, uint32_t id)
{
    const pmap_node *n = pmap_node_find(pm, id);
    return n != NULL && n->state == PMAP_NODE_UP && !n->draining && !n->removed;
}

/* Whether node id is UP (draining or not). */
static int up(const pmap *pm, uint32_t id)
{
    const pmap_node *n = pmap_node_find(pm, id);
    return n != NULL && n->state == PMAP_NODE_UP;
}

/* Whether member id of r leaves it: the rebalancer's leaving member, or a
 * draining or removed node. */
static int leaves(const pmap *pm, const pmap_replicas *r, uint32_t id)
{
    return id == r->leaving || pmap_node_leaving(pm, id);
}

/* Whether set r of a table of rf copies may move: always with copies to
 * catch a new one up from; a one-copy table's only while its one copy is
 * on an UP node (its data is nowhere else: docs/replication.md, "Moving a
 * one-copy partition"). */
static int movable(const pmap *pm, const pmap_replicas *r, uint32_t rf)
{
    if (rf >= 2) {
        return 1;
    }
    const pmap_node *n = pmap_node_find(pm, r->ids[0]);
    return n != NULL && n->state == PMAP_NODE_UP && !n->removed;
}

/* A set holding a copy more than its table keeps: between a move's first
 * and last step (its leaving member, or one step gives it: a drain stopped
 * mid-move). */
static int moving(const pmap_replicas *r, uint32_t rf)
{
    return r->n > rf;
}

void mover_count(const pmap *pm, uint32_t id, mover_left *out)
{
    memset(out, 0, sizeof(*out));
    mover_derived_count(pm, id, out);
    for (size_t t = 0; t < pm->ntables; t++) {
        const pmap_table *tb = &pm->tables[t];
        uint32_t rf = schema_replication(&tb->schema);
        for (uint32_t p = 0; p < tb->schema.partitions; p++) {
            const pmap_replicas *r = &tb->parts[p];
            if (pmap_replicas_index(r, id) < 0) {
                continue;
            }
            if (pmap_set_lost(pm, r)) {
                out->lost++; /* a one-copy table's on a removed node */
                out->lost_table = out->lost_table != NULL ? out->lost_table : tb->schema.name;
            } else if (!movable(pm, r, rf)) {
                out->other++; /* a one-copy table's on a node that is down */
            } else {
                out->base++;
                out->moving += (uint32_t)moving(r, rf);
            }
        }
    }
}

/* The node to take a new copy of r for its member leaving: UP, not
 * draining, not in r; in a zone no other member is in, if there is one
 * (docs/replication.md, "Zones"); holding fewest base copies (first and
 * follower), ties to the lowest id; 0: none. */
static uint32_t target_for(const pmap *pm, const pmap_replicas *r, uint32_t leaving)
{
    uint32_t best = 0;
    size_t best_copies = 0;
    int best_held = 0;
    for (size_t i = 0; i < pm->nnodes; i++) {
        uint32_t id = pm->nodes[i].id;
        if (!may_take(pm, id) || pmap_replicas_index(r, id) >= 0) {
            continue;
        }
        size_t c = pmap_partitions_owned(pm, id) + pmap_follower_copies(pm, id);
        int held = pmap_zone_held(pm, r, id, leaving);
        if (best == 0 || held < best_held ||
            (held == best_held && (c < best_copies || (c == best_copies && id < best)))) {
            best = id;
            best_copies = c;
            best_held = held;
        }
    }
    return best;
}

/* What one pass did. */
typedef struct pass {
    uint64_t since;            /* the version this pass's map is committed as */
    size_t stepped, cancelled; /* handovers begun, and ended with no one to take over */
    size_t added, handed, removed, stuck;
    size_t trimmed; /* sets one copy over with none leaving, given a leaving member */
    size_t in_move;
    size_t max_moves;  /* sets that may be moving at once (--max-concurrent-moves) */
    size_t rebalanced; /* of added and handed: what the rebalancer started */
} pass;

/* Whether member k of r holds every acknowledged write: in sync, or the
 * set's last_out (out of sync, but the member that left last while the
 * primary alone stayed: pmap_replica_remove keeps it). */
static int holds_all(const pmap_replicas *r, uint32_t k)
{
    return pmap_in_sync(r, k) || (r->last_out != 0 && r->ids[k] == r->last_out);
}

/* What step reads off a set's members before it decides. */
typedef struct survey {
    int d;                 /* the member to leave next: a follower before the primary; -1: none */
    int spare;             /* a leaving follower that may go first; -1: none */
    int dead;              /* a follower lacking writes on a node that is not UP; -1: none */
    uint32_t keep_in_sync; /* members in sync that stay */
    uint32_t first_keep;   /* the first such follower's node id; 0: none */
    uint32_t in_sync;      /* members in sync, leaving or not */
    int catching_up;       /* a staying member out of sync may take writes: it is catching up */
} survey;

/* Surveys the members of set r in next into *s. */
static void survey_set(const pmap *next, const pmap_replicas *r, survey *s)
{
    *s = (survey){.d = -1, .spare = -1, .dead = -1};
    for (uint32_t k = 0; k < r->n; k++) {
        uint32_t id = r->ids[k];
        s->in_sync += (uint32_t)pmap_in_sync(r, k);
        if (k > 0 && !holds_all(r, k) && !up(next, id)) {
            s->dead = (int)k; /* a copy lacking writes, on a node that is not UP */
        }
        if (leaves(next, r, id)) {
            /* a leaving follower before the primary */
            s->d = s->d < 0 || s->d == 0 ? (int)k : s->d;
            /* a leaving follower that may go first: one that holds nothing
             * every other copy lacks (holds_all) before one that does */
            s->spare =
                k > 0 && (s->spare < 0 || (holds_all(r, (uint32_t)s->spare) && !holds_all(r, k)))
                    ? (int)k
                    : s->spare;
            continue;
        }
        if (pmap_in_sync(r, k)) {
            s->keep_in_sync++;
            s->first_keep = s->first_keep == 0 && k > 0 ? id : s->first_keep;
        } else if (may_take(next, id)) {
            s->catching_up = 1; /* its primary catches it up and asks its join */
        }
    }
}

/* Gives set r, one copy over its table's rf with none leaving, a leaving
 * member. */
static void trim_surplus(pmap_replicas *r, uint32_t rf, pass *ps)
{
    if (r->n > rf && r->handing_since == 0) {
        /* One copy over its table's count with none leaving: a drain
         * stopped mid-move (its node's copy no longer leaves), which no
         * step would ever end. The newest follower that holds nothing
         * the others lack leaves (out of sync first), as the
         * rebalancer's leaving member does, from the next pass. */
        uint32_t pick = r->n - 1;
        for (uint32_t k = r->n - 1; k > 0; k--) {
            if (!holds_all(r, k)) {
                pick = k;
                break;
            }
        }
        r->leaving = r->ids[pick];
        ps->trimmed++;
    }
}

/* With enough copies in sync off leaving nodes: a leaving primary hands
 * over first, then the leaving copy goes. */
static void let_leaver_go(pmap *next, uint32_t tid, uint32_t p, const pmap_replicas *r,
                          const survey *s, pass *ps)
{
    if (leaves(next, r, r->ids[0]) && s->first_keep != 0) {
        if (r->handing_since == 0) { /* the primary steps down first */
            ps->stepped += pmap_replica_step_down(next, tid, p, s->first_keep, ps->since) == 0;
        } /* else finish_handover's */
    } else if (s->d > 0) {
        ps->removed += pmap_replica_remove(next, tid, p, r->ids[s->d]) == 0;
    }
}

/* Makes room in full set r for the copy a leaving member needs. Returns 1
 * when a copy was removed. */
static int make_room(pmap *next, uint32_t tid, uint32_t p, const pmap_replicas *r, uint32_t rf,
                     const survey *s, pass *ps)
{
    /* Full, with no room for the copy a leaving member needs (a move's
     * new copy whose node died, was removed or began to drain; or a
     * member that died while another leaves): a copy makes room. First
     * a leaving follower out of sync (it counts for no write); then,
     * unless a new copy is catching up (which may make room needless),
     * a copy out of sync on a node that is down (a move's new copy, or
     * a member that died: it holds no write the in-sync copies lack,
     * and the set gets its copies back elsewhere); then an in-sync
     * leaving follower, only while the set keeps as many in sync as
     * the table keeps copies. Never the last_out: while the primary
     * alone is in sync (its other copies down or rejoining), that
     * member is the one other copy of every acknowledged write (chaos
     * seed 832704477: removed, its keys dropped, then the primary's
     * disk lost, 1,500 acknowledged writes went with it); the set
     * waits for it to rejoin. Else the set would wait for a slot that
     * never frees: a drain with another node dead never ended. */
    int go = s->spare > 0 && !holds_all(r, (uint32_t)s->spare) ? s->spare
             : s->dead > 0 && !s->catching_up                  ? s->dead
             : s->spare > 0 && s->in_sync > rf                 ? s->spare
                                                               : -1;
    if (go > 0) {
        ps->removed += pmap_replica_remove(next, tid, p, r->ids[go]) == 0;
        return 1;
    }
    return 0;
}

/* One step of the move of set r (table id tid, partition p, rf copies) in
 * next, if it has a leaving member (the rebalancer's, or a draining or
 * removed node) and a step can be taken now. */
static void step(pmap *next, uint32_t tid, uint32_t p, pmap_replicas *r, uint32_t rf, pass *ps)
{
    survey s;
    survey_set(next, r, &s);
    if (s.d < 0) {
        trim_surplus(r, rf, ps);
        return;
    }
    if (s.keep_in_sync >= rf) {
        let_leaver_go(next, tid, p, r, &s, ps);
        return;
    }
    if (r->n >= PMAP_MAX_REPLICAS && make_room(next, tid, p, r, rf, &s, ps)) {
        return;
    }
    if (s.catching_up) {
        return;
    }
    if (r->n >= PMAP_MAX_REPLICAS || ps->in_move >= ps->max_moves) {
        return;
    }
    uint32_t to = target_for(next, r, r->ids[s.d]);
    if (to == 0 || pmap_replica_add(next, tid, p, to) != 0) {
        ps->stuck++;
        return;
    }
    ps->added++;
    ps->in_move++;
}

/* Whether node id is removed and a set of a replicated table's base
 * partitions still names it. */
static int removed_holding(const pmap *pm, const pmap_node *n)
{
    if (!n->removed) {
        return 0;
    }
    mover_left left;
    mover_count(pm, n->id, &left);
    return left.base > 0;
}

/* Whether the rebalancer may start moves in pm: no node draining, every
 * node UP but the removed ones, none of which holds a base copy still (a
 * cluster that lost a node waits for it, or for its removal, rather than
 * move data around it), and a table's copy somewhere to even out. */
static int may_rebalance(const pmap *pm)
{
    for (size_t i = 0; i < pm->nnodes; i++) {
        const pmap_node *n = &pm->nodes[i];
        if (n->removed ? removed_holding(pm, n) : n->draining || n->state != PMAP_NODE_UP) {
            return 0;
        }
    }
    return pm->ntables > 0;
}

/* The sets of pm between a move's first and last step. */
static size_t count_moving(const pmap *pm)
{
    size_t n = 0;
    for (size_t t = 0; t < pm->ntables; t++) {
        const pmap_table *tb = &pm->tables[t];
        uint32_t rf = schema_replication(&tb->schema);
        for (uint32_t p = 0; p < tb->schema.partitions; p++) {
            n += (size_t)moving(&tb->parts[p], rf);
        }
    }
    return n;
}

/* Whether a set of pm has a handover under way (pmap_replica_step_down). */
static int handing_over(const pmap *pm)
{
    for (size_t t = 0; t < pm->ntables; t++) {
        const pmap_table *tb = &pm->tables[t];
        for (uint32_t p = 0; p < tb->schema.partitions; p++) {
            if (tb->parts[p].handing_since != 0) {
                return 1;
            }
        }
    }
    return 0;
}

/* Whether mover_pass has anything to do on pm: a node draining, a removed
 * node named by a set, a move or handover under way, or one the rebalancer
 * would start. Read-only, so a balanced cluster costs a walk of the map
 * every pass, not a copy of it. */
static int has_work(const pmap *pm, size_t max_handovers)
{
    for (size_t i = 0; i < pm->nnodes; i++) {
        if (pm->nodes[i].draining || removed_holding(pm, &pm->nodes[i])) {
            return 1;
        }
    }
    pmap_move probe;
    return count_moving(pm) > 0 || handing_over(pm) || mover_derived_has_work(pm) ||
           (may_rebalance(pm) && (pmap_rebalance_plan(pm, &probe, 1, max_handovers) > 0 ||
                                  mover_derived_unbalanced(pm)));
}

/* The sets that may be moving at once: --max-concurrent-moves, else
 * MOVER_MAX_CONCURRENT; at most MOVER_MAX_MOVES_LIMIT. */
static size_t max_moves(const server *s)
{
    size_t m = s->max_moves > 0 ? s->max_moves : MOVER_MAX_CONCURRENT;
    return m < MOVER_MAX_MOVES_LIMIT ? m : MOVER_MAX_MOVES_LIMIT;
}

/* Finishes the handover under way in set r (table id tid, partition p)
 * once its primary holds the map that stepped it down (a push reply or a
 * heartbeat said so) or is not UP: its successor becomes the primary at
 * epoch + 1. With no in-sync follower left to take over, the handover is
 * called off and the primary serves again. REQUIRES: s->lock held. */
static void finish_handover(server *s, pmap *next, uint32_t tid, uint32_t p, pmap_replicas *r,
                            pass *ps)
{
    if (r->handing_since == 0) {
        return;
    }
    uint32_t to = pmap_handover_target(r);
    if (to == 0) {
        r->handing_since = 0;
        r->handing_to = 0;
        ps->cancelled++;
        return;
    }
    const pmap_node *old = pmap_node_find(next, r->ids[0]);
    const node_live *l = server_live(s, r->ids[0], 0);
    int stopped = old == NULL || old->state != PMAP_NODE_UP ||
                  (l != NULL && l->pmap_version >= r->handing_since);
    if (stopped) {
        ps->handed += pmap_replica_handover(next, tid, p, to) == 0;
    }
}

/* Finishes at once the handovers whose old primaries confirmed, in their
 * answers to the push mover_pass just made, holding the map that stepped
 * them down. Left to the next pass, up to MEMBERSHIP_PERIOD_MS later, they
 * kept their partitions refusing writes that long (a quarter of a second
 * at least, for every set a drain or the rebalancer hands over), and the
 * clients' retries backed off meanwhile. REQUIRES: s->lock held. */
static void finish_handovers_now(server *s)
{
    if (!server_leads(s)) {
        return;
    }
    pmap *next = pmap_dup(s->pm);
    if (next == NULL) {
        return;
    }
    pass ps = {0};
    for (size_t t = 0; t < next->ntables; t++) {
        pmap_table *tb = &next->tables[t];
        for (uint32_t p = 0; p < tb->schema.partitions; p++) {
            finish_handover(s, next, tb->schema.id, p, &tb->parts[p], &ps);
        }
    }
    if (ps.handed + ps.cancelled == 0) {
        pmap_free(next);
        return;
    }
    char err[512];
    if (server_commit(s, next, s->next_table_id, err, sizeof(err)) != 0) {
        log_warn("moves: cannot commit the map (the next pass retries): %s", err);
        pmap_free(next);
        return;
    }
    log_info("moves: map version %llu: %zu primar%s handed over as soon as the old one held the "
             "map that stepped it down, %zu handover%s called off",
             (unsigned long long)s->pm->version, ps.handed, ps.handed == 1 ? "y" : "ies",
             ps.cancelled, ps.cancelled == 1 ? "" : "s");
    replicas_push(s);
}

void mover_pass(server *s)
{
    if (!server_leads(s)) {
        return;
    }
    if (!has_work(s->pm, s->balance_primaries)) {
        return;
    }
    pmap *next = pmap_dup(s->pm);
    if (next == NULL) {
        return;
    }
    pass ps = {0};
    ps.since = s->pm->version + 1; /* server_commit's */
    ps.in_move = count_moving(next);
    ps.max_moves = max_moves(s);
    for (size_t t = 0; t < next->ntables; t++) {
        pmap_table *tb = &next->tables[t];
        uint32_t rf = schema_replication(&tb->schema);
        for (uint32_t p = 0; p < tb->schema.partitions; p++) {
            finish_handover(s, next, tb->schema.id, p, &tb->parts[p], &ps);
            if (movable(next, &tb->parts[p], rf)) {
                step(next, tb->schema.id, p, &tb->parts[p], rf, &ps);
            }
        }
    }
    mover_derived_done dd;
    mover_derived_pass(s, next, ps.since, may_rebalance(next) ? ps.max_moves : 0, &dd);
    if (may_rebalance(next) && ps.in_move < ps.max_moves) {
        pmap_move mv[MOVER_MAX_MOVES_LIMIT];
        size_t n = pmap_rebalance_plan(next, mv, ps.max_moves - ps.in_move, s->balance_primaries);
        for (size_t i = 0; i < n; i++) {
            if (pmap_move_start(next, &mv[i], ps.since) != 0) {
                continue;
            }
            if (mv[i].handover) {
                ps.stepped++; /* finished by a later pass: no set stays moving */
                ps.rebalanced++;
            } else {
                ps.added++;
                ps.in_move++;
                ps.rebalanced++;
            }
        }
    }
    if (ps.added + ps.handed + ps.removed + ps.stepped + ps.cancelled + ps.trimmed + dd.added +
            dd.settled + dd.dropped ==
        0) {
        pmap_free(next);
        return;
    }
    char err[512];
    if (server_commit(s, next, s->next_table_id, err, sizeof(err)) != 0) {
        log_warn("moves: cannot commit the map (retrying): %s", err);
        pmap_free(next);
        return;
    }
    if (ps.trimmed > 0) {
        log_info("moves: map version %llu: %zu set(s) one copy over with none leaving (a drain "
                 "stopped mid-move): a follower of each leaves",
                 (unsigned long long)s->pm->version, ps.trimmed);
    }
    if (ps.added + ps.handed + ps.removed + ps.stepped + ps.cancelled > 0) {
        log_info(
            "moves: map version %llu: %zu cop%s added, %zu primar%s stepping down and %zu handed "
            "over (%zu of these by the rebalancer), %zu handover%s called off, %zu leaving cop%s "
            "removed; %zu set(s) being moved%s",
            (unsigned long long)s->pm->version, ps.added, ps.added == 1 ? "y" : "ies", ps.stepped,
            ps.stepped == 1 ? "y" : "ies", ps.handed, ps.rebalanced, ps.cancelled,
            ps.cancelled == 1 ? "" : "s", ps.removed, ps.removed == 1 ? "y" : "ies", ps.in_move,
            ps.stuck > 0 ? "; some sets have no node to move to" : "");
    }
    if (dd.added + dd.settled + dd.dropped > 0) {
        log_info("moves: map version %llu: GSI and stream copies: %zu added (%zu by the "
                 "rebalancer), %zu replaced (the new copy whole), %zu new one(s) dropped%s",
                 (unsigned long long)s->pm->version, dd.added, dd.rebalanced, dd.settled,
                 dd.dropped, dd.stuck > 0 ? "; some have no node to move to" : "");
    }
    replicas_push(s);
    if (ps.stepped > 0) {
        finish_handovers_now(s);
    }
}

/* ============================== the calls ============================== */

/* The fewest UP nodes, not draining nor removed, besides node id, that the
 * map's tables need: the most copies a table keeps. *left gets how many
 * there are. */
static uint32_t room_needed(const pmap *pm, uint32_t id, uint32_t *left)
{
    uint32_t most = 0;
    *left = 0;
    for (size_t i = 0; i < pm->nnodes; i++) {
        *left += pm->nodes[i].id != id && may_take(pm, pm->nodes[i].id);
    }
    for (size_t t = 0; t < pm->ntables; t++) {
        uint32_t rf = schema_replication(&pm->tables[t].schema);
        most = rf > most ? rf : most;
    }
    return most;
}

/* NodeDrain's and NodeRemove's answer of what is left on node id
 * (mover_left), into their fields of the same names. */
static void answer_left(const pmap *pm, uint32_t id, uint32_t *base, uint32_t *moves,
                        uint32_t *other, uint32_t *derived, uint32_t *lost)
{
    mover_left left;
    mover_count(pm, id, &left);
    *base = left.base;
    *moves = left.moving;
    *other = left.other;
    *derived = left.derived;
    *lost = left.lost;
}

void mover_drain(server *s, const Lapse__NodeDrainRequest *r, Lapse__Response *resp, arena *a)
{
    Lapse__NodeDrainResponse *m = arena_alloc(a, sizeof(*m));
    if (m == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__node_drain_response__init(m);
    if (s->ec == NULL && !r->stop) {
        /* mover_pass runs on etcd only: marked draining, the node would
         * keep every copy and take no new table. */
        rpc_set_error(resp, a, LAPSE_ESTATE,
                      "node drain needs the coordinators on etcd (--etcd): only there does the "
                      "leader move copies");
        return;
    }
    char err[512];
    pthread_mutex_lock(&s->lock);
    const pmap_node *n = pmap_node_find(s->pm, r->node);
    int want = !r->stop;
    if (n == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOTFOUND, "no node %u in the map", (unsigned)r->node);
        goto out;
    }
    if (n->draining != want) {
        uint32_t left = 0, most = room_needed(s->pm, r->node, &left);
        if (want && left < most) {
            rpc_set_error(resp, a, LAPSE_EUNAVAILABLE,
                          "draining node %u would leave %u node(s) to hold tables of %u copies: "
                          "add a node first",
                          (unsigned)r->node, (unsigned)left, (unsigned)most);
            goto out;
        }
        pmap *next = pmap_dup(s->pm);
        if (next == NULL || pmap_set_node_draining(next, r->node, want) != 0 ||
            server_commit(s, next, s->next_table_id, err, sizeof(err)) != 0) {
            rpc_set_error(resp, a, next == NULL ? LAPSE_ENOMEM : LAPSE_EIO,
                          "cannot persist the partition map: %s", next == NULL ? "" : err);
            pmap_free(next);
            goto out;
        }
        log_info("node %u %s; map version %llu", (unsigned)r->node,
                 want ? "is draining: its copies move to other nodes" : "is no longer draining",
                 (unsigned long long)s->pm->version);
    }
    answer_left(s->pm, r->node, &m->base_copies_left, &m->moves, &m->other_copies,
                &m->derived_copies_left, &m->lost_copies);
    m->pmap_version = s->pm->version;
    resp->pmap_version = m->pmap_version;
    resp->body_case = LAPSE__RESPONSE__BODY_NODE_DRAIN;
    resp->node_drain = m;
out:
    pthread_mutex_unlock(&s->lock);
}

/* Checks that node n may be removed from s->pm and marks it so in a copy,
 * its copies counted lost (pmap_lose_node_copies: a set whose only copy
 * in sync it held is taken over by the member that left that set last),
 * committed. 0, or the error set in resp. REQUIRES: s->lock held; n is
 * in s->pm and not removed yet. */
static int commit_removal(server *s, const pmap_node *n, int lose_data, Lapse__Response *resp,
                          arena *a)
{
    uint32_t id = n->id, left = 0, most = room_needed(s->pm, n->id, &left);
    if (n->state == PMAP_NODE_UP) {
        rpc_set_error(resp, a, LAPSE_ESTATE,
                      "node %u is UP: remove is for a dead node; drain a live one instead "
                      "(lapse node drain %u)",
                      (unsigned)id, (unsigned)id);
        return LAPSE_ESTATE;
    }
    if (left < most) {
        rpc_set_error(resp, a, LAPSE_EUNAVAILABLE,
                      "removing node %u would leave %u UP node(s) to hold tables of %u copies: "
                      "add a node first",
                      (unsigned)id, (unsigned)left, (unsigned)most);
        return LAPSE_EUNAVAILABLE;
    }
    char err[512] = "";
    pmap *next = pmap_dup(s->pm);
    if (next == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
        return LAPSE_ENOMEM;
    }
    pmap_failover f;
    pmap_lose_node_copies(next, id, &f);
    if (f.stranded > 0) {
        pmap_free(next);
        rpc_set_error(resp, a, LAPSE_ESTATE,
                      "node %u holds the only copy known to have every acknowledged write of "
                      "%zu replica set(s): removing it would lose them; bring it back first",
                      (unsigned)id, f.stranded);
        return LAPSE_ESTATE;
    }
    int rv = pmap_set_node_removed(next, id);
    mover_left lost;
    mover_count(next, id, &lost);
    if (rv == 0 && lost.lost > 0 && !lose_data) {
        rpc_set_error(resp, a, LAPSE_ESTATE,
                      "node %u holds the only copy of %u partition(s), GSI partition(s) or "
                      "stream shard(s) of one-copy tables (table \"%s\" among them): removing "
                      "it loses their items for good. Start it again and drain it (lapse node "
                      "drain %u), or remove it with --lose-data",
                      (unsigned)id, (unsigned)lost.lost, lost.lost_table, (unsigned)id);
        pmap_free(next);
        return LAPSE_ESTATE;
    }
    if (rv == 0) {
        rv = server_commit(s, next, s->next_table_id, err, sizeof(err));
    }
    if (rv != 0) {
        pmap_free(next);
        rpc_set_error(resp, a, LAPSE_EIO, "cannot persist the partition map: %s", err);
        return LAPSE_EIO;
    }
    log_warn("node %u is removed: its copies are made anew on the other nodes (%zu replica "
             "set(s) taken over by the copy that left them last; %u copies of one-copy tables "
             "lost with it); map version %llu",
             (unsigned)id, f.recovered, (unsigned)lost.lost, (unsigned long long)s->pm->version);
    if (f.recovered + f.promoted + f.shrunk > 0) {
        replicas_push(s);
    }
    return 0;
}

void mover_remove(server *s, const Lapse__NodeRemoveRequest *r, Lapse__Response *resp, arena *a)
{
    Lapse__NodeRemoveResponse *m = arena_alloc(a, sizeof(*m));
    if (m == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__node_remove_response__init(m);
    if (s->ec == NULL) {
        /* mover_pass runs on etcd only: marked removed, the node would be
         * refused for good and its copies never made anew. */
        rpc_set_error(resp, a, LAPSE_ESTATE,
                      "node remove needs the coordinators on etcd (--etcd): only there does the "
                      "leader make a removed node's copies anew");
        return;
    }
    pthread_mutex_lock(&s->lock);
    const pmap_node *n = pmap_node_find(s->pm, r->node);
    if (n == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOTFOUND, "no node %u in the map", (unsigned)r->node);
        goto out;
    }
    if (!n->removed && commit_removal(s, n, r->lose_data, resp, a) != 0) {
        goto out;
    }
    answer_left(s->pm, r->node, &m->base_copies_left, &m->moves, &m->other_copies,
                &m->derived_copies_left, &m->lost_copies);
    m->pmap_version = s->pm->version;
    resp->pmap_version = m->pmap_version;
    resp->body_case = LAPSE__RESPONSE__BODY_NODE_REMOVE;
    resp->node_remove = m;
out:
    pthread_mutex_unlock(&s->lock);
}

void mover_rebalance(server *s, const Lapse__RebalanceRequest *r, Lapse__Response *resp, arena *a)
{
    (void)r; /* the leader rebalances on its own: a call only reads its plan */
    Lapse__RebalanceResponse *m = arena_alloc(a, sizeof(*m));
    if (m == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__rebalance_response__init(m);
    pthread_mutex_lock(&s->lock);
    size_t max = 0;
    for (size_t t = 0; t < s->pm->ntables; t++) {
        max += s->pm->tables[t].schema.partitions;
    }
    pmap_move *mv = calloc(max > 0 ? max : 1, sizeof(*mv));
    size_t n =
        mv != NULL ? pmap_rebalance_plan(s->pm, mv, max, s->balance_primaries > 0 ? max : 0) : 0;
    m->moving = (uint32_t)count_moving(s->pm);
    m->pmap_version = s->pm->version;
    pthread_mutex_unlock(&s->lock);
    if (mv == NULL || (n > 0 && (m->moves = arena_alloc(a, n * sizeof(*m->moves))) == NULL)) {
        free(mv);
        rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        Lapse__RebalanceMove *x = arena_alloc(a, sizeof(*x));
        if (x == NULL) {
            free(mv);
            rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
            return;
        }
        lapse__rebalance_move__init(x);
        x->table_id = mv[i].table_id;
        x->partition = mv[i].part;
        x->from_node = mv[i].from;
        x->to_node = mv[i].to;
        x->handover = mv[i].handover != 0;
        m->moves[i] = x;
    }
    m->n_moves = n;
    free(mv);
    resp->pmap_version = m->pmap_version;
    resp->body_case = LAPSE__RESPONSE__BODY_REBALANCE;
    resp->rebalance = m;
}
