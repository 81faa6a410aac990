/* ttlprop.c: TTL config rules and propagation status. Contract and state
 * machine in ttlprop.h; the rules are documented in docs/ttl.md. */
#include "ttlprop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../rpc/wire.h"

void ttlprop_init(ttlprop *tp)
{
    memset(tp, 0, sizeof(*tp));
}

void ttlprop_fini(ttlprop *tp)
{
    free(tp->r);
    memset(tp, 0, sizeof(*tp));
}

static ttlprop_report *find(const ttlprop *tp, uint32_t node_id, uint32_t table_id)
{
    for (size_t i = 0; i < tp->n; i++) {
        if (tp->r[i].node_id == node_id && tp->r[i].p.table_id == table_id) {
            return &tp->r[i];
        }
    }
    return NULL;
}

int ttlprop_record(ttlprop *tp, uint32_t node_id, const ttlprop_progress *p)
{
    ttlprop_report *r = find(tp, node_id, p->table_id);
    if (r != NULL) {
        if (p->config_version >= r->p.config_version) { /* invariant 2 */
            r->p = *p;
        }
        return 0;
    }
    if (tp->n == tp->cap) {
        size_t cap = tp->cap ? tp->cap * 2 : 16;
        ttlprop_report *nr = realloc(tp->r, cap * sizeof(*nr));
        if (nr == NULL) {
            return LAPSE_ENOMEM;
        }
        tp->r = nr;
        tp->cap = cap;
    }
    tp->r[tp->n].node_id = node_id;
    tp->r[tp->n].p = *p;
    tp->n++;
    return 0;
}

const ttlprop_progress *ttlprop_find(const ttlprop *tp, uint32_t node_id, uint32_t table_id)
{
    const ttlprop_report *r = find(tp, node_id, table_id);
    return r != NULL ? &r->p : NULL;
}

void ttlprop_forget_table(ttlprop *tp, uint32_t table_id)
{
    size_t w = 0;
    for (size_t i = 0; i < tp->n; i++) {
        if (tp->r[i].p.table_id != table_id) {
            tp->r[w++] = tp->r[i];
        }
    }
    tp->n = w;
}

/* ------------------------------------------------------------------------ */
/* Status                                                                   */
/* ------------------------------------------------------------------------ */

/* The smallest holder id above last, or 0 when there is none. Few nodes and
 * partitions: repeated scans keep the walk allocation-free. */
static uint32_t next_holder(const pmap_table *t, uint32_t last)
{
    uint32_t next = 0;
    for (uint32_t p = 0; p < t->schema.partitions; p++) {
        for (uint32_t k = 0; k < t->parts[p].n; k++) {
            uint32_t id = t->parts[p].ids[k];
            if (id > last && (next == 0 || id < next)) {
                next = id;
            }
        }
    }
    return next;
}

size_t ttlprop_holders(const pmap_table *t, uint32_t *ids, size_t cap)
{
    size_t n = 0;
    for (uint32_t id = next_holder(t, 0); id != 0; id = next_holder(t, id)) {
        if (n < cap) {
            ids[n] = id;
        }
        n++;
    }
    return n;
}

ttlprop_status ttlprop_status_of(const ttlprop *tp, const pmap_table *t)
{
    const table_ttl *ttl = &t->schema.ttl;
    if (!ttl->enabled && ttl->config_version == 0) {
        return TTLPROP_DISABLED; /* never configured */
    }
    int done = 1;
    for (uint32_t id = next_holder(t, 0); id != 0 && done; id = next_holder(t, id)) {
        const ttlprop_progress *r = ttlprop_find(tp, id, t->schema.id);
        done = r != NULL && r->config_version >= ttl->config_version && r->backfill_done;
    }
    if (ttl->enabled) {
        return done ? TTLPROP_ENABLED : TTLPROP_ENABLING;
    }
    return done ? TTLPROP_DISABLED : TTLPROP_DISABLING;
}

const char *ttlprop_status_name(ttlprop_status st)
{
    switch (st) {
    case TTLPROP_ENABLING:
        return "ENABLING";
    case TTLPROP_ENABLED:
        return "ENABLED";
    case TTLPROP_DISABLING:
        return "DISABLING";
    case TTLPROP_DISABLED:
    default:
        return "DISABLED";
    }
}

/* ------------------------------------------------------------------------ */
/* Changes                                                                  */
/* ------------------------------------------------------------------------ */

int ttlprop_check_change(const ttlprop_change *c, char *err, size_t errlen)
{
    switch (c->action) {
    case TTLPROP_DISABLE:
    case TTLPROP_PAUSE:
    case TTLPROP_RESUME:
        return 0; /* attribute, offset and guard are ignored */
    case TTLPROP_ENABLE:
        break;
    default:
        snprintf(err, errlen, "unknown TimeToLive action %d", (int)c->action);
        return LAPSE_EINVAL;
    }
    size_t len = c->attribute != NULL ? strlen(c->attribute) : 0;
    if (len == 0) {
        snprintf(err, errlen, "an attribute name is required to enable TimeToLive");
        return LAPSE_EINVAL;
    }
    if (len > SCHEMA_MAX_KEY_NAME) {
        snprintf(err, errlen, "TimeToLive attribute name is %zu bytes, at most %d allowed", len,
                 SCHEMA_MAX_KEY_NAME);
        return LAPSE_EINVAL;
    }
    if (c->offset_s < 0) {
        snprintf(err, errlen, "offset_seconds must not be negative (got %lld)",
                 (long long)c->offset_s);
        return LAPSE_EINVAL;
    }
    if (c->offset_s > WIRE_MAX_TTL_OFFSET_S) {
        snprintf(err, errlen, "offset_seconds %lld is over the limit of %lld (a century)",
                 (long long)c->offset_s, (long long)WIRE_MAX_TTL_OFFSET_S);
        return LAPSE_EINVAL;
    }
    if (c->guard_years < 0 || c->guard_years > WIRE_MAX_TTL_GUARD_YEARS) {
        snprintf(err, errlen, "ignore_older_than_years must be from 0 (meaning %d) to %d, not %d",
                 TTLPROP_DEFAULT_GUARD_YEARS, WIRE_MAX_TTL_GUARD_YEARS, (int)c->guard_years);
        return LAPSE_EINVAL;
    }
    return 0;
}

int ttlprop_apply(table_ttl *ttl, ttlprop_status st, const ttlprop_change *c,
                  uint64_t new_version, const char *table, char *err, size_t errlen)
{
    switch (c->action) {
    case TTLPROP_ENABLE:
        if (ttl->enabled && strcmp(ttl->attribute, c->attribute) != 0) {
            snprintf(err, errlen,
                     "TimeToLive is already enabled on table %s with attribute %s; disable it "
                     "first to change the attribute",
                     table, ttl->attribute);
            return LAPSE_ESTATE;
        }
        if (ttl->enabled) {
            snprintf(err, errlen, "TimeToLive is already enabled on table %s", table);
            return LAPSE_ESTATE;
        }
        if (st == TTLPROP_DISABLING) {
            snprintf(err, errlen, "TimeToLive is being disabled on table %s; retry when DISABLED",
                     table);
            return LAPSE_ESTATE;
        }
        ttl->enabled = 1;
        snprintf(ttl->attribute, sizeof(ttl->attribute), "%s", c->attribute);
        ttl->offset_s = c->offset_s;
        ttl->guard_years = c->guard_years != 0 ? c->guard_years : TTLPROP_DEFAULT_GUARD_YEARS;
        ttl->paused = 0;
        ttl->config_version = new_version;
        return 0;
    case TTLPROP_DISABLE:
        if (!ttl->enabled) {
            snprintf(err, errlen, "TimeToLive is already disabled on table %s", table);
            return LAPSE_ESTATE;
        }
        if (st == TTLPROP_ENABLING) {
            snprintf(err, errlen, "TimeToLive is being enabled on table %s; retry when ENABLED",
                     table);
            return LAPSE_ESTATE;
        }
        /* The attribute, offset and guard are kept, as DescribeTimeToLive
         * shows them; paused means nothing once disabled. */
        ttl->enabled = 0;
        ttl->paused = 0;
        ttl->config_version = new_version;
        return 0;
    case TTLPROP_PAUSE:
    case TTLPROP_RESUME: {
        int pause = c->action == TTLPROP_PAUSE;
        if (!ttl->enabled) {
            snprintf(err, errlen, "TimeToLive is not enabled on table %s; nothing to %s", table,
                     pause ? "pause" : "resume");
            return LAPSE_ESTATE;
        }
        if (ttl->paused == pause) {
            snprintf(err, errlen, "TimeToLive is %s on table %s", pause ? "already paused" : "not paused",
                     table);
            return LAPSE_ESTATE;
        }
        ttl->paused = pause;
        return 0;
    }
    }
    snprintf(err, errlen, "unknown TimeToLive action %d", (int)c->action);
    return LAPSE_EINVAL;
}
