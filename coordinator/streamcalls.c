/* streamcalls.c: UpdateStream, a stream turned on or off after
 * CreateTable. Contract in streamcalls.h. */
#include "streamcalls.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "ddl.h"
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
    table_stream st;
    int rv;

    ddl_txn x;
    ddl_begin(&x, s, resp);
    const pmap_table *t = ddl_find(&x, name, resp, a);
    if (t == NULL) {
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
    if (ddl_dup(&x, resp, a) != 0) {
        goto unlock;
    }
    if ((rv = pmap_set_stream(x.next, name, &st)) != 0) {
        rpc_set_error(resp, a, rv, "cannot place the stream shards of table %s: %s", name,
                      rv == LAPSE_EUNAVAILABLE ? "fewer nodes up than the table's copies"
                                               : lapse_strerror(rv));
        goto unlock;
    }
    if (ddl_commit(&x, s->next_table_id, resp, a) != 0) {
        goto unlock;
    }
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
    ddl_push(&x, ttlcalls_record_push_reply);
    ddl_end(&x);
}
