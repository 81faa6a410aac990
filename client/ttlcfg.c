/*
 * ttlcfg.c: time to live from the client (ttlcfg.h): configuration calls to
 * the coordinator, the preview fan-out to the nodes, and their JSON.
 */
#include "ttlcfg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../rpc/wire.h"

/* ------------------------------------------------------------------------ */
/* JSON shaping                                                              */
/* ------------------------------------------------------------------------ */

static json_int_t guard_years(int32_t wire)
{
    return wire > 0 ? wire : TTLCFG_DEFAULT_GUARD_YEARS;
}

static int has_attribute(const Lapse__TtlConfig *cfg)
{
    return cfg != NULL && cfg->attribute != NULL && cfg->attribute[0] != '\0';
}

/* Sets key to v on o, dropping v; returns 0 or -1 (v NULL or OOM). */
static int put(json_t *o, const char *key, json_t *v)
{
    return v != NULL ? json_object_set_new(o, key, v) : -1;
}

static json_t *node_json(const Lapse__TtlNodeStatus *n)
{
    const Lapse__TtlProgress *p = n->progress;
    json_t *o = json_object();
    if (o == NULL) {
        return NULL;
    }
    /* Shown in full even when unreported, so every node has the same keys. */
    int bad = put(o, "NodeId", json_integer(n->node_id)) |
              put(o, "Reported", json_boolean(n->reported)) |
              put(o, "AppliedVersion", json_integer(p ? (json_int_t)p->config_version : 0)) |
              put(o, "BackfillDone", json_boolean(p ? p->backfill_done : 0)) |
              put(o, "BackfillItems", json_integer(p ? (json_int_t)p->backfill_items : 0)) |
              put(o, "PartitionsDone", json_integer(p ? p->partitions_done : 0)) |
              put(o, "PartitionsTotal", json_integer(p ? p->partitions_total : 0));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *ttlcfg_description_json(const Lapse__TtlDescription *d)
{
    const Lapse__TtlConfig *cfg = d != NULL ? d->config : NULL;
    const char *status =
        d != NULL && d->status != NULL && d->status[0] != '\0' ? d->status : "DISABLED";
    json_t *doc = json_object(), *desc = json_object(), *prop = json_object();
    json_t *nodes = json_array();
    int bad = doc == NULL || desc == NULL || prop == NULL || nodes == NULL;

    bad = bad || put(desc, "TimeToLiveStatus", json_string(status)) != 0;
    if (!bad && has_attribute(cfg)) {
        bad = put(desc, "AttributeName", json_string(cfg->attribute)) != 0;
    }
    for (size_t i = 0; !bad && d != NULL && i < d->n_nodes; i++) {
        bad = d->nodes[i] == NULL || json_array_append_new(nodes, node_json(d->nodes[i])) != 0;
    }
    if (!bad) {
        bad = put(prop, "ConfigVersion", json_integer(cfg ? (json_int_t)cfg->config_version : 0)) !=
                  0 ||
              json_object_set(prop, "Nodes", nodes) != 0 ||
              json_object_set(doc, "TimeToLiveDescription", desc) != 0 ||
              put(doc, "OffsetSeconds", json_integer(cfg ? cfg->offset_seconds : 0)) != 0 ||
              put(doc, "IgnoreOlderThanYears",
                  json_integer(guard_years(cfg ? cfg->ignore_older_than_years : 0))) != 0 ||
              put(doc, "Paused", json_boolean(cfg ? cfg->paused : 0)) != 0 ||
              json_object_set(doc, "Propagation", prop) != 0;
    }
    json_decref(desc);
    json_decref(prop);
    json_decref(nodes);
    if (bad) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

json_t *ttlcfg_config_json(const Lapse__TtlConfig *cfg)
{
    json_t *o = json_object();
    if (o == NULL) {
        return NULL;
    }
    int bad = put(o, "Enabled", json_boolean(cfg ? cfg->enabled : 0)) != 0;
    if (!bad && has_attribute(cfg)) {
        bad = put(o, "AttributeName", json_string(cfg->attribute)) != 0;
    }
    bad = bad || put(o, "OffsetSeconds", json_integer(cfg ? cfg->offset_seconds : 0)) != 0 ||
          put(o, "IgnoreOlderThanYears",
              json_integer(guard_years(cfg ? cfg->ignore_older_than_years : 0))) != 0 ||
          put(o, "Paused", json_boolean(cfg ? cfg->paused : 0)) != 0 ||
          put(o, "ConfigVersion", json_integer(cfg ? (json_int_t)cfg->config_version : 0)) != 0;
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

void ttlcfg_preview_add(lapse_ttl_preview_counts *sum, const Lapse__TtlPreviewResponse *r)
{
    sum->items += r->items;
    sum->due_now += r->due_now;
    sum->due_within_hour += r->due_hour;
    sum->due_within_day += r->due_day;
    sum->due_later += r->due_later;
    sum->missing += r->missing;
    sum->not_a_number += r->not_a_number;
    sum->older_than_guard += r->too_old;
    sum->out_of_range += r->out_of_range;
}

/* ------------------------------------------------------------------------ */
/* Checks                                                                    */
/* ------------------------------------------------------------------------ */

/* The rule's parts every TTL call shares. */
static int check_rule(const char *attribute, int64_t offset_s, int guard, lapse_error *err)
{
    if (attribute == NULL || attribute[0] == '\0') {
        return client_err(err, LAPSE_EINVAL, "no TTL attribute name given");
    }
    if (strlen(attribute) > SCHEMA_MAX_KEY_NAME) {
        return client_err(err, LAPSE_EINVAL, "TTL attribute name is longer than %d bytes",
                          SCHEMA_MAX_KEY_NAME);
    }
    if (offset_s < 0) {
        return client_err(err, LAPSE_EINVAL, "offset must not be negative (got %lld s)",
                          (long long)offset_s);
    }
    if (offset_s > WIRE_MAX_TTL_OFFSET_S) {
        return client_err(err, LAPSE_EINVAL, "offset of %lld s is more than a century",
                          (long long)offset_s);
    }
    if (guard < 0 || guard > WIRE_MAX_TTL_GUARD_YEARS) {
        return client_err(err, LAPSE_EINVAL,
                          "ignore-older-than years must be from 1 to %d (0: the default, %d), "
                          "not %d",
                          WIRE_MAX_TTL_GUARD_YEARS, TTLCFG_DEFAULT_GUARD_YEARS, guard);
    }
    return 0;
}

int ttlcfg_check_spec(const lapse_ttl_spec *spec, lapse_error *err)
{
    if (spec == NULL) {
        return client_err(err, LAPSE_EINVAL, "update TTL: NULL spec");
    }
    switch (spec->action) {
    case LAPSE_TTL_ENABLE:
        return check_rule(spec->attribute, spec->offset_seconds, spec->ignore_older_than_years,
                          err);
    case LAPSE_TTL_DISABLE:
    case LAPSE_TTL_PAUSE:
    case LAPSE_TTL_RESUME:
        return 0;
    default:
        return client_err(err, LAPSE_EINVAL, "update TTL: unknown action %d", (int)spec->action);
    }
}

/* ------------------------------------------------------------------------ */
/* Configuration calls                                                       */
/* ------------------------------------------------------------------------ */

/* Formats d (from a reply; NULL when it had none) into *json_out. */
static int description_out(const Lapse__TtlDescription *d, char **json_out, lapse_error *err)
{
    if (d == NULL) {
        return client_err(err, LAPSE_EPROTO, "reply carries no TTL description");
    }
    json_t *doc = ttlcfg_description_json(d);
    *json_out = doc != NULL ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(doc);
    if (*json_out == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    return client_ok(err);
}

static const Lapse__UpdateTimeToLiveRequest__Action actions[] = {
    [LAPSE_TTL_ENABLE] = LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__ENABLE,
    [LAPSE_TTL_DISABLE] = LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__DISABLE,
    [LAPSE_TTL_PAUSE] = LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__PAUSE,
    [LAPSE_TTL_RESUME] = LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__RESUME,
};

int lapse_update_ttl(lapse_client *c, const char *table, const lapse_ttl_spec *spec,
                     char **json_out, lapse_error *err)
{
    Lapse__UpdateTimeToLiveRequest body = LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    int rv;

    if (json_out != NULL) {
        *json_out = NULL;
    }
    if (c == NULL || table == NULL) {
        return client_err(err, LAPSE_EINVAL, "update TTL: NULL argument");
    }
    if ((rv = ttlcfg_check_spec(spec, err)) != 0) {
        return rv;
    }
    body.table = (char *)table;
    body.action = actions[spec->action];
    if (spec->action == LAPSE_TTL_ENABLE) {
        body.attribute = (char *)spec->attribute;
        body.offset_seconds = spec->offset_seconds;
        body.ignore_older_than_years = spec->ignore_older_than_years;
    }
    req.body_case = LAPSE__REQUEST__BODY_UPDATE_TTL;
    req.update_ttl = &body;
    /* Not idempotent: a retried ENABLE that had been applied would fail as
     * "already enabled". */
    if ((rv = client_call_coord(c, &req, 0, &resp, err)) != 0) {
        return rv;
    }
    /* The config travels in the map: reads routed from now see it. */
    client_refresh(c, client_timeout_ms(c), NULL);
    if (json_out != NULL) {
        const Lapse__TtlDescription *d =
            resp->body_case == LAPSE__RESPONSE__BODY_UPDATE_TTL && resp->update_ttl != NULL
                ? resp->update_ttl->description
                : NULL;
        rv = description_out(d, json_out, err);
    } else {
        rv = client_ok(err);
    }
    rpc_response_free(resp);
    return rv;
}

int lapse_describe_ttl(lapse_client *c, const char *table, char **json_out, lapse_error *err)
{
    Lapse__DescribeTimeToLiveRequest body = LAPSE__DESCRIBE_TIME_TO_LIVE_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    int rv;

    if (json_out == NULL) {
        return client_err(err, LAPSE_EINVAL, "describe TTL: NULL argument");
    }
    *json_out = NULL;
    if (c == NULL || table == NULL) {
        return client_err(err, LAPSE_EINVAL, "describe TTL: NULL argument");
    }
    body.table = (char *)table;
    req.body_case = LAPSE__REQUEST__BODY_DESCRIBE_TTL;
    req.describe_ttl = &body;
    if ((rv = client_call_coord(c, &req, 1, &resp, err)) != 0) {
        return rv;
    }
    const Lapse__TtlDescription *d =
        resp->body_case == LAPSE__RESPONSE__BODY_DESCRIBE_TTL && resp->describe_ttl != NULL
            ? resp->describe_ttl->description
            : NULL;
    rv = description_out(d, json_out, err);
    rpc_response_free(resp);
    return rv;
}

/* ------------------------------------------------------------------------ */
/* Preview                                                                   */
/* ------------------------------------------------------------------------ */

/* The distinct owners of table's partitions in the cached map, into
 * *routes[0..*n) (*routes is grown to the partition count; caller frees). */
static int preview_targets(lapse_client *c, const char *table, client_route **routes, size_t *n,
                           lapse_error *err)
{
    int rv = 0;
    *n = 0;
    pthread_mutex_lock(&c->mu);
    const pmap_table *t = c->map != NULL ? pmap_table_find(c->map, table) : NULL;
    if (t == NULL) {
        rv = client_err(err, LAPSE_ENOTFOUND, "table \"%s\" does not exist", table);
        goto out;
    }
    client_route *v =
        realloc(*routes, (t->schema.partitions ? t->schema.partitions : 1) * sizeof *v);
    if (v == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    *routes = v;
    for (uint32_t part = 0; part < t->schema.partitions; part++) {
        uint32_t id = pmap_owner(t, part);
        size_t i = 0;
        while (i < *n && v[i].node_id != id) {
            i++;
        }
        if (i < *n) {
            continue;
        }
        const pmap_node *node = pmap_node_find(c->map, id);
        if (node == NULL) {
            rv = client_err(err, LAPSE_EUNAVAILABLE, "table \"%s\" partition %u has no known owner",
                            table, (unsigned)part);
            goto out;
        }
        v[i].node_id = id;
        snprintf(v[i].addr, sizeof v[i].addr, "%s", node->address);
        v[i].pmap_version = c->map->version;
        (*n)++;
    }
out:
    pthread_mutex_unlock(&c->mu);
    return rv;
}

static int retryable(int rv)
{
    return rv == LAPSE_EWRONGNODE || rv == LAPSE_ETIMEDOUT || rv == LAPSE_EUNAVAILABLE;
}

/* As client_node_err, but the message always names the node: with many
 * nodes asked at once, the server's own text alone does not say which. */
static int node_err(lapse_error *err, int code, const client_route *r, const char *msg,
                    int timeout_ms)
{
    lapse_error e;
    client_node_err(&e, code, r, msg, timeout_ms);
    if (strncmp(e.message, "node ", 5) == 0) {
        return client_err(err, code, "%s", e.message);
    }
    return client_err(err, code, "node %u (%s): %s", (unsigned)r->node_id, r->addr, e.message);
}

/* One round: asks every owner at once and sums into *out. Returns 0, or the
 * first non-retryable failure, or else the last retryable one (in *last). */
static int preview_round(lapse_client *c, const client_route *routes, size_t n,
                         Lapse__TtlPreviewRequest *body, int budget_ms,
                         lapse_ttl_preview_counts *out, lapse_error *err)
{
    int rv = 0, retry_rv = 0;
    lapse_error retry_err = {0};
    rpc_multi_call *calls = calloc(n ? n : 1, sizeof *calls);
    Lapse__Request *reqs = calloc(n ? n : 1, sizeof *reqs);
    if (calls == NULL || reqs == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < n; k++) {
        lapse__request__init(&reqs[k]);
        reqs[k].pmap_version = routes[k].pmap_version;
        reqs[k].body_case = LAPSE__REQUEST__BODY_TTL_PREVIEW;
        reqs[k].ttl_preview = body;
        calls[k].req = &reqs[k];
        if ((rv = client_conn(c, routes[k].addr, &calls[k].client, err)) != 0) {
            goto out;
        }
    }
    rpc_call_many(calls, n, budget_ms);
    memset(out, 0, sizeof *out);
    for (size_t k = 0; k < n; k++) {
        const Lapse__Response *resp = calls[k].resp;
        if (calls[k].rv != 0) {
            if (!retryable(calls[k].rv)) {
                rv = node_err(err, calls[k].rv, &routes[k], calls[k].err, budget_ms);
                goto out;
            }
            retry_rv = node_err(&retry_err, calls[k].rv, &routes[k], calls[k].err, budget_ms);
            continue;
        }
        if (resp->body_case != LAPSE__RESPONSE__BODY_TTL_PREVIEW || resp->ttl_preview == NULL) {
            rv =
                node_err(err, LAPSE_EPROTO, &routes[k], "reply has no ttl_preview body", budget_ms);
            goto out;
        }
        ttlcfg_preview_add(out, resp->ttl_preview);
    }
    if (retry_rv != 0) {
        rv = client_err(err, retry_rv, "%s", retry_err.message);
    }
out:
    for (size_t k = 0; calls != NULL && k < n; k++) {
        rpc_response_free(calls[k].resp);
    }
    free(calls);
    free(reqs);
    return rv;
}

int lapse_ttl_preview(lapse_client *c, const char *table, const char *attribute,
                      int64_t offset_seconds, int guard_years, lapse_ttl_preview_counts *out,
                      lapse_error *err)
{
    Lapse__TtlPreviewRequest body = LAPSE__TTL_PREVIEW_REQUEST__INIT;
    client_route *routes = NULL;
    table_schema t;
    size_t n = 0;
    int rv;

    if (out == NULL) {
        return client_err(err, LAPSE_EINVAL, "TTL preview: NULL argument");
    }
    memset(out, 0, sizeof *out);
    if (c == NULL || table == NULL) {
        return client_err(err, LAPSE_EINVAL, "TTL preview: NULL argument");
    }
    if ((rv = check_rule(attribute, offset_seconds, guard_years, err)) != 0 ||
        (rv = client_table(c, table, &t, err)) != 0) {
        return rv;
    }
    body.table = (char *)table;
    body.attribute = (char *)attribute;
    body.offset_seconds = offset_seconds;
    body.ignore_older_than_years = guard_years;

    /* Counting is read-only, so a round that met a moved partition or a
     * node that did not answer is simply run again on a fresh map, until the
     * client's timeout. */
    int total = client_timeout_ms(c);
    clock_mono deadline = clock_mono_after_ms(total);
    int64_t backoff = CLIENT_BACKOFF_MIN_MS;
    for (;;) {
        if ((rv = preview_targets(c, table, &routes, &n, err)) != 0) {
            break;
        }
        int64_t left = clock_mono_remaining_ms(deadline);
        rv = preview_round(c, routes, n, &body, left > 1 ? (int)left : 1, out, err);
        if (rv == 0 || !retryable(rv) || clock_mono_remaining_ms(deadline) <= 0) {
            break;
        }
        client_backoff(&backoff, deadline);
        if (clock_mono_remaining_ms(deadline) <= 0) {
            break;
        }
        client_refresh(c, (int)clock_mono_remaining_ms(deadline), NULL);
    }
    free(routes);
    if (rv != 0) {
        memset(out, 0, sizeof *out);
        return rv;
    }
    return client_ok(err);
}
