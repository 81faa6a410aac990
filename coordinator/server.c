/* server.c: the coordinator's state and lifecycle. Contract in server.h. */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "handlers.h"
#include "membership.h"

/* Imports the local catalog in dir into etcd, once: a cluster that has a
 * catalog in etcd already keeps it (logged, not an error). */
static int import_catalog(server *s, const char *dir, char *err, size_t errlen)
{
    catalog *local = NULL;
    catalog_state st = {0};
    int rv = catalog_open(&local, dir, &st, err, errlen);
    if (rv != 0) {
        return rv;
    }
    catalog_close(local);
    rv = catalog_etcd_import(s->ecat, &st, err, errlen);
    if (rv == 0) {
        log_info("imported the catalog in %s into etcd: map version %llu, %zu tables", dir,
                 (unsigned long long)st.pm->version, st.pm->ntables);
    } else if (rv == LAPSE_EEXISTS) {
        log_warn("%s", err);
        rv = 0;
    }
    pmap_free(st.pm);
    return rv;
}

/* The etcd half of server_open. */
static int open_etcd(server *s, const server_config *cfg, char *err, size_t errlen)
{
    int rv = etcd_open(&s->ec, cfg->etcd_endpoints, 2000, err, errlen);
    if (rv == 0) {
        rv = etcd_keys_init(&s->keys, cfg->cluster_name, err, errlen);
    }
    if (rv == 0) {
        rv = catalog_etcd_open(&s->ecat, s->ec, &s->keys, err, errlen);
    }
    if (rv == 0 && (s->pm = pmap_new()) == NULL) {
        rv = LAPSE_ENOMEM;
        snprintf(err, errlen, "out of memory");
    }
    if (rv == 0 && cfg->import_dir != NULL) {
        rv = import_catalog(s, cfg->import_dir, err, errlen);
    }
    s->next_table_id = 1;
    return rv;
}

int server_open(server **out, const server_config *cfg, char *err, size_t errlen)
{
    *out = NULL;
    server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    snprintf(s->listen_url, sizeof(s->listen_url), "%s", cfg->listen_url);
    s->heartbeat_timeout_ms = cfg->heartbeat_timeout_ms;
    s->default_replication = cfg->default_replication;
    s->max_moves = cfg->max_moves;
    s->balance_primaries = cfg->balance_primaries;
    s->push_timeout_ms = cfg->push_timeout_ms;
    ttlprop_init(&s->ttl);
    pthread_mutex_init(&s->ddl_lock, NULL);
    pthread_mutex_init(&s->lock, NULL);
    pthread_rwlock_init(&s->keeper_lock, NULL);
    clock_cond_init_mono(&s->member_cond);

    int rv;
    if (cfg->admin_token != NULL) {
        s->admin_token_len = strlen(cfg->admin_token);
        if ((s->admin_token = strdup(cfg->admin_token)) == NULL) {
            rv = LAPSE_ENOMEM;
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
    }
    if ((rv = push_new(&s->pusher)) != 0) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    catalog_state st = {0};
    if (cfg->etcd_endpoints != NULL) {
        if ((rv = open_etcd(s, cfg, err, errlen)) != 0) {
            goto fail;
        }
        *out = s;
        return 0;
    }
    if ((rv = catalog_open(&s->cat, cfg->data_dir, &st, err, errlen)) != 0) {
        goto fail;
    }
    s->pm = st.pm;
    s->next_table_id = st.next_table_id;
    /* Invariant 1: liveness is not durable, so every node starts DOWN. The
     * version is not bumped: states are hints, and the first heartbeat of
     * each node bumps it anyway. */
    for (size_t i = 0; i < s->pm->nnodes; i++) {
        s->pm->nodes[i].state = PMAP_NODE_DOWN;
    }
    *out = s;
    return 0;

fail:
    server_close(s);
    return rv;
}

int server_start(server *s, char *err, size_t errlen)
{
    rpc_server_options opt = {0};
    /* CreateTable/DeleteTable block a worker for up to the push timeout and
     * queue behind ddl_lock; enough workers stay free for heartbeats. */
    opt.contexts = 64;
    opt.workers = 16;
    int rv = rpc_server_open(&s->rpc, s->listen_url, &opt, handlers_dispatch, s, err, errlen);
    if (rv != 0) {
        s->rpc = NULL;
        return rv;
    }
    if ((rv = membership_start(s)) != 0) {
        snprintf(err, errlen, "cannot start the membership thread");
        rpc_server_close(s->rpc);
        s->rpc = NULL;
        return rv;
    }
    return 0;
}

void server_close(server *s)
{
    if (s == NULL) {
        return;
    }
    /* Handlers use everything below, so the rpc server goes first. */
    rpc_server_close(s->rpc);
    membership_stop(s);
    push_free(s->pusher);
    catalog_close(s->cat);
    catalog_etcd_close(s->ecat);
    etcd_close(s->ec);
    pmap_free(s->pm);
    for (size_t i = 0; i < s->nlive; i++) {
        free(s->live[i].lags);
        free(s->live[i].filling);
    }
    free(s->live);
    ttlprop_fini(&s->ttl);
    if (s->admin_token != NULL) {
        /* Not left behind in freed memory. */
        volatile char *t = s->admin_token;
        for (size_t i = 0; i < s->admin_token_len; i++) {
            t[i] = 0;
        }
        free(s->admin_token);
    }
    pthread_cond_destroy(&s->member_cond);
    pthread_mutex_destroy(&s->lock);
    pthread_rwlock_destroy(&s->keeper_lock);
    pthread_mutex_destroy(&s->ddl_lock);
    free(s);
}

int server_commit(server *s, pmap *next, uint32_t next_table_id, char *err, size_t errlen)
{
    uint64_t old_version = next->version;
    next->version = s->pm->version + 1;
    catalog_state st = {next, next_table_id};
    int rv = s->ec == NULL ? catalog_save(s->cat, &st, err, errlen)
                           : catalog_etcd_save(s->ecat, &st, err, errlen);
    if (rv != 0) {
        next->version = old_version;
        if (s->ec != NULL) {
            /* Refused (no longer leading, or stale) or unknown: this state
             * may be behind etcd's. Lead again only after a fresh load. */
            atomic_store(&s->leading, 0);
        }
        return rv;
    }
    pmap_free(s->pm);
    s->pm = next;
    s->next_table_id = next_table_id;
    return 0;
}

int server_confirm(server *s, char *err, size_t errlen)
{
    if (s->ec == NULL) {
        return 0;
    }
    int rv = catalog_etcd_confirm(s->ecat, err, errlen);
    if (rv != 0) {
        atomic_store(&s->leading, 0); /* as server_commit: load again first */
    }
    return rv;
}

int server_leads(server *s)
{
    if (s->ec == NULL) {
        return 1;
    }
    if (!atomic_load(&s->leading)) {
        return 0;
    }
    int64_t lease = 0, left = 0;
    pthread_rwlock_rdlock(&s->keeper_lock);
    if (s->keeper != NULL) {
        left = etcd_keeper_valid_ms(s->keeper, &lease);
    }
    pthread_rwlock_unlock(&s->keeper_lock);
    return left > SERVER_LEAD_MARGIN_MS && lease == atomic_load(&s->lead_lease);
}

node_live *server_live(server *s, uint32_t id, int create)
{
    for (size_t i = 0; i < s->nlive; i++) {
        if (s->live[i].id == id) {
            return &s->live[i];
        }
    }
    if (!create) {
        return NULL;
    }
    if (s->nlive == s->live_cap) {
        size_t cap = s->live_cap ? s->live_cap * 2 : 8;
        node_live *nl = realloc(s->live, cap * sizeof(*nl));
        if (nl == NULL) {
            return NULL;
        }
        s->live = nl;
        s->live_cap = cap;
    }
    node_live *l = &s->live[s->nlive++];
    memset(l, 0, sizeof(*l));
    l->id = id;
    l->last_heartbeat_mono_ms = -1;
    return l;
}
