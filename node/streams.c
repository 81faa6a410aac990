/*
 * streams.c: GetStreamRecords with its long poll, the wake-ups, and the
 * retention thread (contract in streams.h).
 */
#include "streams.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/apply.h"
#include "../partition/stream.h"
#include "../rpc/wire.h"
#include "maps.h"
#include "newcopy.h"

struct streams {
    node_server *ns;          /* fixed */
    int64_t trim_interval_ms; /* fixed */
    pthread_mutex_t lock;     /* guards the fields below */
    pthread_cond_t arrived;   /* broadcast by streams_notify and streams_stop */
    pthread_cond_t stop_cond; /* wakes the retention thread */
    uint64_t gen;             /* bumped by every streams_notify */
    int pollers;              /* long polls waiting now */
    int stopping;
    pthread_t thread;
    int started;
};

void streams_notify(streams *s)
{
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->gen++;
    pthread_cond_broadcast(&s->arrived);
    pthread_mutex_unlock(&s->lock);
}

static uint64_t current_gen(streams *s)
{
    pthread_mutex_lock(&s->lock);
    uint64_t g = s->gen;
    pthread_mutex_unlock(&s->lock);
    return g;
}

/* Waits until the generation moves past gen, until_mono_ms passes or the
 * node stops. Returns 0 after waiting, -1 when no poll slot was free (or
 * stopping): the caller answers at once. */
static int wait_arrival(streams *s, uint64_t gen, int64_t until_mono_ms)
{
    pthread_mutex_lock(&s->lock);
    if (s->stopping || s->pollers >= STREAMS_MAX_POLLERS) {
        pthread_mutex_unlock(&s->lock);
        return -1;
    }
    s->pollers++;
    struct timespec ts = clock_mono_abstime(until_mono_ms - clock_mono_now().ms);
    while (s->gen == gen && !s->stopping) {
        if (pthread_cond_timedwait(&s->arrived, &s->lock, &ts) == ETIMEDOUT) {
            break;
        }
    }
    s->pollers--;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* GetStreamRecords                                                          */
/* ------------------------------------------------------------------------ */

/* Fills the reply from the records read (out->records from a). */
static int reply_records(request_ctx *c, const change_list *l, uint32_t shard,
                         Lapse__GetStreamRecordsResponse *out)
{
    if (l->n == 0) {
        return 0;
    }
    out->records = arena_alloc(c->a, l->n * sizeof(*out->records));
    if (out->records == NULL) {
        return LAPSE_ENOMEM;
    }
    for (size_t i = 0; i < l->n; i++) {
        int rv = wire_stream_record_to_pb(c->a, l->v[i].data, l->v[i].len,
                                          c->table->schema.stream.view, &out->records[i]);
        if (rv == LAPSE_ECORRUPT) {
            log_error("table \"%s\" stream shard %u: record %" PRIu64 " does not decode",
                      c->table->schema.name, shard, l->v[i].seq);
        }
        if (rv != 0) {
            return rv;
        }
        out->n_records++;
    }
    return 0;
}

/* Fills a raw reply (GetStreamRecordsRequest.raw): the records as stored
 * (copied into the call's arena) and the source partition's applied outbox
 * seq here. */
static int reply_raw(request_ctx *c, const change_list *l, uint32_t table_id, uint32_t shard,
                     Lapse__GetStreamRecordsResponse *out)
{
    char err[256];
    int rv = apply_applied_seq(c->ns->st, table_id, shard, &out->applied, err, sizeof(err));
    if (rv != 0 || l->n == 0) {
        return rv;
    }
    out->raw_records = arena_alloc(c->a, l->n * sizeof(*out->raw_records));
    if (out->raw_records == NULL) {
        return LAPSE_ENOMEM;
    }
    for (size_t i = 0; i < l->n; i++) {
        if ((out->raw_records[i].data = arena_alloc(c->a, l->v[i].len ? l->v[i].len : 1)) == NULL) {
            return LAPSE_ENOMEM;
        }
        memcpy(out->raw_records[i].data, l->v[i].data, l->v[i].len);
        out->raw_records[i].len = l->v[i].len;
    }
    out->n_raw_records = l->n;
    return 0;
}

/* Sets out's last_sequence and oldest_sequence for the read of shard after
 * after that returned l (reused for the oldest when it does not start
 * there), within the generation whose first record is gen_base (0: the
 * first generation): a generation with no record yet has last gen_base - 1. */
static int shard_ends(request_ctx *c, uint32_t table_id, uint32_t shard, uint64_t after,
                      uint64_t gen_base, change_list *l, Lapse__GetStreamRecordsResponse *out,
                      char *err, size_t errlen)
{
    uint64_t last = 0;
    const uint64_t from = gen_base > 0 ? gen_base - 1 : 0;
    int rv = stream_last_seq(c->ns->st, table_id, shard, &last, err, errlen);
    if (rv != 0) {
        return rv;
    }
    out->last_sequence = last > from ? last : from;
    if (l->n > 0 && after == from) {
        out->oldest_sequence = l->v[0].seq;
        return 0;
    }
    /* The oldest retained record: one more seek. */
    if ((rv = stream_read(c->ns->st, table_id, shard, from, 1, 0, l, err, errlen)) != 0) {
        return rv;
    }
    out->oldest_sequence = l->n > 0 ? l->v[0].seq : 0;
    return 0;
}

int streams_shard_gap(node_server *ns, const table_schema *t, uint32_t shard, uint64_t *mark,
                      char *err, size_t errlen)
{
    uint64_t last = 0;
    int rv = apply_stream_gap(ns->st, t->id, shard, mark, err, errlen);
    if (rv != 0 || *mark == 0 || t->stream.generation == 0) {
        return rv;
    }
    if ((rv = stream_last_seq(ns->st, t->id, shard, &last, err, errlen)) != 0) {
        return rv;
    }
    if (last < schema_stream_base(&t->stream)) {
        /* A stream turned on again whose first record has not arrived:
         * what this copy misses (the outbox trimmed before it hosted the
         * shard) is older than the stream; that first record marks the copy
         * whole (partition/apply.c, stream_gen_first). */
        *mark = 0;
    }
    return 0;
}

/* streams_get_records' checks: the reader's generation, the shard, this
 * node's copy of it and whether that copy is whole. 0, or the error set
 * in c->resp. */
static int check_read(request_ctx *c, const Lapse__GetStreamRecordsRequest *r,
                      const table_schema *t)
{
    node_server *ns = c->ns;
    if (r->pin_generation && (t->stream.generation > r->generation ||
                              (t->stream.generation == r->generation && !t->stream.enabled))) {
        /* The reader's stream was turned off: never another's records. */
        rpc_set_error(c->resp, c->a, LAPSE_ENOTFOUND,
                      "stream generation %u of table \"%s\" was turned off (the table's is %u, %s)",
                      r->generation, t->name, t->stream.generation,
                      t->stream.enabled ? "on" : "off");
        return -1;
    }
    if (r->pin_generation && t->stream.generation < r->generation) {
        rpc_set_error(c->resp, c->a, LAPSE_EUNAVAILABLE,
                      "this node's map has stream generation %u of table \"%s\", not yet %u",
                      t->stream.generation, t->name, r->generation);
        return -1;
    }
    if (!t->stream.enabled) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "table \"%s\" has no stream", t->name);
        return -1;
    }
    if (r->shard >= t->partitions) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                      "shard %u is out of range: table \"%s\" has %u shards", r->shard, t->name,
                      t->partitions);
        return -1;
    }
    if (pmap_replicas_index(pmap_stream_shard(c->table, r->shard), ns->id) < 0) {
        rpc_set_error(c->resp, c->a, LAPSE_EWRONGNODE,
                      "stream shard %u of table %s is hosted by node %u, not this one", r->shard,
                      t->name, pmap_stream_host(c->table, r->shard));
        return -1;
    }
    /* A copy missing records its source trimmed (apply.h) answers no read
     * until it is filled from another copy (streams_fill.c): the client
     * goes to another copy. */
    uint64_t gap = 0;
    char merr[256] = "";
    int grv = r->raw ? apply_stream_gap(ns->st, t->id, r->shard, &gap, merr, sizeof(merr))
                     : streams_shard_gap(ns, t, r->shard, &gap, merr, sizeof(merr));
    if (grv == 0 && gap == 0 && newcopy_waiting(ns, t->id)) {
        gap = 1;
        snprintf(merr, sizeof(merr), "is new here and not yet reached by its source (newcopy.h)");
    }
    if (grv != 0 || gap != 0) {
        rpc_set_error(c->resp, c->a, LAPSE_EUNAVAILABLE,
                      "this node's copy of stream shard %u of table %s %s: another copy answers",
                      r->shard, t->name,
                      merr[0] ? merr : "misses records trimmed before it applied them");
        return -1;
    }
    return 0;
}

/* Reads up to limit records after after into l; a long poll (wait_ms)
 * waits for one until until. 0, or the error set in c->resp. */
static int read_records(request_ctx *c, const Lapse__GetStreamRecordsRequest *r,
                        const table_schema *t, uint64_t after, size_t limit, int64_t until,
                        change_list *l)
{
    node_server *ns = c->ns;
    char err[512] = "";
    int rv;
    for (;;) {
        uint64_t gen = current_gen(ns->streams); /* before the read: invariant 1 */
        if ((rv = stream_read(ns->st, t->id, r->shard, after, limit, STREAMS_MAX_BYTES, l, err,
                              sizeof(err))) != 0) {
            request_store_error(c, rv, err);
            return -1;
        }
        if (l->n > 0 || r->wait_ms == 0 || r->raw || clock_mono_now().ms >= until) {
            break;
        }
        /* Nothing to read while the shard went past after_sequence: the
         * records were trimmed (or one arrived just now). Answer at once. */
        uint64_t last = 0;
        if ((rv = stream_last_seq(ns->st, t->id, r->shard, &last, err, sizeof(err))) != 0) {
            request_store_error(c, rv, err);
            return -1;
        }
        if (last > after || wait_arrival(ns->streams, gen, until) != 0) {
            break;
        }
    }
    return 0;
}

void streams_get_records(request_ctx *c)
{
    const Lapse__GetStreamRecordsRequest *r = c->req->get_stream_records;
    change_list l;
    change_list_init(&l);
    char err[512] = "";
    int rv;
    if (request_need_body(c, r) != 0 || request_find_table(c, r->table) != 0) {
        goto out;
    }
    const table_schema *t = &c->table->schema;
    if (check_read(c, r, t) != 0) {
        goto out;
    }
    const uint64_t gen_base = schema_stream_base(&t->stream);
    size_t limit =
        r->limit == 0 || r->limit > STREAMS_DEFAULT_LIMIT ? STREAMS_DEFAULT_LIMIT : r->limit;
    /* A long poll waits at most wait_ms, and answers before the deadline. */
    int64_t until = clock_mono_now().ms + (r->raw ? 0 : (int64_t)r->wait_ms);
    if (until > c->deadline_mono_ms - STREAMS_REPLY_MARGIN_MS) {
        until = c->deadline_mono_ms - STREAMS_REPLY_MARGIN_MS;
    }
    /* A stream turned on again is read from its generation's first record:
     * records of an earlier one may still be kept here (docs/replication.md,
     * "A stream turned on again"). A raw read (a copy filling) takes all. */
    const uint64_t after = !r->raw && gen_base > 0 && r->after_sequence < gen_base - 1
                               ? gen_base - 1
                               : r->after_sequence;
    if (read_records(c, r, t, after, limit, until, &l) != 0) {
        goto out;
    }
    Lapse__GetStreamRecordsResponse *out = arena_alloc(c->a, sizeof(*out));
    if (out == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    lapse__get_stream_records_response__init(out);
    if ((rv = r->raw ? reply_raw(c, &l, t->id, r->shard, out)
                     : reply_records(c, &l, r->shard, out)) != 0) {
        request_store_error(c, rv, rv == LAPSE_ENOMEM ? "out of memory" : "a record is corrupt");
        goto out;
    }
    /* A raw read (a copy filling itself, page after page) needs neither
     * end of the shard: two seeks saved per page. */
    if (!r->raw &&
        (rv = shard_ends(c, t->id, r->shard, after, gen_base, &l, out, err, sizeof(err))) != 0) {
        request_store_error(c, rv, err);
        goto out;
    }
    c->resp->body_case = LAPSE__RESPONSE__BODY_GET_STREAM_RECORDS;
    c->resp->get_stream_records = out;
out:
    change_list_fini(&l);
}

/* ------------------------------------------------------------------------ */
/* Retention                                                                 */
/* ------------------------------------------------------------------------ */

/* One table to trim, copied out of the map. */
typedef struct trim_job {
    uint32_t table_id;
    int64_t retention_ms;
} trim_job;

/* The tables whose shards this node hosts. *jobs: caller frees. */
static size_t trim_jobs(node_server *ns, trim_job **jobs)
{
    node_map *m = maps_acquire(ns);
    const pmap *pm = m->pm;
    size_t n = 0;
    *jobs = calloc(pm->ntables ? pm->ntables : 1, sizeof(**jobs));
    for (size_t i = 0; *jobs != NULL && i < pm->ntables; i++) {
        const pmap_table *t = &pm->tables[i];
        int hosts = 0;
        for (uint32_t p = 0; t->schema.stream.enabled && p < t->schema.partitions && !hosts; p++) {
            hosts = pmap_replicas_index(pmap_stream_shard(t, p), ns->id) >= 0;
        }
        if (hosts) {
            uint32_t h = t->schema.stream.retention_hours;
            (*jobs)[n].table_id = t->schema.id;
            (*jobs)[n].retention_ms =
                (int64_t)(h != 0 ? h : SCHEMA_DEFAULT_STREAM_RETENTION_HOURS) * 3600 * 1000;
            n++;
        }
    }
    maps_release(m);
    return n;
}

static int stopping(streams *s)
{
    pthread_mutex_lock(&s->lock);
    int stop = s->stopping;
    pthread_mutex_unlock(&s->lock);
    return stop;
}

/* One retention pass: every table whose shards this node hosts is trimmed
 * to its retention, one stream_trim step (STREAMS_TRIM_STEP records looked
 * at, one WriteBatch) at a time until the step reports nothing more,
 * checking for stop between steps. A failing step is logged and the table
 * left for the next pass. */
static void trim_pass(streams *s)
{
    node_server *ns = s->ns;
    trim_job *jobs = NULL;
    size_t n = trim_jobs(ns, &jobs);
    clock_wall now = clock_wall_now(); /* one snapshot per pass */
    for (size_t i = 0; i < n && !stopping(s); i++) {
        size_t total = 0;
        int more = 1;
        while (more && !stopping(s)) {
            size_t trimmed = 0;
            char err[256] = "";
            int rv = stream_trim(ns->st, jobs[i].table_id, now, jobs[i].retention_ms,
                                 STREAMS_TRIM_STEP, &trimmed, &more, err, sizeof(err));
            if (rv != 0) {
                log_error("stream retention of table id %u: %s: %s", jobs[i].table_id,
                          lapse_strerror(rv), err);
                break;
            }
            total += trimmed;
        }
        if (total > 0) {
            metrics_counter_add(
                ns->metrics, "lapse_stream_trimmed_records_total",
                "Stream records deleted here after their retention" METRICS_SINCE_START, NULL,
                (double)total);
            log_info("stream retention: %zu records of table id %u trimmed", total,
                     jobs[i].table_id);
        }
    }
    free(jobs);
}

/* The retention thread: a retention pass every trim interval, each wait
 * cut short by streams_stop. */
static void *trim_run(void *arg)
{
    streams *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        struct timespec ts = clock_mono_abstime(s->trim_interval_ms);
        while (!s->stopping) {
            if (pthread_cond_timedwait(&s->stop_cond, &s->lock, &ts) == ETIMEDOUT) {
                break;
            }
        }
        int stop = s->stopping;
        pthread_mutex_unlock(&s->lock);
        if (stop) {
            return NULL;
        }
        trim_pass(s);
    }
}

/* ------------------------------------------------------------------------ */
/* Life cycle                                                                */
/* ------------------------------------------------------------------------ */

int streams_open(streams **out, node_server *ns, int64_t trim_interval_ms, char *err, size_t errlen)
{
    *out = NULL;
    streams *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    s->ns = ns;
    s->trim_interval_ms =
        trim_interval_ms > 0 ? trim_interval_ms : STREAMS_DEFAULT_TRIM_INTERVAL_MS;
    pthread_mutex_init(&s->lock, NULL);
    clock_cond_init_mono(&s->arrived);
    clock_cond_init_mono(&s->stop_cond);
    int rc = pthread_create(&s->thread, NULL, trim_run, s);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the stream retention thread: %s", strerror(rc));
        streams_free(s);
        return LAPSE_ENOMEM;
    }
    s->started = 1;
    *out = s;
    return 0;
}

void streams_stop(streams *s)
{
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->arrived);
    pthread_cond_broadcast(&s->stop_cond);
    pthread_mutex_unlock(&s->lock);
    if (s->started) {
        pthread_join(s->thread, NULL);
        s->started = 0;
    }
}

void streams_free(streams *s)
{
    if (s == NULL) {
        return;
    }
    streams_stop(s);
    pthread_cond_destroy(&s->stop_cond);
    pthread_cond_destroy(&s->arrived);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
