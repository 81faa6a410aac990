/* streamcalls.c: UpdateStream, a stream turned on or off after
 * CreateTable. Contract in streamcalls.h. */
#include "streamcalls.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../rpc/wire.h"
#include "push.h"
#include "ttlcalls.h"

/* The next config of a stream now cur: on with view (a new generation) or
 * off (generation and since_ms kept). Returns 0 or an error with its
 * message in err (nothing changed). */
static int next_config(const char *name, const table_stream *cur, int enable, stream_view view,
                       int64_t now_ms, table_stream *out, char *err, size_t errlen)
{
    if (enable && cur->enabled) {
        snprintf(err, errlen, "table %s already has an enabled stream", name);
        return LAPSE_EEXISTS;
    }
    if (!enable && !cur->enabled) {
        snprintf(err, errlen, "table %s has no stream to disable", name);
        return LAPSE_ESTATE;
    }
    if (enable && cur->generation >= (UINT32_MAX >> 8)) {
        snprintf(err, errlen, "table %s: its stream was turned on too many times", name);
        return LAPSE_ESTATE;
    }
    /* Off keeps only what the next one must follow (as the wire does). */
    memset(out, 0, sizeof(*out));
    out->generation = cur->generation;
    out->since_ms = cur->since_ms;
    out->enabled = enable;
    if (enable) {
        out->generation = cur->generation + 1;
        out->view = view;
        out->ttl_deletes = 1; /* as DynamoDB: TTL deletes are in its streams */
        out->retention_hours = SCHEMA_DEFAULT_STREAM_RETENTION_HOURS;
        /* Invariant 1: a label later than the last one, also when the
         * clock stepped back. */
        out->since_ms = now_ms > cur->since_ms ? now_ms : cur->since_ms + 1;
    }
    return 0;
}

void streamcalls_update(server *s, const Lapse__UpdateStreamRequest *r, Lapse__Response *resp,
                        arena *a)
{
    char err[512] = "";
    const char *name = r->table != NULL ? r->table : "";
    if (r->enabled && (unsigned)r->view > STREAM_VIEW_OLD_IMAGE) {
        rpc_set_error(resp, a, LAPSE_EINVAL, "unknown stream view %d", (int)r->view);
        return;
    }
    Lapse__UpdateStreamResponse *m = arena_alloc(a, sizeof(*m));
    Lapse__StreamConfig *sc = arena_alloc(a, sizeof(*sc));
    if (m == NULL || sc == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__update_stream_response__init(m);
    lapse__stream_config__init(sc);
    Lapse__PartitionMap *map = NULL;
    const char **urls = NULL;
    uint32_t *ids = NULL;
    size_t nurls = 0;
    pmap *next = NULL;
    table_stream st;
    int rv;

    pthread_mutex_lock(&s->ddl_lock);
    pthread_mutex_lock(&s->lock);
    resp->pmap_version = s->pm->version;
    const pmap_table *t = pmap_table_find(s->pm, name);
    if (t == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOTFOUND, "table %s does not exist", name);
        goto unlock;
    }
    /* Generation 0 (from CreateTable) is labelled by the table's creation. */
    table_stream cur = t->schema.stream;
    if (cur.since_ms == 0) {
        cur.since_ms = t->schema.created_ms;
    }
    if ((rv = next_config(name, &cur, r->enabled, (stream_view)r->view, clock_wall_now().ms, &st,
                          err, sizeof(err))) != 0) {
        rpc_set_error(resp, a, rv, "%s", err);
        goto unlock;
    }
    if ((next = pmap_dup(s->pm)) == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
        goto unlock;
    }
    if ((rv = pmap_set_stream(next, name, &st)) != 0) {
        rpc_set_error(resp, a, rv, "cannot place the stream shards of table %s: %s", name,
                      rv == LAPSE_EUNAVAILABLE ? "fewer nodes up than the table's copies"
                                               : lapse_strerror(rv));
        goto unlock;
    }
    if ((rv = server_commit(s, next, s->next_table_id, err, sizeof(err))) != 0) {
        rpc_set_error(resp, a, rv, "cannot persist the partition map: %s", err);
        goto unlock;
    }
    next = NULL; /* owned by s now */
    resp->pmap_version = s->pm->version;
    map = wire_pmap_to_pb(a, s->pm);
    urls = push_up_nodes(s->pm, a, &ids, &nurls);
    sc->enabled = st.enabled != 0;
    sc->exclude_ttl_deletes = !st.ttl_deletes;
    sc->retention_hours = st.retention_hours;
    sc->view = (Lapse__StreamView)st.view;
    sc->generation = st.generation;
    sc->since_ms = st.since_ms;
    m->stream = sc;
    resp->body_case = LAPSE__RESPONSE__BODY_UPDATE_STREAM;
    resp->update_stream = m;
    log_info("stream of table %s turned %s (generation %" PRIu32 ", view %d); map version %" PRIu64,
             name, st.enabled ? "on" : "off", st.generation, (int)st.view, s->pm->version);
unlock:
    pthread_mutex_unlock(&s->lock);
    pmap_free(next);
    if (map != NULL) {
        ttlcalls_push_ctx ctx = {s, ids};
        push_map(s->pusher, map, urls, nurls, s->push_timeout_ms, ttlcalls_record_push_reply, &ctx);
    }
    pthread_mutex_unlock(&s->ddl_lock);
}
