/* membership.c: node liveness. Contract and state machine in membership.h. */
#include "membership.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"

/* Commits node id with address and state on a copy of the map.
 * REQUIRES: s->lock held. */
static int commit_node(server *s, uint32_t id, const char *address, pmap_node_state state,
                       char *err, size_t errlen)
{
    pmap *next = pmap_dup(s->pm);
    if (next == NULL || pmap_set_node(next, id, address, state) != 0) {
        pmap_free(next);
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    int rv = server_commit(s, next, s->next_table_id, err, errlen);
    if (rv != 0) {
        pmap_free(next);
    }
    return rv;
}

int membership_register(server *s, uint32_t id, const char *address, char *err, size_t errlen)
{
    if (id == 0) {
        snprintf(err, errlen, "node_id must be > 0");
        return LAPSE_EINVAL;
    }
    if (address == NULL || address[0] == '\0') {
        snprintf(err, errlen, "address is empty");
        return LAPSE_EINVAL;
    }
    if (strlen(address) >= PMAP_MAX_ADDR) {
        snprintf(err, errlen, "address is longer than %d bytes", PMAP_MAX_ADDR - 1);
        return LAPSE_EINVAL;
    }
    int rv = 0;
    pthread_mutex_lock(&s->lock);
    node_live *l = server_live(s, id, 1);
    if (l == NULL) {
        rv = LAPSE_ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    l->last_heartbeat_mono_ms = clock_mono_now().ms;
    const pmap_node *n = pmap_node_find(s->pm, id);
    if (n != NULL && n->state == PMAP_NODE_UP && strcmp(n->address, address) == 0) {
        goto done; /* nothing changed: no bump */
    }
    char old[PMAP_MAX_ADDR + 16];
    snprintf(old, sizeof(old), "%s", n == NULL ? "new" : n->address);
    if ((rv = commit_node(s, id, address, PMAP_NODE_UP, err, errlen)) != 0) {
        goto done;
    }
    log_info("node %u registered at %s (was %s); map version %llu", id, address, old,
             (unsigned long long)s->pm->version);
done:
    pthread_mutex_unlock(&s->lock);
    return rv;
}

int membership_heartbeat(server *s, uint32_t id, uint64_t pmap_version, int64_t clock_ms,
                         int64_t now_wall_ms, char *err, size_t errlen)
{
    int rv = 0;
    pthread_mutex_lock(&s->lock);
    const pmap_node *n = pmap_node_find(s->pm, id);
    if (n == NULL) {
        rv = LAPSE_ENOTFOUND;
        snprintf(err, errlen, "node %u is not registered", id);
        goto done;
    }
    node_live *l = server_live(s, id, 1);
    if (l == NULL) {
        rv = LAPSE_ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    l->last_heartbeat_mono_ms = clock_mono_now().ms;
    l->pmap_version = pmap_version;
    l->clock_skew_ms = clock_ms - now_wall_ms;
    if (n->state == PMAP_NODE_UP) {
        goto done;
    }
    char address[PMAP_MAX_ADDR];
    snprintf(address, sizeof(address), "%s", n->address); /* n dies with the old map */
    if ((rv = commit_node(s, id, address, PMAP_NODE_UP, err, errlen)) != 0) {
        goto done;
    }
    log_info("node %u (%s) is UP again; map version %llu", id, address,
             (unsigned long long)s->pm->version);
done:
    pthread_mutex_unlock(&s->lock);
    return rv;
}

/*
 * One pass of down detection. Budget: one look at each node (the cluster has
 * few), and at most one commit, with every node found silent in this pass
 * marked DOWN together, so a pass never holds the lock for more than one
 * synced write. A failed commit is retried on the next pass, since the nodes
 * are still UP and still silent.
 * REQUIRES: s->lock held.
 */
static void check_silent(server *s, int64_t now_mono_ms)
{
    if (!server_leads(s)) {
        return; /* the leader judges liveness */
    }
    pmap *next = NULL;
    size_t ndown = 0;
    for (size_t i = 0; i < s->pm->nnodes; i++) {
        const pmap_node *n = &s->pm->nodes[i];
        if (n->state != PMAP_NODE_UP) {
            continue;
        }
        const node_live *l = server_live(s, n->id, 0);
        int64_t age = (l == NULL || l->last_heartbeat_mono_ms < 0)
                          ? -1
                          : now_mono_ms - l->last_heartbeat_mono_ms;
        /* An UP node with no liveness entry cannot happen (every path to UP
         * records a heartbeat); treat it as silent. */
        if (age >= 0 && age <= s->heartbeat_timeout_ms) {
            continue;
        }
        if (next == NULL && (next = pmap_dup(s->pm)) == NULL) {
            log_error("membership: out of memory; retrying");
            return;
        }
        if (pmap_set_node(next, n->id, n->address, PMAP_NODE_DOWN) != 0) {
            log_error("membership: out of memory; retrying");
            pmap_free(next);
            return;
        }
        ndown++;
        log_warn("node %u (%s) is DOWN: no heartbeat for %lld ms (timeout %lld ms)", n->id,
                 n->address, (long long)age, (long long)s->heartbeat_timeout_ms);
    }
    if (next == NULL) {
        return;
    }
    char err[512];
    if (server_commit(s, next, s->next_table_id, err, sizeof(err)) != 0) {
        log_error("membership: cannot persist DOWN state (retrying): %s", err);
        pmap_free(next);
        return;
    }
    log_info("map version %llu after marking %zu node(s) DOWN", (unsigned long long)s->pm->version,
             ndown);
}

static void *member_main(void *arg)
{
    server *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->member_stop) {
        struct timespec until = clock_mono_abstime(MEMBERSHIP_PERIOD_MS);
        while (!s->member_stop &&
               pthread_cond_timedwait(&s->member_cond, &s->lock, &until) != ETIMEDOUT) {
        }
        if (s->member_stop) {
            break;
        }
        check_silent(s, clock_mono_now().ms);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int membership_start(server *s)
{
    pthread_mutex_lock(&s->lock);
    s->member_stop = 0;
    pthread_mutex_unlock(&s->lock);
    if (pthread_create(&s->member_thread, NULL, member_main, s) != 0) {
        return LAPSE_ENOMEM;
    }
    s->member_running = 1;
    return 0;
}

void membership_stop(server *s)
{
    if (!s->member_running) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->member_stop = 1;
    pthread_cond_broadcast(&s->member_cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->member_thread, NULL);
    s->member_running = 0;
}
