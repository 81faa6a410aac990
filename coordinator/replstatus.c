/* replstatus.c: followers' lag as reported by primaries; see replstatus.h. */
#include "replstatus.h"

#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"

void replstatus_record(server *s, uint32_t node, Lapse__ReplicaLag *const *lags, size_t n)
{
    live_lag *v = n > 0 ? malloc(n * sizeof(*v)) : NULL;
    if (n > 0 && v == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        v[i] = (live_lag){lags[i]->table_id,         lags[i]->partition, lags[i]->node,
                          lags[i]->lag_records,      lags[i]->known,     lags[i]->copy_bytes,
                          lags[i]->copy_bytes_total, lags[i]->copy_keys, lags[i]->copy_ms};
    }
    pthread_mutex_lock(&s->lock);
    node_live *l = server_live(s, node, 0);
    if (l != NULL) {
        free(l->lags);
        l->lags = v;
        l->nlags = n;
        v = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    free(v);
}

void replstatus_record_filling(server *s, uint32_t node, const uint32_t *tables, size_t n,
                               uint64_t version)
{
    uint32_t *v = n > 0 ? malloc(n * sizeof(*v)) : NULL;
    if (n > 0 && v == NULL) {
        return;
    }
    if (n > 0) {
        memcpy(v, tables, n * sizeof(*v));
    }
    pthread_mutex_lock(&s->lock);
    node_live *l = server_live(s, node, 0);
    if (l != NULL) {
        free(l->filling);
        l->filling = v;
        l->nfilling = n;
        l->filled_version = version;
        v = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    free(v);
}

int replstatus_copies_whole(server *s, uint32_t node, uint32_t table_id, uint64_t since)
{
    const node_live *l = server_live(s, node, 0);
    if (l == NULL || l->filled_version < since || since == 0) {
        return 0;
    }
    for (size_t i = 0; i < l->nfilling; i++) {
        if (l->filling[i] == table_id) {
            return 0;
        }
    }
    return 1;
}

/* Whether node leads partition part of table table_id in s's map. */
static int leads(const server *s, uint32_t node, uint32_t table_id, uint32_t part)
{
    const pmap_replicas *r = pmap_part(pmap_table_find_id(s->pm, table_id), part);
    return r != NULL && r->ids[0] == node;
}

int replstatus_lag_pb(server *s, uint32_t table_id, arena *a, Lapse__ReplicaLag ***out, size_t *n)
{
    size_t total = 0, k = 0;
    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < s->nlive; i++) {
        total += s->live[i].nlags;
    }
    if (total == 0) {
        return 0;
    }
    Lapse__ReplicaLag **v = arena_alloc(a, total * sizeof(*v));
    if (v == NULL) {
        return LAPSE_ENOMEM;
    }
    for (size_t i = 0; i < s->nlive; i++) {
        const node_live *l = &s->live[i];
        for (size_t j = 0; j < l->nlags; j++) {
            const live_lag *g = &l->lags[j];
            if ((table_id != 0 && g->table_id != table_id) ||
                !leads(s, l->id, g->table_id, g->part)) {
                continue;
            }
            Lapse__ReplicaLag *m = arena_alloc(a, sizeof(*m));
            if (m == NULL) {
                return LAPSE_ENOMEM;
            }
            lapse__replica_lag__init(m);
            m->table_id = g->table_id;
            m->partition = g->part;
            m->node = g->node;
            m->lag_records = g->lag;
            m->known = g->known != 0;
            m->copy_bytes = g->copy_bytes;
            m->copy_bytes_total = g->copy_total;
            m->copy_keys = g->copy_keys;
            m->copy_ms = g->copy_ms;
            v[k++] = m;
        }
    }
    *out = k > 0 ? v : NULL;
    *n = k;
    return 0;
}
